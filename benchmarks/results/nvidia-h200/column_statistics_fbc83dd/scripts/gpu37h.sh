set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
timeout 100 python3 -m pytest -q -p no:cacheprovider --show-capture=no tests/test_merged_linears.py 2>&1 | tail -4 > $OUT/gpu_tests_merged_linears_$COMMIT.log || true
