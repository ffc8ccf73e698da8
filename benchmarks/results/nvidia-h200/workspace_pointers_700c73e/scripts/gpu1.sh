set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
mkdir -p $OUT
# before: 4ed8927's tree
(cd .devscratch/before && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1 && \
 PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_b FUSEOPT_GIT_COMMIT=4ed8927 timeout 200 python3 -m benchmarks.launch_cost --calls 200 --systems driver-floor,triton-floor,fuseopt-triton,fuseopt-cuda,eager --out $OUT/launch_cost_before_4ed8927.md) || echo BEFORE FAILED
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export FUSEOPT_GIT_COMMIT=$(cat .devscratch/commit)
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 200 python3 -m benchmarks.launch_cost --calls 200 --systems driver-floor,triton-floor,fuseopt-triton,fuseopt-cuda,eager --out $OUT/launch_cost_after.md || echo AFTER FAILED
PYTHONPATH=$PWD:/tmp/site FUSEOPT_CACHE_DIR=/tmp/cache_a timeout 150 python3 -m pytest -q -rfE tests/test_triton_host_runs.py tests/test_host_source.py tests/test_dynamic_sizes.py tests/test_cuda_gpu.py 2>&1 | tail -15 | tee $OUT/gpu_tests.txt
