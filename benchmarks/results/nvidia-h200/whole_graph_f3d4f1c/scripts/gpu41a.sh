set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
ROOT=$PWD
mkdir -p $OUT
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=ab720db
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_whole_graph_gpu.py tests/test_cuda_gpu.py tests/test_triton_gpu.py tests/test_dynamic_sizes.py tests/test_trusted_inputs.py -k "reduce_overhead or whole or graph or buffer" 2>&1 | tail -25 | tee $OUT/gpu_tests.txt || true
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 120 python3 benchmarks/results/nvidia-h200/whole_graph_f3d4f1c/scripts/ro41.py llama:decode triton,cuda 2>&1 | grep -v -i warn | tee $OUT/ro_after.txt || true
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 170 python3 -m benchmarks.host_overhead --models llama:decode --systems "torch.compile reduce-overhead,fuseopt-triton reduce-overhead,fuseopt-cuda reduce-overhead" --rounds 2 --calls 200 --top 12 --out $OUT/host_after.md 2>&1 | grep -v -i warn | tail -12 || true
cd .devscratch/before && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=bf254f0
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_b timeout 100 python3 -m benchmarks.host_overhead --models llama:decode --systems "fuseopt-triton reduce-overhead,fuseopt-cuda reduce-overhead" --rounds 1 --calls 200 --top 12 --out $OUT/host_before.md 2>&1 | grep -v -i warn | tail -10 || true
