set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
python3 -c "import torch, triton, transformers; print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, torch.backends.cudnn.version(), transformers.__version__)" > $OUT/versions.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_merged_linears.py tests/test_output_views.py tests/test_grouped_heads.py 2>&1 | tail -15 | tee $OUT/gpu_tests.log
S=torch.compile,fuseopt-triton,fuseopt-triton/nomerge,fuseopt-cuda,fuseopt-cuda/nomerge
for e in llama:prefill llama:decode qwen2:prefill bert:prefill; do
  timeout 130 python3 .devscratch/merge36.py $e $S 2>&1 | grep "^==\|Error\|error" | tee -a $OUT/models_$COMMIT.txt
done
