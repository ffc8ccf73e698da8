set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
mkdir -p $OUT
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=$(cat .devscratch/commit)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 150 python3 .devscratch/diag41.py triton,cuda 2>&1 | grep -v -i warn | tail -20 | tee $OUT/diag.txt || true
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_whole_graph_gpu.py tests/test_triton_gpu.py tests/test_cuda_gpu.py -k "whole or reduce_overhead or graph" 2>&1 | grep -v -i "warn" | tail -8 | tee $OUT/gpu_tests.txt || true
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 150 python3 -m benchmarks.host_overhead --models llama:decode --systems "torch.compile reduce-overhead,fuseopt-triton reduce-overhead,fuseopt-cuda reduce-overhead" --rounds 1 --calls 200 --top 12 --out $OUT/host_decode.md 2>&1 | grep "^|" || true
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 170 python3 -m benchmarks.host_overhead --models llama:prefill,gpt2:prefill --systems "torch.compile,fuseopt-triton,fuseopt-cuda" --rounds 1 --calls 100 --top 15 --out $OUT/host_prefill.md 2>&1 | grep "^|" || true
