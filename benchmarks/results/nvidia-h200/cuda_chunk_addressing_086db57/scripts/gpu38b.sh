set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
for v in before after; do nvcc -arch=sm_90 -cubin -O3 -o /tmp/sf_$v.cubin .devscratch/sf_$v.cu && cuobjdump -sass /tmp/sf_$v.cubin > $OUT/sf_$v.sass; done
ROWS=sum_first:1024x64x512,amax_first:1024x64x512,sum_middle:64x1024x1024
export FUSEOPT_CACHE_DIR=/tmp/cache_after
timeout 60 python3 .devscratch/cols37.py $ROWS fuseopt-cuda > $OUT/rows_after_$COMMIT.txt 2>&1 || true
ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis -k regex:fused_0 --launch-skip 1 --launch-count 1 python3 .devscratch/cols37.py sum_first:1024x64x512 fuseopt-cuda > $OUT/ncu_after.txt 2>&1 || true
export FUSEOPT_CACHE_DIR=/tmp/cache_before
cd .devscratch/before && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site
timeout 60 python3 ../cols37.py $ROWS fuseopt-cuda > $OUT/rows_before.txt 2>&1 || true
ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis -k regex:fused_0 --launch-skip 1 --launch-count 1 python3 ../cols37.py sum_first:1024x64x512 fuseopt-cuda > $OUT/ncu_before.txt 2>&1 || true
