set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
mkdir -p $OUT
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=$(cat .devscratch/commit)
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_e
timeout 180 python3 -m benchmarks.host_overhead --models llama:decode --systems "torch.compile,fuseopt-triton,fuseopt-cuda" --rounds 1 --calls 200 --top 15 --out $OUT/host_overhead_llama_decode.md > $OUT/llama_decode.log 2>&1 || echo DECODE FAILED/TIMEOUT
grep -A6 "^| system" $OUT/host_overhead_llama_decode.md || true
timeout 150 python3 -m benchmarks.host_overhead --models bert:prefill --systems "torch.compile,fuseopt-triton,fuseopt-cuda" --rounds 1 --calls 200 --top 15 --out $OUT/host_overhead_bert_prefill.md > $OUT/bert.log 2>&1 || echo BERT FAILED/TIMEOUT
grep -A6 "^| system" $OUT/host_overhead_bert_prefill.md || true
