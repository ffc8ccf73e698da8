set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
ROOT=$PWD
mkdir -p $OUT
C="max_dim 4096x128256,argmax_flat 67108864,argmax_flat 1000003,argmax_last 8x128256,argmax_last 8192x32000"
run_tree() {  # dir label systems timeout [cases]
  (cd $1 && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
   PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_$2 timeout $4 python3 $ROOT/.devscratch/am40.py "$3" "$5" 2>&1 | grep -v -i warn | tee $OUT/am_$2.txt) || true
}
run_tree .devscratch/before before fuseopt-triton 110 "$C"
run_tree . after torch.compile,fuseopt-triton 150 "$C"
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_t timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_index_reductions.py tests/test_split_reductions.py -x 2>&1 | tail -4 | tee $OUT/gpu_tests.txt || true
