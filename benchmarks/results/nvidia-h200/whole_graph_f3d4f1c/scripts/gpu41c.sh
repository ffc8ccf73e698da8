set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
mkdir -p $OUT
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=$(cat .devscratch/commit)
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 330 python3 -m benchmarks.models --only llama:decode,llama:prefill,qwen2:prefill,bert:prefill,gpt2:prefill --systems eager,torch.compile-reduce-overhead,fuseopt-triton-reduce-overhead,fuseopt-cuda-reduce-overhead --budget-s 300 --system-timeout-s 80 --no-warm-compile --no-chart --out $OUT/models_ro_after 2>&1 | grep -v -i warn | tail -5 || true
cd .devscratch/before && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=bf254f0
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_b timeout 200 python3 -m benchmarks.models --only llama:decode,llama:prefill,qwen2:prefill,bert:prefill,gpt2:prefill --systems eager,fuseopt-triton-reduce-overhead,fuseopt-cuda-reduce-overhead --budget-s 170 --system-timeout-s 60 --no-warm-compile --no-chart --out $OUT/models_ro_before 2>&1 | grep -v -i warn | tail -5 || true
