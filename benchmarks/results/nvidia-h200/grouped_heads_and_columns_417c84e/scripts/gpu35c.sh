set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
timeout 150 python3 .devscratch/dump35.py llama:decode cuda > $OUT/decode_copies.txt 2>&1 || true
timeout 150 python3 -m benchmarks.kernel_breakdown --models qwen2:prefill --systems fuseopt-cuda --top 25 > $OUT/qwen2_after.txt 2>&1 || true
timeout 200 python3 -m benchmarks.kernel_breakdown --models llama:prefill --systems torch.compile,fuseopt-cuda --top 12 --cpu 30 > $OUT/llama_prefill_cpu_after.txt 2>&1 || true
cd .devscratch/before && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site
timeout 120 python3 -m benchmarks.kernel_breakdown --models qwen2:prefill --systems fuseopt-cuda --top 25 > $OUT/qwen2_before.txt 2>&1 || true
