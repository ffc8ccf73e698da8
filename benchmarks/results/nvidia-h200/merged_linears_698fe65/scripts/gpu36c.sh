set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
python3 -c "import torch, triton, transformers; print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, torch.backends.cudnn.version(), transformers.__version__)" > $OUT/versions.txt
timeout 150 python3 .devscratch/merge36b.py llama:prefill "torch.compile,fuseopt-triton,fuseopt-triton/nomerge,fuseopt-cuda,fuseopt-cuda/nomerge" 5 2>&1 | grep "^==\|Error" | tee $OUT/llama_prefill_$COMMIT.txt
timeout 300 python3 -m pytest -q -p no:cacheprovider -x tests/test_*gpu*.py tests/test_merged_linears.py tests/test_output_views.py tests/test_region_layouts.py tests/test_library_gemm.py tests/test_decode_sizes.py tests/test_growing_caches.py 2>&1 | tail -25 > $OUT/gpu_tests.log || true
tail -4 $OUT/gpu_tests.log
