set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
CASES=var_columns,var_middle,sum_first,layer_norm_2d,layer_norm_3d,group_norm,instance_norm,layer_norm_rows
timeout 200 python3 .devscratch/cols37.py $CASES torch.compile,fuseopt-triton,fuseopt-cuda > $OUT/after_$COMMIT.txt 2>&1 || true
NCU="ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section InstructionStats -k regex:fused_0 --launch-skip 1 --launch-count 1"
for sys in fuseopt-cuda fuseopt-triton; do
  timeout 60 $NCU python3 .devscratch/ncu37.py var_middle 1024x64x512 $sys > $OUT/ncu_var_middle_small_$sys.txt 2>&1 || true
  timeout 60 $NCU python3 .devscratch/ncu37.py amax_first 64x1024x1024 $sys > $OUT/ncu_amax_first_$sys.txt 2>&1 || true
done
cd .devscratch/before && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site
timeout 150 python3 ../cols37.py $CASES fuseopt-triton,fuseopt-cuda > $OUT/before_006c795.txt 2>&1 || true
