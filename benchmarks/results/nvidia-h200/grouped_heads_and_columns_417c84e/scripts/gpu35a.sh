set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 .devscratch/gqa35.py 2>&1 | grep -v Warning
python3 -m benchmarks.kernel_breakdown --models llama:prefill --systems torch.compile,fuseopt-cuda --top 40 2>&1 | grep -v Warning
