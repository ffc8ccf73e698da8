set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
CASES=sum_middle,sum_first,sum_first_last,mean_middle_keepdim,amax_first,var_middle,sum_columns,var_columns,argmax_first
timeout 200 python3 .devscratch/cols35.py $CASES torch.compile,fuseopt-triton,fuseopt-cuda > $OUT/cols_after_$COMMIT.txt 2>&1 || true
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_gpu.py tests/test_numerics_gpu.py tests/test_norm_families_gpu.py 2>&1 | tail -4 | tee $OUT/gpu_tests.log
