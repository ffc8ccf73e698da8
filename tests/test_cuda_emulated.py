"""Numerics of the generated CUDA on CPU, through the emulation (backends/cuda/emulation).

The printed kernels are compiled with g++ against stand-in CUDA headers and run with
one CPU thread per CUDA thread (barriers, shuffles and WMMA emulated), then compared
with the reference interpreter on random inputs with non-trivial weights. Shapes are
small but chosen to hit the tile configurations of the PERFORMANCE.md sizes (rows of
5120, 8192 and 32768 elements; 128x128 matmul tiles) and ragged edges. Skipped
without g++.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from xdsl.dialects import func

import fuseopt
from fuseopt.backends.cuda.backend import CudaBackend
from fuseopt.backends.cuda.emulation import EmulatedFunction, emulator_available
from fuseopt.frontends.fx.types import torch_dtype

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_nn_fuse_workloads import (  # noqa: E402
    gated_mlp,
    gelu_bias,
    layernorm,
    mlp,
    random_args,
    rmsnorm,
    rmsnorm_rope,
    rmsnorm_silu_gate,
    softmax,
)

pytestmark = pytest.mark.skipif(not emulator_available(), reason="g++ is not installed")

CASES = {
    "rmsnorm_5120": rmsnorm(1, 3, 5120),
    "rmsnorm_silu_gate_ragged": rmsnorm_silu_gate(1, 5, 1000),
    "softmax_8192": softmax(2, 8192),
    "softmax_32768_looped": softmax(2, 32768),
    "softmax_ragged": softmax(5, 1000),
    "layernorm_4096": layernorm(3, 4096),
    "gelu_bias_ragged": gelu_bias(9, 1000),
    "rmsnorm_rope": rmsnorm_rope(1, 3, 2, 16),
    "mlp_128_tiles": mlp(256, 256, 1024),
    "mlp_ragged": mlp(50, 72, 100),
    "gated_mlp": gated_mlp(32, 64, 48),
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where emulation libraries are built (shared by the module's tests)."""
    return tmp_path_factory.mktemp("cuda-emu")


def run_emulated(text: str, workdir: Path, dtype: str) -> None:
    """Compile `text` (with `bf16` replaced by `dtype`), run it emulated, and compare
    with the reference interpreter."""
    text = text.replace("bf16", dtype)
    module = fuseopt.parse(text)
    args = random_args(module)
    ref = fuseopt.interpret(module, "main", *args)
    fn = CudaBackend().compile(fuseopt.parse(text), "main", {})
    f = next(o for o in module.ops if isinstance(o, func.FuncOp))
    inputs = [
        torch.from_numpy(a).to(torch_dtype(t.element_type))
        for a, t in zip(args, f.function_type.inputs.data, strict=True)
    ]
    out = EmulatedFunction(fn, workdir)(*inputs)
    tol = 2e-2 if dtype == "bf16" else 1e-4
    for r, o in zip(ref, out, strict=True):
        r = np.asarray(r, dtype=np.float32)
        got = o.float().numpy().reshape(r.shape)
        scale = max(float(np.abs(r).max()), 1e-6)
        assert float(np.abs(got - r).max()) / scale < tol


@pytest.mark.parametrize("name", list(CASES))
def test_workload_matches_reference_bf16(name: str, workdir: Path) -> None:
    run_emulated(CASES[name], workdir, "bf16")


@pytest.mark.parametrize("name", ["softmax_ragged", "mlp_ragged", "layernorm_4096"])
def test_workload_matches_reference_f32(name: str, workdir: Path) -> None:
    run_emulated(CASES[name], workdir, "f32")
