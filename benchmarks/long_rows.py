"""Rows longer than one program keeps in registers: softmax and LayerNorm at 131072 columns.

These rows take the looped schedule on both backends (Triton keeps rows up to 32768
whole; the CUDA backend up to 8192), where the statistics are computed online in one
pass (`passes/convert_nn_to_tile/online.py`) and the outputs in a second. Not a workload-suite
workload: a check that the looped schedule is correct and near the memory roofline.

    python -m benchmarks.long_rows [--rows 1024] [--cols 131072] [--out FILE.md]

Every system is checked against float64 first (a wrong result is reported, not timed);
times are do_bench medians and profiler kernel time; the roofline is one read of the
input (and weights) and one write at the copy bandwidth measured here.
"""

from __future__ import annotations

import argparse
import sys

import torch

from benchmarks.standalone import TABLE_HEADER, check_and_time, copy_gbps, finish, provenance
from benchmarks.workloads.activations import Softmax
from benchmarks.workloads.norms import LayerNorm


def main(argv: list[str] | None = None) -> int:
    """Check, time and print one Markdown table; return 1 if any system was wrong."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--cols", type=int, default=131072)
    parser.add_argument("--out", default=None, help="also write the table to this file")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("long_rows: needs a CUDA GPU")
        return 0
    device, dtype = torch.device("cuda"), torch.bfloat16
    gen = torch.Generator(device=device).manual_seed(0)
    x = (3 + torch.randn(args.rows, args.cols, generator=gen, device=device)).to(dtype)
    bw = copy_gbps(device)
    lines = [
        f"# Long rows ({args.rows}x{args.cols} bf16) on {torch.cuda.get_device_name()}",
        provenance(bw),
        "",
        *TABLE_HEADER,
    ]
    failed = False
    for name, model in [
        ("softmax", Softmax()),
        ("layernorm", LayerNorm(args.cols, dtype, device, 1)),
    ]:
        model = model.to(device)
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        bytes_ = 2 * x.numel() * x.element_size() + weights
        roof_us = bytes_ / bw / 1e3
        with torch.no_grad():
            ref = model.double()(x.double()).float()  # the same weights, in float64
            rows, ok = check_and_time(name, model.to(dtype), (x,), ref, roof_us, device)
        lines += rows
        failed |= not ok
    return finish(lines, args.out, failed)


if __name__ == "__main__":
    sys.exit(main())
