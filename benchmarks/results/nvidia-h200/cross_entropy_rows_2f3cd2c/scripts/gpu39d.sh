set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
ROOT=$PWD
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/versions.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/versions.txt
export ONLY=ce8192x32000,ce65536x1000,ce4096x128256,ce16384x50257,ce2048x151936,softmax1024x131072,lse8192x32000
run_tree() {  # dir label systems timeout
  (cd $1 && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
   PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_$2 timeout $4 python3 $ROOT/.devscratch/ce39.py $3 2>&1 | grep -v -i warn | tee $OUT/ce_$2.txt) || true
}
run_tree .devscratch/before before fuseopt-triton,fuseopt-cuda 120
run_tree . after torch.compile,fuseopt-triton,fuseopt-cuda 160
export PYTHONPATH=$PWD:/tmp/site
FUSEOPT_CACHE_DIR=/tmp/cache_b timeout 110 python3 .devscratch/cols37.py cross_entropy torch.compile,fuseopt-triton,fuseopt-cuda 2>&1 | grep -v -i warn > $OUT/breadth_cross_entropy.txt || true
timeout 170 python3 -m pytest -q tests/test_numerics_gpu.py tests/test_cuda_gpu.py tests/test_split_reductions.py tests/test_nll_loss.py -x > $OUT/gpu_tests.log 2>&1 || true
tail -3 $OUT/gpu_tests.log
