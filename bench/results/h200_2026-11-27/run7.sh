#!/bin/bash
set -u
export PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy_cache GPUKSVM_TEST_GPU=real PYTHONPATH=$PWD
L=$OUT/log.txt
S=$(date +%s)
st(){ echo; echo "=== [t=$(( $(date +%s)-S ))s] $*"; }
{
st install; python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -3
st tests; timeout 60 python3 -m pytest -p no:cacheprovider -n 8 --dist loadscope -q -rfE --tb=short --timeout 50 tests/test_tune_okfeb.py tests/test_tune_kernel_svc.py 2>&1 | grep -v "^  [a-z_]*_f[36][24] " | tail -8
st ab_chains; timeout 230 python3 bench/results/h200_2026-11-27/ab_chains.py 5000,50000 3,1 512MB,24GB 2>&1 | tail -20
st done
} > $L 2>&1
