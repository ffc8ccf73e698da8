"""Host overhead per call on a launch-bound workload: where the microseconds go.

    python -m benchmarks.host_overhead [--only mlp:small] [--calls 2000] [--out FILE]
    python -m benchmarks.host_overhead --models llama:decode,llama:prefill --calls 200

For each system (eager, torch.compile, fuseopt per backend, and both compilers in
mode="reduce-overhead", which replays CUDA graphs) it measures the
launch-inclusive time of back-to-back calls (host wall clock over `--calls` calls, one
synchronize at the end: what a decode loop feels) next to the kernel time from the
profiler and their difference, the host overhead, after judging the outputs against
the reference as the benchmark does (error no worse than twice eager's). For
torch.compile and the plain fuseopt systems it then profiles the host side with cProfile
over the same calls and prints the functions with the most own time, so the overhead can
be attributed (Dynamo guards, AOTAutograd's wrappers, the FX graph of the partition, the
generated host function, launches). ``--only`` takes workload-suite instances,
``--models`` model-suite ones (`benchmarks.models`, e.g. ``llama:decode``); ``--systems``
keeps only the named systems. Needs a CUDA GPU.
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


def system_names(backends: list[str]) -> list[str]:
    """The systems compared: eager, torch.compile and fuseopt per backend, each compiler
    also in mode="reduce-overhead"."""
    names = ["eager", "torch.compile", "torch.compile reduce-overhead"]
    for b in backends:
        names += [f"fuseopt-{b}", f"fuseopt-{b} reduce-overhead"]
    return names


def make_system(name: str, model: torch.nn.Module, inputs: tuple) -> object:
    """The callable a system name stands for (compiled for `inputs`)."""
    import fuseopt

    system, _, mode = name.partition(" ")
    mode = mode or "default"
    if system == "eager":
        return model
    if system == "torch.compile":
        return torch.compile(model, mode=mode)
    return fuseopt.compile(model, inputs, backend=system.removeprefix("fuseopt-"), mode=mode)


def main(argv: list[str] | None = None) -> int:
    """Check, time and profile; print Markdown (and write it to --out)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="workload-suite instances (mlp:small)")
    parser.add_argument("--models", default=None, help="model-suite instances (llama:decode)")
    parser.add_argument("--systems", default=None, help="only these systems (comma-separated)")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--backend", default="triton,cuda")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("host_overhead: needs a CUDA GPU")
        return 0

    device, dtype = torch.device("cuda"), torch.bfloat16
    lines = [
        f"# Host overhead per call on {torch.cuda.get_device_name()}",
        f"torch {torch.__version__}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"fuseopt commit {os.environ.get('FUSEOPT_GIT_COMMIT', 'unknown')}; "
        f"{args.calls} back-to-back calls, one synchronize",
        "",
    ]
    bad = 0
    instances: list = []
    if args.models:
        from benchmarks.models import select_models

        instances += [(w, None) for w in select_models(args.models.split(","))]
    if args.only or not args.models:
        instances += select_workloads((args.only or "mlp:small").split(","))
    keep = set(args.systems.split(",")) if args.systems else None
    for workload, shape in instances:
        shapes = [shape] if shape is not None else list(workload.shapes)
        for s in shapes:
            model = workload.make_model(s.dims, dtype, device, 0).eval()
            inputs = workload.make_inputs(s.dims, dtype, device, 1)
            reference = accuracy.Reference(workload, model, inputs)
            with torch.no_grad():
                eager = accuracy.as_tuple(model(*inputs))
                dtypes = tuple(t.dtype for t in eager)
                tolerance = accuracy.tolerance_from_eager(reference.error_of(eager, dtypes), dtype)
                names = system_names(args.backend.split(","))
                names = [n for n in names if keep is None or n in keep or n == "eager"]
                lines += [
                    f"## {workload.name} {s.label}",
                    "",
                    "| system | correct (as the benchmark judges) | us per call "
                    "(launch-inclusive) | kernel us | host overhead us | kernels |",
                    "|---|---|---|---|---|---|",
                ]
                profiles = []
                for name in names:
                    # each system alone in Dynamo's cache: compiled code of the systems
                    # before it would count against the recompile limit of the frames
                    # they share (a decode step's cache update, once per layer), and a
                    # frame past that limit runs eagerly for every later system
                    torch._dynamo.reset()
                    fn = make_system(name, model, inputs)
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
                        f"| {max(us - prof.kernel_us, 0.0):.1f} | {prof.kernels} |"
                    )
                    if (
                        name.split(" ")[0] in ("torch.compile", "fuseopt-triton", "fuseopt-cuda")
                        and "reduce-overhead" not in name
                    ):
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
