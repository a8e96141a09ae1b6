#!/bin/bash
set -u
export PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy_cache GPUKSVM_TEST_GPU=real PYTHONPATH=$PWD
L=$OUT/log.txt
S=$(date +%s)
st(){ echo; echo "=== [t=$(( $(date +%s)-S ))s] $*"; }
{
st install; python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -3
st tests; timeout 75 python3 -m pytest -p no:cacheprovider -q -rfE --tb=short --timeout 60 -n 4 --dist loadscope tests/solvers/test_gpu_factorization.py tests/test_gpuemu_fidelity.py tests/test_tune_kernel_svc.py tests/test_kernel_svc.py "tests/test_cvm.py::test_gpu_fit_does_not_depend_on_the_row_order" 2>&1 | grep -v "^  [a-z_]*_f[36][24] " | tail -30
st tune; timeout 130 python3 -m bench tune --scale small --device gpu --repeats 2 --out $OUT/tune.jsonl 2>&1 | grep -v "UserWarning\|warnings.warn" | tail -30
st done
} > $L 2>&1
