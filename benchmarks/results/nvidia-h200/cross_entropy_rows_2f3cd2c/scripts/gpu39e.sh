set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site
mkdir -p $OUT
export ONLY=ce8192x32000,ce4096x128256
timeout 60 python3 .devscratch/ce39.py torch.compile,fuseopt-triton,fuseopt-cuda 2>&1 | grep -v -i warn > $OUT/ce_1850172.txt || true
timeout 200 python3 -m pytest -q tests/test_numerics_gpu.py tests/test_split_reductions.py tests/test_nll_loss.py tests/test_tile_online.py tests/test_backend_options.py > $OUT/gpu_tests.log 2>&1 || true
tail -1 $OUT/gpu_tests.log; grep "^==" $OUT/ce_1850172.txt
