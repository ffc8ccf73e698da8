set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
ROOT=$PWD
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/versions.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/versions.txt
run_tree() {  # dir label systems timeout
  (cd $1 && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
   PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_$2 timeout $4 python3 $ROOT/.devscratch/am40.py $3 2>&1 | grep -v -i warn | tee $OUT/am_$2.txt) || true
}
run_tree .devscratch/before before fuseopt-triton,fuseopt-cuda 170
run_tree . after eager,torch.compile,fuseopt-triton,fuseopt-cuda 300
