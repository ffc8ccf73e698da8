set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
mkdir -p $OUT
ROOT=$PWD
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 200 python3 .devscratch/vec41.py "fuseopt-cuda,fuseopt-triton,torch.compile" 2>&1 | grep -v -i warn | tee $OUT/vec_after.txt || true
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gpu.py tests/test_index_reductions.py 2>&1 | tail -3 | tee $OUT/gpu_tests.txt || true
cd .devscratch/before && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_b timeout 100 python3 $ROOT/.devscratch/vec41.py "fuseopt-cuda" 2>&1 | grep -v -i warn | tee $OUT/vec_before.txt || true
