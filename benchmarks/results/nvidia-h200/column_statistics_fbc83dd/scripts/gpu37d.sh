set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
timeout 40 python3 .devscratch/sym37.py > $OUT/symbolic_packing_$COMMIT.txt 2>&1 || true
timeout 60 python3 .devscratch/merge36b.py llama:prefill fuseopt-triton,fuseopt-triton/nomerge,fuseopt-cuda 3 2>&1 | grep "^==\|Error" > $OUT/llama_prefill_$COMMIT.txt || true
CASES=layer_norm_2d,layer_norm_3d,group_norm,instance_norm,batch_norm_eval,softmax_rows,sum_rows,layer_norm_rows,argmax_first
timeout 170 python3 .devscratch/cols37.py $CASES torch.compile,fuseopt-triton,fuseopt-cuda > $OUT/norms_after_$COMMIT.txt 2>&1 || true
cd .devscratch/before && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site
timeout 110 python3 ../cols37.py $CASES fuseopt-triton,fuseopt-cuda > $OUT/norms_before_006c795.txt 2>&1 || true
