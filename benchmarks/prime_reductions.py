"""Reductions over prime counts, which no chunk size divides (ragged splits: the last
chunk overhangs the count and is masked), fuseopt-triton against torch.compile: a loss
over a prime number of elements, few prime rows, and column reductions of a prime
count (bf16, CUDA). Lines as in `benchmarks.column_shapes`.

    python -m benchmarks.prime_reductions [--systems fuseopt-triton,torch.compile]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

from benchmarks.column_shapes import run_cases

PRIME_ROW = 16777259
"""The first prime above 2**24."""

CASES: list[tuple[tuple[int, ...], str, Callable[[torch.Tensor], torch.Tensor]]] = [
    ((PRIME_ROW,), "(x * x).mean()", lambda x: (x * x).mean()),
    ((4, 1048583), "x.amax(1)", lambda x: x.amax(1)),
    ((65537, 512), "x.sum(0)", lambda x: x.sum(0)),
    ((2, 32771, 512), "x.amax(1)", lambda x: x.amax(1)),
]


def main(argv: list[str] | None = None) -> int:
    """Print one line per case and system; return 1 when a result is wrong."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default="torch.compile,fuseopt-triton")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("prime_reductions: needs a CUDA GPU")
        return 0
    return run_cases(CASES, tuple(args.systems.split(",")))


if __name__ == "__main__":
    raise SystemExit(main())
