set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site
mkdir -p $OUT
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gpu.py -k "nan or ragged_shapes" 2>&1 | tail -3 > $OUT/gpu_tests_nan.log || true
