"""Where one call's device time goes, kernel by kernel, for several systems side by side:
the GPU kernels of a model-suite or workload-suite instance, by name, with their device us
and launches per call (torch.profiler), optionally the source of fuseopt's kernels whose
names match a pattern, and with `--cpu N` the host side: the CPU's time per call before
the GPU is waited for, and the N host operations with the most own CPU time. A
diagnostic for rows whose kernel time differs between compilers (which GEMMs, which
attention kernel, which fused kernels, which copies), or whose wall time sits above
their kernel time (host-bound: what the host spends a call on).

    python -m benchmarks.kernel_breakdown --models llama:prefill \\
        --systems torch.compile,fuseopt-triton,fuseopt-cuda [--top 30] [--source broadcast] \\
        [--cpu 20]
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity

from benchmarks.host_overhead import instance_shapes, make_system
from benchmarks.timing import profile_kernels


def breakdown(
    entry: str, models: bool, systems: list[str], top: int, source: str | None, cpu: int = 0
) -> None:
    """Print each system's kernels for the instance `entry` (a model-suite one when
    `models`), the longest `top` by device time, then the fuseopt kernel sources whose
    names match the regular expression `source`; with `cpu`, the host side too
    (`host_side`)."""
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
                host = host_side(lambda fn=fn, x=inputs: fn(*x), cpu) if cpu else ""
            assert prof is not None  # on a GPU
            print(f"== {workload.name} {s.label}, {name}: {prof.kernels} kernels, "
                  f"{prof.kernel_us:.1f} us per call")  # fmt: skip
            for kernel, us, launches in prof.top:
                print(f"  {us:9.1f} us  x{launches:4.0f}  {kernel[:120]}")
            print(host, end="")
            for record in getattr(fn, "kernels", []) if source else []:
                if re.search(source, record.name) and record.source:
                    print(f"--- {record.name} ({record.launch}; ops {record.ops})")
                    print(record.source)


def host_side(call: Callable[[], object], rows: int, calls: int = 20) -> str:
    """The host's time per call of `call` with no synchronization (what the CPU
    spends before the GPU waits on it; above the kernel time the call is host-bound)
    and torch.profiler's table of the `rows` host operations with the most own CPU time
    over 5 calls (runtime API calls, ATen ops, the compiled region's own Python)."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    host_us = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    head = f"  host: {host_us:.0f} us a call before the GPU is waited for ({calls} calls)\n"
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(5):
            call()
        torch.cuda.synchronize()
    return head + prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and print the breakdowns."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=None, help="model-suite instances (llama:prefill)")
    parser.add_argument("--only", default=None, help="workload-suite instances (mlp:small)")
    parser.add_argument("--systems", default="torch.compile,fuseopt-triton,fuseopt-cuda")
    parser.add_argument("--top", type=int, default=30, help="kernels listed per system")
    parser.add_argument("--source", default=None, help="print fuseopt kernels matching this")
    parser.add_argument("--cpu", type=int, default=0, help="rows of a host-side op table")
    args = parser.parse_args(argv)
    if not (args.models or args.only) or args.top < 1:
        parser.error("give --models or --only instances, and --top of 1 or more")
    if not torch.cuda.is_available():
        print("kernel_breakdown: needs a CUDA GPU")
        return 0
    systems = args.systems.split(",")
    for entry in (args.models or "").split(","):
        if entry:
            breakdown(entry, True, systems, args.top, args.source, args.cpu)
    for entry in (args.only or "").split(","):
        if entry:
            breakdown(entry, False, systems, args.top, args.source, args.cpu)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
