set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
mkdir -p $OUT
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=$(cat .devscratch/commit)
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 170 python3 -m pytest -q -p no:cacheprovider tests/test_whole_graph_gpu.py tests/test_cuda_gpu.py tests/test_merged_linears.py tests/test_dynamic_sizes.py tests/test_trusted_inputs.py 2>&1 | grep -v -i "warn" | tail -8 | tee $OUT/gpu_tests.txt || true
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_triton_gpu.py -k "reduce_overhead" 2>&1 | tail -2 | tee -a $OUT/gpu_tests.txt || true
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 150 python3 -m benchmarks.host_overhead --models llama:decode --systems "torch.compile reduce-overhead,fuseopt-triton reduce-overhead,fuseopt-cuda reduce-overhead" --rounds 1 --calls 200 --top 12 --out $OUT/host_decode.md 2>&1 | grep "^|" || true
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 150 python3 -m benchmarks.host_overhead --models llama:prefill --systems "torch.compile reduce-overhead,fuseopt-triton reduce-overhead,fuseopt-cuda reduce-overhead" --rounds 1 --calls 50 --top 12 --out $OUT/host_prefill.md 2>&1 | grep "^|" || true
