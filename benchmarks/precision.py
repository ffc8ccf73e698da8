"""The numerics policy measured: accuracy and time of fuseopt's two precisions.

    python -m benchmarks.precision [--out FILE] [--quick] [--all-shapes] [--only NAME ...]

For every workload at its first full-size shape (each with `--all-shapes`; bf16), eager,
torch.compile and fuseopt (each backend, with `precision="f32"`, the default, and
`precision="eager"`) run on the same inputs: the table gives each system's relative L2
error against a float64 run, its median wall time (do_bench) and its kernel time
(torch.profiler). The f32 policy must be at least as accurate as eager (rel_l2 at most
1.02x eager's, the slack for GEMM accumulation order) and should cost no time. `--quick`
uses each workload's tiny shape (for a CPU smoke run: Triton's interpreter, no CUDA
backend). Exit status 1 if a fuseopt row is less accurate than eager.
"""

from __future__ import annotations

import argparse
import sys

import torch

from benchmarks.accuracy import Reference
from benchmarks.standalone import copy_gbps, finish, provenance
from benchmarks.timing import median_us, profile_kernels
from benchmarks.workloads import all_workloads

ACCURACY_SLACK = 1.02
"""fuseopt may be this many times eager's rel_l2 (GEMMs accumulate in another order)."""


def _systems(model: torch.nn.Module, inputs: tuple, device: torch.device) -> dict:
    import fuseopt

    systems = {"eager": model, "torch.compile": torch.compile(model)}
    backends = ["triton", "cuda"] if device.type == "cuda" else ["triton"]
    for backend in backends:
        for precision in ("f32", "eager"):
            systems[f"fuseopt-{backend} {precision}"] = fuseopt.compile(
                model, inputs, backend=backend, precision=precision
            )
    return systems


def main(argv: list[str] | None = None) -> int:
    """Check, time and print one Markdown table; return 1 if fuseopt lost accuracy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the table to this file")
    parser.add_argument("--quick", action="store_true", help="tiny shapes (CPU smoke run)")
    parser.add_argument("--only", nargs="*", default=None, help="workload names")
    parser.add_argument("--all-shapes", action="store_true", help="every full-size shape")
    args = parser.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    lines = [
        "# fuseopt precision: f32 inside fused groups vs eager's per-op rounding (bf16)\n",
        provenance(copy_gbps(device)) if device.type == "cuda" else "CPU smoke run",
        "",
        "| workload | shape | system | rel_l2 vs float64 | x eager's error | median us "
        "| kernel us | kernels |",
        "|---|---|---|---|---|---|---|---|",
    ]
    failed = False
    for w in all_workloads():
        if args.only and w.name not in args.only:
            continue
        shapes = w.shapes if args.all_shapes else w.shapes[:1]
        for shape in [w.quick_shape] if args.quick else shapes:
            failed |= _run_shape(w, shape, device, lines)
    return finish(lines, args.out, failed)


def _run_shape(w, shape, device: torch.device, lines: list[str]) -> bool:  # noqa: ANN001
    """Append the rows of workload `w` at `shape` to `lines`; True if fuseopt lost accuracy."""
    failed = False
    model = w.make_model(shape.dims, torch.bfloat16, device, 0)
    inputs = w.make_inputs(shape.dims, torch.bfloat16, device, 1)
    with torch.no_grad():
        reference = Reference(w, model, inputs)
        eager_out = model(*inputs)
        outs = eager_out if isinstance(eager_out, tuple) else (eager_out,)
        dtypes = tuple(o.dtype for o in outs)
        eager_err = reference.error_of(eager_out, dtypes).rel_l2
        for label, fn in _systems(model, inputs, device).items():
            try:
                err = reference.error_of(fn(*inputs), dtypes).rel_l2
            except Exception as e:  # a failing system is a row, not a crash
                lines.append(f"| {w.name} | {shape.label} | {label} | FAILED: {e} | | | | |")
                failed |= label.startswith("fuseopt")
                continue
            ratio = err / eager_err if eager_err else float("nan")
            if label.startswith("fuseopt") and "f32" in label and ratio > ACCURACY_SLACK:
                failed = True
            us = median_us(lambda fn=fn, xs=inputs: fn(*xs), device)
            prof = profile_kernels(lambda fn=fn, xs=inputs: fn(*xs), device)
            k_us = f"{prof.kernel_us:.1f}" if prof else ""
            kernels = str(prof.kernels) if prof else ""
            lines.append(
                f"| {w.name} | {shape.label} | {label} | {err:.3e} | {ratio:.2f} "
                f"| {us:.1f} | {k_us} | {kernels} |"
            )
    del model, inputs, reference
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return failed


if __name__ == "__main__":
    sys.exit(main())
