set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
timeout 40 python3 .devscratch/sym37.py > $OUT/symbolic_packing_$COMMIT.txt 2>&1 || true
timeout 300 python3 -m pytest -q -p no:cacheprovider -p no:logging tests/test_cuda_gpu.py tests/test_numerics_gpu.py tests/test_cuda_uniform_carries.py tests/test_split_reductions.py 2>&1 | tail -15 > $OUT/gpu_tests_$COMMIT.log || true
