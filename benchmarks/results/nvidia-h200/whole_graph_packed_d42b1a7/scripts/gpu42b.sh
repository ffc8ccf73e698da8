set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=/tmp/site
mkdir -p $OUT
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=$(cat .devscratch/commit)
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_whole_graph_gpu.py -k "attention and triton" --tb=long -o log_cli=true --log-cli-level=DEBUG 2>&1 | grep -v -i "warn" | grep -i -B2 -A30 "graph\|Error\|assert" | head -150 | tee $OUT/attn_test.txt || true
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 330 python3 -m benchmarks.host_overhead --models llama:prefill,gpt2:prefill --systems "torch.compile,fuseopt-triton,fuseopt-cuda" --rounds 1 --calls 100 --top 15 --out $OUT/host_prefill.md 2>&1 | grep "^|\|rror" || true
