#!/bin/bash
# one device call: GPU tests, the tune bench at small scale (GPU measured), the paper-scale cases
set -u
export PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy_cache GPUKSVM_TEST_GPU=real
L=$OUT/log.txt
S=$(date +%s)
st(){ echo; echo "=== [t=$(( $(date +%s)-S ))s] $*"; }
{
st env; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; free -g | head -2
python3 -c "import cupy,numpy,scipy,sklearn,numba;print('cupy',cupy.__version__,'numpy',numpy.__version__,'scipy',scipy.__version__,'sklearn',sklearn.__version__,'numba',numba.__version__)"
st install; python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -3
st tests; timeout 100 python3 -m pytest -m gpu -p no:cacheprovider -n 8 --dist loadscope -q -rfE --tb=short --timeout 80 2>&1 | grep -v "^  [a-z_]*_f[36][24] " | tail -25; echo "tests rc=${PIPESTATUS[0]}"
st tune_small; timeout 75 python3 -m bench tune --scale small --device gpu --repeats 1 --out $OUT/tune_small.jsonl 2>&1 | grep -v "Warning\|warnings.warn" | tail -30
st svc_ijcnn1_50k; GPUKSVM_CPU_MEMORY_BUDGET=24GB timeout 300 python3 -m bench.tune svc_ijcnn1 --skip same_estimator --device gpu --out $OUT/tune_50k.jsonl 2>&1 | grep -v "Warning\|warnings.warn" | tail -30
st torchkm_p10; timeout 60 python3 -m bench.tune torchkm_p10 --skip same_estimator --device gpu --out $OUT/tune_torchkm.jsonl 2>&1 | grep -v "Warning\|warnings.warn" | tail -20
st done
} > $L 2>&1
