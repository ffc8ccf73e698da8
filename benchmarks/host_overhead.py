"""Host overhead per call on a launch-bound workload: where the microseconds go.

    python -m benchmarks.host_overhead [--only mlp:small] [--calls 2000] [--out FILE]

For each system (eager, torch.compile, fuseopt per backend, and both compilers in
mode="reduce-overhead", which replays CUDA graphs) it measures the
launch-inclusive time of back-to-back calls (host wall clock over `--calls` calls, one
synchronize at the end: what a decode loop feels) next to the kernel time from the
profiler, after judging the outputs against float64 as the benchmark does (error no
worse than twice eager's). For the plain fuseopt systems it then
profiles the host side with cProfile over the same calls and prints the functions with
the most own time, so the overhead can be attributed (Dynamo guards, the FX graph of
the partition, the generated host function, launches). Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

import torch

from benchmarks import accuracy
from benchmarks.timing import launch_inclusive_us, profile_kernels
from benchmarks.workloads import select_workloads


def host_profile(fn, calls: int, top: int) -> str:  # noqa: ANN001 - a callable
    """cProfile of `calls` calls: the `top` functions by own time, as text."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    """Check, time and profile; print Markdown (and write it to --out)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="mlp:small")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--backend", default="triton,cuda")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("host_overhead: needs a CUDA GPU")
        return 0
    import fuseopt

    device, dtype = torch.device("cuda"), torch.bfloat16
    lines = [
        f"# Host overhead per call on {torch.cuda.get_device_name()}",
        f"torch {torch.__version__}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"fuseopt commit {os.environ.get('FUSEOPT_GIT_COMMIT', 'unknown')}; "
        f"{args.calls} back-to-back calls, one synchronize",
        "",
    ]
    bad = 0
    for workload, shape in select_workloads(args.only.split(",")):
        shapes = [shape] if shape is not None else list(workload.shapes)
        for s in shapes:
            model = workload.make_model(s.dims, dtype, device, 0).eval()
            inputs = workload.make_inputs(s.dims, dtype, device, 1)
            reference = accuracy.Reference(workload, model, inputs)
            with torch.no_grad():
                eager = accuracy.as_tuple(model(*inputs))
                dtypes = tuple(t.dtype for t in eager)
                tolerance = accuracy.tolerance_from_eager(reference.error_of(eager, dtypes), dtype)
                systems = {
                    "eager": model,
                    "torch.compile": torch.compile(model),
                    "torch.compile reduce-overhead": torch.compile(model, mode="reduce-overhead"),
                }
                for b in args.backend.split(","):
                    systems[f"fuseopt-{b}"] = fuseopt.compile(model, inputs, backend=b)
                systems["fuseopt-triton reduce-overhead"] = fuseopt.compile(
                    model, inputs, backend="triton", mode="reduce-overhead"
                )
                lines += [
                    f"## {workload.name} {s.label}",
                    "",
                    "| system | correct (vs float64, as the benchmark judges) | us per call "
                    "(launch-inclusive) | kernel us | kernels |",
                    "|---|---|---|---|---|",
                ]
                profiles = []
                for name, fn in systems.items():
                    verdict = accuracy.judge(reference.error_of(fn(*inputs), dtypes), tolerance)
                    ok = verdict.ok
                    bad += not ok

                    def call(fn=fn, inputs=inputs):  # noqa: ANN001, ANN202 - bound per system
                        return fn(*inputs)

                    for _ in range(20):  # warm: caches, autotuned configs, allocator
                        call()
                    us = launch_inclusive_us(call, device, args.calls)
                    prof = profile_kernels(call, device)
                    assert prof is not None
                    lines.append(
                        f"| {name} | {'yes' if ok else 'NO'} | {us:.1f} | {prof.kernel_us:.1f} "
                        f"| {prof.kernels} |"
                    )
                    if name.startswith("fuseopt") and "reduce-overhead" not in name:
                        profiles.append((name, host_profile(call, args.calls, args.top)))
                lines.append("")
                for name, text in profiles:
                    lines += [f"### cProfile of {name} ({args.calls} calls)", "", "```"]
                    lines += text.strip().splitlines() + ["```", ""]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(report)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
