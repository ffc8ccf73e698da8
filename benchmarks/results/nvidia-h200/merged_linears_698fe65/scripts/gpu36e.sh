set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>/dev/null || true
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
timeout 150 python3 .devscratch/ro36.py 2>&1 | grep -v "Warn\|warn(" | tee $OUT/ro_decisions_$COMMIT.txt | grep "==\|tottime\|{" | head -60
