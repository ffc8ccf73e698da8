set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
ROOT=$PWD
mkdir -p $OUT
run_tree() {  # dir label systems timeout [cases]
  (cd $1 && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
   PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_$2 timeout $4 python3 $ROOT/.devscratch/am40.py "$3" "$5" 2>&1 | grep -v -i warn | tee $OUT/am_$2.txt) || true
}
run_tree . after fuseopt-triton 100 "argmax_first 4096x8192,argmin_first 65536x1024,argmax_middle 64x1024x1024,argmax_flat 67108864,argmax_flat 1000003,argmax_last 8192x32000"
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_t timeout 110 python3 -m pytest -q -p no:cacheprovider tests/test_index_reductions.py tests/test_split_reductions.py 2>&1 | tail -4 | tee $OUT/gpu_tests.txt || true
run_tree .devscratch/before before fuseopt-triton 45 "argmax_flat 67108864,argmax_flat 1000003"
