python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
mkdir -p $OUT
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 100 python3 -m pytest -q -p no:cacheprovider -rfE -k "merged_linears_replay or packed_parameters_on_the_gpu" tests/test_whole_graph_gpu.py tests/test_merged_linears.py 2>&1 | grep -E "passed|failed|FAILED|^E " | tail -25 | tee $OUT/gpu_tests.txt
