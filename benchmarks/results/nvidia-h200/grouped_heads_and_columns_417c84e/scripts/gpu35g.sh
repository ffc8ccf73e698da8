set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
python3 -c "import torch, triton; print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, torch.backends.cudnn.version())" > $OUT/versions.txt
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_heads.py tests/test_cuda_gpu.py tests/test_numerics_gpu.py 2>&1 | tail -3 | tee $OUT/gpu_tests.log
for e in llama:prefill llama:decode; do
  timeout 90 python3 .devscratch/llama34.py $e torch.compile,fuseopt-cuda 2>&1 | grep "^==\|sync:" | tee -a $OUT/llama_$COMMIT.txt
done
