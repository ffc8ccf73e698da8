set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
mkdir -p $OUT
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=$(cat .devscratch/commit)
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_whole_graph_gpu.py 2>&1 | tail -3 | tee $OUT/gpu_tests.txt || true
for sys in fuseopt-cuda fuseopt-triton torch.compile; do
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 120 python3 .devscratch/hostdiag42.py $sys gpt2:prefill 2>&1 | grep -v -i warn | tee -a $OUT/hostdiag.txt || true
done
