set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
ROOT=$PWD
mkdir -p $OUT
run_tree() {  # dir label systems timeout [cases]
  (cd $1 && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
   PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_$2 timeout $4 python3 $ROOT/.devscratch/am40.py "$3" "$5" 2>&1 | grep -v -i warn | tee $OUT/am_$2.txt) || true
}
run_tree .devscratch/before before fuseopt-triton 140
run_tree . after fuseopt-triton 140
run_tree . whole "fuseopt-triton@statistics_row_block=32768" 60 "argmax_last 8192x32000,max_dim 4096x128256"
run_tree . cuda fuseopt-cuda 100 "argmax_first 4096x8192,argmin_first 65536x1024,argmax_flat 67108864"
