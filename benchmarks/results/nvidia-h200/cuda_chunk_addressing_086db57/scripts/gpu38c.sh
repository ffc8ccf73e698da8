set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/versions.txt; python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/versions.txt
CASES=reduction,var_columns,layer_norm_rows,group_norm,layer_norm_2d,softmax_rows,elementwise
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gpu.py tests/test_numerics_gpu.py tests/test_split_reductions.py tests/test_cuda_index_facts.py tests/test_cuda_dynamic_sizes.py 2>&1 | tail -4 > $OUT/gpu_tests_$COMMIT.log || true
export FUSEOPT_CACHE_DIR=/tmp/cache_after
timeout 130 python3 .devscratch/cols37.py $CASES fuseopt-cuda > $OUT/cuda_after_$COMMIT.txt 2>&1 || true
export FUSEOPT_CACHE_DIR=/tmp/cache_wpr FUSEOPT_CUDA_TARGET=warp_per_row=True
timeout 110 python3 .devscratch/cols37.py $CASES fuseopt-cuda > $OUT/cuda_after_wpr_$COMMIT.txt 2>&1 || true
unset FUSEOPT_CUDA_TARGET
export FUSEOPT_CACHE_DIR=/tmp/cache_before
cd .devscratch/before && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site
timeout 110 python3 ../cols37.py $CASES fuseopt-cuda > $OUT/cuda_before_1f55f0c.txt 2>&1 || true
