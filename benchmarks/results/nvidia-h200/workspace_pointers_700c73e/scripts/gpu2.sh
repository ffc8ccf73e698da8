set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
mkdir -p $OUT
(cd .devscratch/before && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1 && \
 PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_b FUSEOPT_GIT_COMMIT=4ed8927 timeout 260 python3 -m benchmarks.host_overhead --models llama:prefill,gpt2:prefill --systems "fuseopt-triton,fuseopt-cuda" --rounds 1 --calls 200 --top 12 --out $OUT/host_overhead_before_4ed8927.md > $OUT/host_overhead_before.log 2>&1) || echo BEFORE FAILED
tail -20 $OUT/host_overhead_before_4ed8927.md || true
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=$(cat .devscratch/commit)
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 280 python3 -m benchmarks.host_overhead --models llama:prefill,gpt2:prefill --systems "torch.compile,fuseopt-triton,fuseopt-cuda" --rounds 1 --calls 200 --top 12 --out $OUT/host_overhead_after.md > $OUT/host_overhead_after.log 2>&1 || echo AFTER FAILED
tail -20 $OUT/host_overhead_after.md || true
