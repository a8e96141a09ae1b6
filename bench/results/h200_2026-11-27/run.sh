#!/bin/bash
# one device call: env, doctor, GPU tests (parallel, then failures serially), tune on GPU, kernel roofline
set -u
export PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy_cache GPUKSVM_TEST_GPU=real
L=$OUT/log.txt
S=$(date +%s)
st(){ echo; echo "=== [t=$(( $(date +%s)-S ))s] $*"; }
{
st env; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; which python3; nproc
python3 -c "import cupy,numpy,scipy,sklearn;print('cupy',cupy.__version__,'numpy',numpy.__version__,'scipy',scipy.__version__,'sklearn',sklearn.__version__)"
python3 -m pip list 2>/dev/null | grep -iE "^(numba|dask|distributed|hypothesis|pytest|pytest-xdist|pytest-timeout|joblib|threadpoolctl|psutil|pandas) "
st install; python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -3
python3 -c "import gpuksvm;print(gpuksvm.__file__)"
st doctor; timeout 45 python3 -m gpuksvm doctor 2>&1 | tail -40
st tests; timeout 250 python3 -m pytest -m gpu -n 6 --dist loadscope -v -rfE --tb=short --timeout 120 --durations 25 --junitxml $OUT/junit.xml 2>&1; echo "tests rc=$?"
cp .gpu-test-report.json $OUT/ 2>/dev/null
st rerun-failed-serially; timeout 45 python3 -m pytest -m gpu --lf --lfnf=none -q -rfE --tb=short --timeout 40 2>&1 | tail -200; echo "rerun rc=${PIPESTATUS[0]}"
st tune; timeout 140 python3 -m bench tune --scale small --device gpu --repeats 2 --out $OUT/tune.jsonl 2>&1 | tail -60
st kernels; timeout 80 python3 bench/gpu_suite.py --skip-tests --only "" --scale paper --results /tmp/benchres 2>&1 | tail -60
st done
} > $L 2>&1
