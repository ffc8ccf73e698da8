set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
mkdir -p $OUT
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=$(cat .devscratch/commit)
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 200 python3 benchmarks/results/nvidia-h200/whole_graph_f3d4f1c/scripts/prof41.py llama:decode "fuseopt-cuda reduce-overhead,fuseopt-triton reduce-overhead,torch.compile reduce-overhead" 2>&1 | grep -v -i warn | tee $OUT/prof_after.txt || true
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_whole_graph_gpu.py tests/test_triton_gpu.py tests/test_cuda_gpu.py -k "reduce_overhead or whole or graph or buffer" 2>&1 | tail -4 | tee $OUT/gpu_tests.txt || true
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 200 python3 -m benchmarks.host_overhead --models llama:decode --systems "torch.compile reduce-overhead,fuseopt-triton reduce-overhead,fuseopt-cuda reduce-overhead" --rounds 1 --calls 200 --top 12 --out $OUT/host_after.md 2>&1 | grep -v -i warn | grep "^|" || true
