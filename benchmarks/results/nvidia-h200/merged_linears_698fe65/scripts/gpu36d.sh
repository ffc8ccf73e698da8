set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
python3 -c "import torch, triton, transformers; print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, torch.backends.cudnn.version(), transformers.__version__)" > $OUT/versions.txt
timeout 140 python3 .devscratch/merge36b.py llama:decode "torch.compile reduce-overhead,fuseopt-triton reduce-overhead,fuseopt-triton/nomerge reduce-overhead,fuseopt-cuda reduce-overhead,fuseopt-cuda/nomerge reduce-overhead" 9 2>&1 | grep "^==\|Error" | tee $OUT/llama_decode_ro_$COMMIT.txt
timeout 110 python3 .devscratch/merge36b.py bert:prefill "torch.compile,fuseopt-triton,fuseopt-triton/nomerge,fuseopt-cuda,fuseopt-cuda/nomerge" 3 2>&1 | grep "^==\|Error" | tee $OUT/bert_prefill_$COMMIT.txt
