"""One compile for every size against one compile per size, on the GPU.

    python -m benchmarks.dynamic_sizes [--rows 1,8,333,2048,8192] [--out FILE]

An nn function of dynamic rows (`?`, passes/generalize_sizes.py) is compiled once by the
Triton backend; at each row count the same function compiled at that very size is
compiled too, their outputs are compared (a difference past the dtype's tolerance fails
the run: where the heuristics pick another tiling for the static size, the reduction
order differs; the table says whether they are bit for bit equal), and both are timed:
kernel time (`median_us`, launch included) and host wall time per call
(`launch_inclusive_us`: back-to-back calls, one synchronize), with the compile time of
each. Workloads: the repository's gated RMSNorm
example at 5120 columns (bf16) and a row softmax at 1000 columns (f32, ragged).
Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from benchmarks.machine import REPO_ROOT, describe_environment
from benchmarks.timing import launch_inclusive_us, median_us

WORKLOADS = {
    "rmsnorm_silu_gate": (
        (REPO_ROOT / "fuseopt/examples/rmsnorm_silu_gate.mlir")
        .read_text()
        .replace("2048x5120", "?x5120")
    ),
    "softmax_1000": (
        "func.func @softmax(%x: tensor<?x1000xf32>) -> tensor<?x1000xf32> {\n"
        "  %y = nn.softmax %x axis 1 : tensor<?x1000xf32>\n"
        "  func.return %y : tensor<?x1000xf32>\n}\n"
    ),
}
"""Functions of dynamic rows: name -> nn text."""


def _inputs(text: str, rows: int, device: torch.device) -> list[torch.Tensor]:
    """Random inputs for `text` with `rows` for `?` (the example's signature types)."""
    import re

    signature = re.search(r"func\.func @\w+\((.*?)\) ->", text, re.S)
    assert signature is not None
    out = []
    for dims, element in re.findall(r"tensor<((?:[?\d]+x)+)(bf16|f32)>", signature.group(1)):
        shape = [rows if d == "?" else int(d) for d in dims.rstrip("x").split("x")]
        dtype = torch.bfloat16 if element == "bf16" else torch.float32
        out.append(torch.randn(shape, device=device, dtype=dtype))
    return out


def measure(rows: list[int], device: torch.device) -> list[str]:
    """The result table's lines (markdown)."""
    import fuseopt
    from fuseopt.passes.generalize_sizes import specialize

    lines = [
        "| workload | rows | compile s (static) | kernel us static | dynamic "
        "| wall us static | dynamic | max abs difference | bitwise equal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, text in WORKLOADS.items():
        start = time.perf_counter()
        dynamic = fuseopt.load_mlir(text, backend="triton")
        dynamic(*_inputs(text, 3, device))  # compiles the kernels
        lines.append(f"| {name} | (dynamic) | {time.perf_counter() - start:.2f} | | | | | | |")
        for n in rows:
            start = time.perf_counter()
            static = fuseopt.load_mlir(specialize(text, n), backend="triton")
            xs = _inputs(text, n, device)
            static(*xs)
            compile_s = time.perf_counter() - start
            pairs = list(zip(dynamic(*xs), static(*xs), strict=True))
            equal = all(torch.equal(a, b) for a, b in pairs)
            diff = max(float((a.float() - b.float()).abs().max()) for a, b in pairs)
            tolerance = [1.6e-2 if a.dtype == torch.bfloat16 else 1e-5 for a, _ in pairs]
            if not all(
                torch.allclose(a.float(), b.float(), rtol=t, atol=t)
                for (a, b), t in zip(pairs, tolerance, strict=True)
            ):
                raise SystemExit(f"{name} at {n} rows: the dynamic compile's outputs differ")
            calls = [lambda f=f, xs=xs: f(*xs) for f in (static, dynamic)]
            ks, kd = (median_us(call, device) for call in calls)
            ws, wd = (launch_inclusive_us(call, device) for call in calls)
            lines.append(
                f"| {name} | {n} | {compile_s:.2f} | {ks:.1f} | {kd:.1f} | {ws:.1f} | {wd:.1f} "
                f"| {diff:.2g} | {equal} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print (or write) the markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="1,8,333,2048,8192")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks.dynamic_sizes needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    env = describe_environment(device)
    head = [
        "# One compile for every size against one compile per size",
        "",
        f"{env.device_name}, driver {env.driver}, torch {env.torch}, triton {env.triton}, "
        f"fuseopt commit {env.fuseopt_commit}, {env.date_utc}.",
        "`python -m benchmarks.dynamic_sizes` (see its docstring). Kernel time: median of "
        "launch-inclusive timings; wall: host time per call of back-to-back calls.",
        "",
    ]
    text = "\n".join(head + measure([int(r) for r in args.rows.split(",")], device)) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
