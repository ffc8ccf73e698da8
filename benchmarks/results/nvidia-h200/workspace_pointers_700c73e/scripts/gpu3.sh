set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=$(cat .devscratch/commit)
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_c
timeout 130 python3 -m pytest -q -rfE tests/test_triton_host_runs.py tests/test_host_source.py tests/test_dynamic_sizes.py tests/test_whole_graph_gpu.py tests/test_merged_linears.py tests/test_explicit_attention.py 2>&1 | tail -8 | tee $OUT/gpu_tests.txt || echo TESTS TIMEOUT
timeout 100 python3 -m benchmarks.launch_cost --calls 200 --systems driver-floor,triton-floor,fuseopt-triton,fuseopt-cuda,eager --out $OUT/launch_cost.md > /dev/null 2>&1 || echo LAUNCH FAILED
cat $OUT/launch_cost.md | tail -8
timeout 330 python3 -m benchmarks.host_overhead --models llama:prefill,gpt2:prefill,llama:decode --systems "torch.compile,fuseopt-triton,fuseopt-cuda" --rounds 1 --calls 200 --top 15 --out $OUT/host_overhead.md > $OUT/host_overhead.log 2>&1 || echo HOST OVERHEAD FAILED/TIMEOUT
grep -A7 "^| system" $OUT/host_overhead.md || tail -20 $OUT/host_overhead.log
