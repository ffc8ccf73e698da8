"""Block sizes of column reductions (the reduced axis not innermost), by wall time.

`x.var(1)` and `x.sum(1)` over the middle axis of three bf16 shapes (CUDA), for
fuseopt-triton with its default blocks and with `block_rows` (output columns per
program) and `block_cols` (reduced rows per loop step) forced, against torch.compile.
Each result is checked against float32; each time is the do_bench median of a whole
call. The record of a run is `results/nvidia-h200/column_blocks_0acee45.md`: no single
pair of blocks wins on every shape, which is what the column heuristic has to learn.

    python -m benchmarks.column_blocks
"""

from __future__ import annotations

import torch
import triton.testing

import fuseopt

SHAPES = [(64, 1024, 1024), (1024, 64, 512), (8, 4096, 2048)]
BLOCKS = [
    {},
    {"block_rows": 128, "block_cols": 32},
    {"block_rows": 128, "block_cols": 16},
    {"block_rows": 256, "block_cols": 16},
    {"block_rows": 64, "block_cols": 64},
    {"block_rows": 128, "block_cols": 64},
    {"block_rows": 256, "block_cols": 32},
    {"block_rows": 32, "block_cols": 64},
    {"block_rows": 64, "block_cols": 16},
    {"block_rows": 512, "block_cols": 8},
]
REDUCTIONS = {"var": lambda x: x.var(1), "sum": lambda x: x.sum(1)}


def wall_us(fn) -> float:  # noqa: ANN001
    """The do_bench median of one call, in us."""
    return triton.testing.do_bench(fn, return_mode="median") * 1e3


def main() -> int:
    """Print one line per shape, reduction and blocks; return 1 on a wrong result."""
    torch.manual_seed(0)
    wrong = 0
    for shape in SHAPES:
        x = torch.randn(shape, dtype=torch.bfloat16, device="cuda")
        for name, fn in REDUCTIONS.items():
            expected = fn(x.float())
            baseline = torch.compile(fn, dynamic=False)
            print(f"{shape} {name} torch.compile {wall_us(lambda: baseline(x)):.1f} us")  # noqa: B023
            for blocks in BLOCKS:
                compiled = fuseopt.compile(fn, (x,), backend="triton", strict=True, **blocks)
                ok = torch.allclose(compiled(x).float(), expected, rtol=2e-2, atol=2e-2)
                wrong += not ok
                launch = compiled.kernels[0].launch
                us = wall_us(lambda: compiled(x))  # noqa: B023
                print(f"{shape} {name} {blocks or 'default'} ({launch}): {us:.1f} us ok={ok}")
    return int(wrong > 0)


if __name__ == "__main__":
    raise SystemExit(main())
