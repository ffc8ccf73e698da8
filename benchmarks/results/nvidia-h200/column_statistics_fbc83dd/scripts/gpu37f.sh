set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
timeout 100 python3 .devscratch/cols37.py layer_norm_2d,group_norm fuseopt-triton,fuseopt-cuda,torch.compile,fuseopt-triton,fuseopt-cuda,torch.compile > $OUT/order_$COMMIT.txt 2>&1 || true
