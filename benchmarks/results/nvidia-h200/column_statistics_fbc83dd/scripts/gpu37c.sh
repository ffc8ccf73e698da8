set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
timeout 120 python3 -m pytest -q -p no:cacheprovider --tb=short tests/test_merged_linears.py tests/test_output_views.py tests/test_cuda_uniform_carries.py 2>&1 | tail -60 > $OUT/gpu_tests.log || true
CASES=var_columns,var_middle,amax_first,sum_first,sum_middle,sum_first_last,layer_norm_2d,layer_norm_3d,group_norm,instance_norm,softmax_rows,sum_rows,layer_norm_rows,argmax_first
export FUSEOPT_CACHE_DIR=/tmp/cache_a
timeout 200 python3 .devscratch/cols37.py $CASES torch.compile,fuseopt-triton,fuseopt-cuda > $OUT/after_$COMMIT.txt 2>&1 || true
export FUSEOPT_CACHE_DIR=/tmp/cache_b FUSEOPT_CUDA_TARGET=warp_per_row=True
timeout 120 python3 .devscratch/cols37.py $CASES fuseopt-cuda > $OUT/cuda_wpr_$COMMIT.txt 2>&1 || true
NCU="ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section InstructionStats -k regex:fused_0 --launch-skip 1 --launch-count 1"
timeout 60 $NCU python3 .devscratch/ncu37.py var_middle 1024x64x512 fuseopt-cuda > $OUT/ncu_var_middle_small_cuda_wpr.txt 2>&1 || true
timeout 60 $NCU python3 .devscratch/ncu37.py amax_first 64x1024x1024 fuseopt-cuda > $OUT/ncu_amax_first_cuda_wpr.txt 2>&1 || true
