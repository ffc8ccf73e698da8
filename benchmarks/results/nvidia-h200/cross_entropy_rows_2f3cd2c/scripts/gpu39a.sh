set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/versions.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/versions.txt
S="torch.compile,fuseopt-triton,fuseopt-triton@max_row_block=8192,fuseopt-triton@max_row_block=16384"
FUSEOPT_CACHE_DIR=/tmp/c1 timeout 280 python3 .devscratch/ce39.py $S 2>&1 | grep -v Warning | tee $OUT/ce_libdevice.txt || true
FASTEXP=1 FUSEOPT_CACHE_DIR=/tmp/c2 timeout 200 python3 .devscratch/ce39.py fuseopt-triton,fuseopt-triton@max_row_block=8192 2>&1 | grep -v Warning | tee $OUT/ce_fastexp.txt || true
