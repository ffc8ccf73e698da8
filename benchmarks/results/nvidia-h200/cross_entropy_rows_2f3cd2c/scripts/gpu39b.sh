set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
ROOT=$PWD
mkdir -p $OUT
run_tree() {  # dir label systems timeout
  (cd $1 && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
   PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_$2 timeout $4 python3 $ROOT/.devscratch/ce39.py $3 2>&1 | grep -v -i warn | tee $OUT/$2.txt) || true
}
run_tree .devscratch/before before fuseopt-triton 170
run_tree . after torch.compile,fuseopt-triton 250
ONLY=ce8192x32000,ce4096x128256,ce16384x50257,softmax1024x131072,sum8192x32000 run_tree . chunks fuseopt-triton@block_cols=2048,fuseopt-triton@block_cols=8192 100
