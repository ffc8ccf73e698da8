"""Normalization schedules around the whole-row / looped boundary, by kernel time.

GroupNorm and LayerNorm at widths from 4000 to 131072 (bf16, CUDA): torch.compile
against fuseopt-triton with its default schedule and with the statistics forced to loop
in chunks of 2048 (`max_row_block=8192, block_cols=2048`). Each result is checked
against float32 (max abs error printed); the kernels of one call are timed with
torch.profiler (mean over 20 calls). This is how the Triton target's
`statistics_row_block` / `statistics_row_chunk` were chosen (backends/targets.py).

    python -m benchmarks.norm_schedules
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import fuseopt

CASES = [
    ("group_norm", (32, 256, 56, 56), (256,)),
    ("layer_norm", (8192, 16384), (16384,)),
    ("layer_norm", (4096, 12000), (12000,)),
    ("layer_norm", (2048, 32768), (32768,)),
    ("layer_norm", (1024, 131072), (131072,)),
    ("layer_norm", (16384, 4000), (4000,)),
]
VARIANTS = [
    ("torch.compile", None),
    ("fuseopt", {}),
    ("fuseopt-loop2048", {"max_row_block": 8192, "block_cols": 2048}),
]


def _norm(name: str):  # noqa: ANN202 - a norm function
    if name == "group_norm":
        return lambda x, w, b: F.group_norm(x, 32, w, b, 1e-5)
    return lambda x, w, b: F.layer_norm(x, w.shape, w, b, 1e-5)


def kernel_times(fn, calls: int = 20) -> dict[str, float]:  # noqa: ANN001
    """Mean CUDA time per call (us) of each kernel `fn` launches."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return {
        e.key[:40]: e.device_time_total / calls
        for e in prof.key_averages()
        if e.device_type.name == "CUDA" and e.count >= calls
    }


def main() -> int:
    """Print one line per case and variant; return 1 on a wrong result."""
    torch.manual_seed(0)
    wrong = 0
    for name, shape, wshape in CASES:
        fn = _norm(name)
        x, w, b = (
            torch.randn(s, device="cuda", dtype=torch.bfloat16) for s in (shape, wshape, wshape)
        )
        ref = fn(x.float(), w.float(), b.float())
        for label, options in VARIANTS:
            torch._dynamo.reset()
            with torch.no_grad():
                compiled = (
                    torch.compile(fn)
                    if options is None
                    else fuseopt.compile(fn, (x, w, b), **options)
                )
                err = (compiled(x, w, b).float() - ref).abs().max().item()
                times = kernel_times(lambda: compiled(x, w, b))  # noqa: B023
            wrong += err > 0.1
            kernels = "  ".join(
                f"{k}={t:.1f}" for k, t in sorted(times.items(), key=lambda kv: -kv[1])
            )
            print(
                f"{name} {'x'.join(map(str, shape))} {label:16} err {err:.3f} "
                f"total {sum(times.values()):7.1f} us  {kernels}",
                flush=True,
            )
    return int(wrong > 0)


if __name__ == "__main__":
    raise SystemExit(main())
