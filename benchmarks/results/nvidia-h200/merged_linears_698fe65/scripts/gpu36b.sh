set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
python3 -c "import torch, triton, transformers; print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, torch.backends.cudnn.version(), transformers.__version__)" > $OUT/versions.txt
timeout 170 python3 .devscratch/merge36b.py llama:prefill fuseopt-triton,fuseopt-triton/nomerge,fuseopt-cuda,fuseopt-cuda/nomerge 3 --top 2>&1 | grep -v Warn | tee $OUT/llama_prefill_kernels_$COMMIT.txt
timeout 200 python3 .devscratch/merge36b.py llama:decode "torch.compile,fuseopt-triton,fuseopt-triton/nomerge,fuseopt-cuda,fuseopt-cuda/nomerge" 7 2>&1 | grep "^==\|Error" | tee $OUT/llama_decode_$COMMIT.txt
timeout 200 python3 .devscratch/merge36b.py llama:decode "torch.compile reduce-overhead,fuseopt-triton reduce-overhead,fuseopt-triton/nomerge reduce-overhead,fuseopt-cuda reduce-overhead,fuseopt-cuda/nomerge reduce-overhead" 7 2>&1 | grep "^==\|Error" | tee $OUT/llama_decode_ro_$COMMIT.txt
