set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
timeout 330 python3 -m pytest -q -p no:cacheprovider -p no:logging tests/test_merged_linears.py tests/test_output_views.py tests/test_cuda_uniform_carries.py tests/test_cuda_gpu.py tests/test_numerics_gpu.py 2>&1 | tail -6 > $OUT/gpu_tests_$COMMIT.log || true
