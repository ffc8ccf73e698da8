set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/versions.txt; python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/versions.txt
COLS=var_columns,var_middle,amax_first,sum_first,sum_columns
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gpu.py tests/test_merged_linears.py tests/test_output_views.py -x 2>&1 | tail -4 | tee $OUT/gpu_tests.log || true
export FUSEOPT_CACHE_DIR=/tmp/cache_off
timeout 170 python3 .devscratch/cols37.py $COLS torch.compile,fuseopt-triton,fuseopt-cuda > $OUT/cols_$COMMIT.txt 2>&1 || true
export FUSEOPT_CACHE_DIR=/tmp/cache_on FUSEOPT_CUDA_COLSTATS=1
timeout 110 python3 .devscratch/cols37.py $COLS fuseopt-cuda > $OUT/cols_colstats_$COMMIT.txt 2>&1 || true
