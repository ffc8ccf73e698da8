"""Column reductions at shapes the suites do not choose, fuseopt-triton against
torch.compile: few and many outputs, ragged and prime reduced counts, several axes,
a variance and a softmax over the first axis, a sum of rows centred by their means (a
weight gradient's work) (bf16, CUDA).

Each line gives the median of a whole call (wall) and torch.profiler's kernel time of
one call, both in us and measured as the suites measure them (`benchmarks.timing`),
with the error against the computation in float32 (the row fails when it exceeds 2e-2
of the reference's largest magnitude).

    python -m benchmarks.column_shapes
"""

from __future__ import annotations

from collections.abc import Callable

import torch

import fuseopt
from benchmarks.timing import median_us, profile_kernels

CASES: list[tuple[tuple[int, ...], str, Callable[[torch.Tensor], torch.Tensor]]] = [
    ((16384, 4096), "x.sum(0)", lambda x: x.sum(0)),
    ((65536, 1024), "x.sum(0)", lambda x: x.sum(0)),
    ((131072, 256), "x.sum(0)", lambda x: x.sum(0)),
    ((8192, 768), "x.sum(0)", lambda x: x.sum(0)),
    ((100000, 3), "x.sum(0)", lambda x: x.sum(0)),
    ((65537, 512), "x.sum(0)", lambda x: x.sum(0)),
    ((4, 32768, 100), "x.amax(1)", lambda x: x.amax(1)),
    ((32, 64, 56, 56), "x.mean((0, 2, 3))", lambda x: x.mean((0, 2, 3))),
    ((65536, 1024), "x.var(0)", lambda x: x.var(0)),
    (
        (16384, 4096),
        "(x * (x - x.mean(1, keepdim=True))).sum(0)",  # a weight gradient's shape of work
        lambda x: (x * (x - x.mean(1, keepdim=True))).sum(0),
    ),
    ((30000, 1000), "softmax(x, 0)", lambda x: torch.softmax(x, 0)),
]


def run_cases(
    cases: list[tuple[tuple[int, ...], str, Callable[[torch.Tensor], torch.Tensor]]],
    systems: tuple[str, ...] = ("torch.compile", "fuseopt-triton"),
) -> int:
    """Print one line per case and system (of `systems`); return 1 when a result is
    wrong."""
    torch.manual_seed(0)
    wrong = 0
    device = torch.device("cuda")
    for shape, text, fn in cases:
        x = torch.randn(shape, dtype=torch.bfloat16, device="cuda")
        expected = fn(x.float())
        compilers = {
            "torch.compile": lambda fn=fn: torch.compile(fn, dynamic=False),
            "fuseopt-triton": lambda fn=fn, x=x: fuseopt.compile(
                fn, (x,), backend="triton", strict=True
            ),
        }
        for name in systems:
            compiled = compilers[name]()
            call = lambda c=compiled, x=x: c(x)  # noqa: E731
            error = ((call().float() - expected).abs().max() / expected.abs().max()).item()
            wrong += not error <= 2e-2
            kernels = getattr(compiled, "kernels", None)
            launch = f" ({len(kernels)} kernels, {kernels[0].launch})" if kernels else ""
            profiled = profile_kernels(call, device)
            assert profiled is not None  # on a GPU
            print(
                f"{shape} {text} {name}{launch}: wall {median_us(call, device):.1f} us, "
                f"kernels {profiled.kernel_us:.1f} us, error {error:.1e}",
                flush=True,
            )
    return int(wrong > 0)


def main() -> int:
    """Print one line per case and system; return 1 when a result is wrong."""
    return run_cases(CASES)


if __name__ == "__main__":
    raise SystemExit(main())
