set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
mkdir -p $OUT
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=$(cat .devscratch/commit)
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_whole_graph_gpu.py tests/test_merged_linears.py 2>&1 | grep -v -i warn | grep "^E \|passed\|failed\|FAILED" | tail -30 | tee $OUT/gpu_tests.txt || true
for b in triton cuda; do for m in merge nomerge; do
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 90 python3 .devscratch/merge42.py $b $m llama:decode 2>&1 | grep "^==\|Error\|decisions" | tee -a $OUT/merge.txt || true
done; done
