"""Where one call's device time goes, kernel by kernel, for several systems side by side:
the GPU kernels of a model-suite or workload-suite instance, by name, with their device us
and launches per call (torch.profiler), and optionally the source of fuseopt's kernels
whose names match a pattern. A diagnostic for rows whose kernel time differs between
compilers (which GEMMs, which attention kernel, which fused kernels, which copies).

    python -m benchmarks.kernel_breakdown --models llama:prefill \\
        --systems torch.compile,fuseopt-triton,fuseopt-cuda [--top 30] [--source broadcast]
"""

from __future__ import annotations

import argparse
import re

import torch

from benchmarks.host_overhead import instance_shapes, make_system
from benchmarks.timing import profile_kernels


def breakdown(entry: str, models: bool, systems: list[str], top: int, source: str | None) -> None:
    """Print each system's kernels for the instance `entry` (a model-suite one when
    `models`), the longest `top` by device time, then the fuseopt kernel sources whose
    names match the regular expression `source`."""
    device, dtype = torch.device("cuda"), torch.bfloat16
    for workload, s in instance_shapes("--models" if models else "--only", entry):
        model = workload.make_model(s.dims, dtype, device, 0).eval()
        inputs = workload.make_inputs(s.dims, dtype, device, 1)
        for name in systems:
            torch._dynamo.reset()
            with torch.no_grad():
                fn = make_system(name, model, inputs)
                for _ in range(3):  # compile and warm
                    fn(*inputs)
                prof = profile_kernels(lambda fn=fn, x=inputs: fn(*x), device, 5, top)
            assert prof is not None  # on a GPU
            print(f"== {workload.name} {s.label}, {name}: {prof.kernels} kernels, "
                  f"{prof.kernel_us:.1f} us per call")  # fmt: skip
            for kernel, us, launches in prof.top:
                print(f"  {us:9.1f} us  x{launches:4.0f}  {kernel[:120]}")
            for record in getattr(fn, "kernels", []) if source else []:
                if re.search(source, record.name) and record.source:
                    print(f"--- {record.name} ({record.launch}; ops {record.ops})")
                    print(record.source)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and print the breakdowns."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=None, help="model-suite instances (llama:prefill)")
    parser.add_argument("--only", default=None, help="workload-suite instances (mlp:small)")
    parser.add_argument("--systems", default="torch.compile,fuseopt-triton,fuseopt-cuda")
    parser.add_argument("--top", type=int, default=30, help="kernels listed per system")
    parser.add_argument("--source", default=None, help="print fuseopt kernels matching this")
    args = parser.parse_args(argv)
    if not (args.models or args.only) or args.top < 1:
        parser.error("give --models or --only instances, and --top of 1 or more")
    if not torch.cuda.is_available():
        print("kernel_breakdown: needs a CUDA GPU")
        return 0
    systems = args.systems.split(",")
    for entry in (args.models or "").split(","):
        if entry:
            breakdown(entry, True, systems, args.top, args.source)
    for entry in (args.only or "").split(","):
        if entry:
            breakdown(entry, False, systems, args.top, args.source)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
