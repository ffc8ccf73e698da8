set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site FUSEOPT_GIT_COMMIT=$COMMIT
mkdir -p $OUT
python3 -c "import torch, triton; print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, torch.backends.cudnn.version())" | tee $OUT/versions.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_heads.py tests/test_attention_call.py tests/test_output_views.py tests/test_attention_gpu.py 2>&1 | tail -4 | tee $OUT/gpu_tests.log
python3 - <<'PY' | tee $OUT/cudnn_probe.txt
import torch
from fuseopt.frontends.fx.grouped_heads import cudnn_takes_grouped_heads
for d in (64, 128): 
    for bias in (False, True):
        for causal in (False, True):
            print("cudnn grouped heads: bf16 head dim", d, "bias", bias, "causal", causal, "->", cudnn_takes_grouped_heads(torch.device("cuda"), torch.bfloat16, d, bias, causal))
PY
for e in llama:prefill llama:decode qwen2:prefill; do
  timeout 150 python3 .devscratch/llama34.py $e torch.compile,fuseopt-cuda 2>&1 | grep "^==\|sync:" | tee -a $OUT/after_$COMMIT.txt
done
timeout 120 python3 -m benchmarks.kernel_breakdown --models llama:decode --systems torch.compile,fuseopt-cuda --top 25 2>&1 | grep -v "Warn\|warn" > $OUT/decode_breakdown_after.txt || true
cd .devscratch/before && python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
export PYTHONPATH=$PWD:/tmp/site
for e in llama:prefill llama:decode qwen2:prefill; do
  timeout 100 python3 ../llama34.py $e fuseopt-cuda 2>&1 | grep "^==\|sync:" | tee -a $OUT/before_6befe8d.txt
done
timeout 90 python3 -m benchmarks.kernel_breakdown --models llama:decode --systems fuseopt-cuda --top 25 2>&1 | grep -v "Warn\|warn" > $OUT/decode_breakdown_before.txt || true
