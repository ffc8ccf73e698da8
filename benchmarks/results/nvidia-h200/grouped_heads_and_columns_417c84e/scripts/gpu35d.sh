set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
timeout 200 python3 .devscratch/cprof35.py llama:prefill fuseopt-cuda,torch.compile,fuseopt-triton > $OUT/cprof_llama.txt 2>&1 || true
timeout 150 python3 .devscratch/cprof35.py gpt2:prefill fuseopt-cuda > $OUT/cprof_gpt2.txt 2>&1 || true
