set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
timeout 150 python3 .devscratch/merge36b.py llama:prefill fuseopt-cuda,torch.compile 3 2>&1 | grep "^==\|Error" > $OUT/llama_prefill_$COMMIT.txt || true
timeout 90 python3 .devscratch/merge36b.py gpt2:prefill fuseopt-cuda 3 2>&1 | grep "^==\|Error" > $OUT/gpt2_prefill_$COMMIT.txt || true
cd .devscratch/before && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site
timeout 100 python3 ../merge36b.py llama:prefill fuseopt-cuda 3 2>&1 | grep "^==\|Error" > $OUT/llama_prefill_1f55f0c.txt || true
