set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
mkdir -p $OUT
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 240 python3 .devscratch/gaps41.py llama:prefill "torch.compile,fuseopt-triton,fuseopt-cuda" 2>&1 | grep -v -i warn | tee $OUT/gaps_prefill.txt || true
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 150 python3 .devscratch/gaps41.py gpt2:prefill "torch.compile,fuseopt-triton" 2>&1 | grep -v -i warn | tee $OUT/gaps_gpt2.txt || true
