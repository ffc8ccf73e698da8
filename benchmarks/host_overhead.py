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
keeps only the named systems. Each system is measured in a Python process of its own
(`_in_child`), so none pays for what another compiled before it, in `--rounds` rounds
(default 3) of every system in turn; the table shows the median round and lists every
round (host-bound figures on a shared host swing by 2x between processes). Needs a
CUDA GPU.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
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


def _instances(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The (flag, entry) of every instance asked for: ``("--models", "llama:decode")``
    or ``("--only", "mlp:small")`` (the workload suite's mlp:small when none is)."""
    found = [("--models", m) for m in (args.models or "").split(",") if m]
    if args.only or not args.models:
        found += [("--only", o) for o in (args.only or "mlp:small").split(",") if o]
    return found


def instance_shapes(flag: str, entry: str) -> list[tuple]:
    """The (workload, shape) pairs an instance names: a model-suite one for ``--models``
    (``llama:decode``), else a workload-suite one (``mlp:small``; every shape of a
    workload named alone)."""
    if flag == "--models":
        from benchmarks.models import select_models

        instances = [(w, None) for w in select_models([entry])]
    else:
        instances = select_workloads([entry])
    return [(w, s) for w, one in instances for s in ([one] if one is not None else list(w.shapes))]


def measure(flag: str, entry: str, name: str, calls: int, top: int) -> list[dict]:
    """One system on one instance (every shape of it), in this process: per shape its
    section title, the system, whether its output was judged correct, us per call
    (launch-inclusive), kernel us and kernels per call, and its cProfile text
    (torch.compile and plain fuseopt systems only; empty otherwise)."""
    device, dtype = torch.device("cuda"), torch.bfloat16
    results = []
    for workload, s in instance_shapes(flag, entry):
        model = workload.make_model(s.dims, dtype, device, 0).eval()
        inputs = workload.make_inputs(s.dims, dtype, device, 1)
        reference = accuracy.Reference(workload, model, inputs)
        with torch.no_grad():
            eager = accuracy.as_tuple(model(*inputs))
            dtypes = tuple(t.dtype for t in eager)
            tolerance = accuracy.tolerance_from_eager(reference.error_of(eager, dtypes), dtype)
            torch._dynamo.reset()  # shapes of one instance share frames too
            fn = make_system(name, model, inputs)
            ok = accuracy.judge(reference.error_of(fn(*inputs), dtypes), tolerance).ok

            def call(fn=fn, inputs=inputs):  # noqa: ANN001, ANN202 - bound per system
                return fn(*inputs)

            for _ in range(20):  # warm: caches, autotuned configs, allocator
                call()
            us = launch_inclusive_us(call, device, calls)
            prof = profile_kernels(call, device)
            assert prof is not None
            profiled = name.split(" ")[0] in PROFILED and "reduce-overhead" not in name
            text = host_profile(call, calls, top) if profiled else ""
        section = f"{workload.name} {s.label}"
        results.append({"section": section, "system": name, "ok": ok, "us": us,
                        "kernel_us": prof.kernel_us, "kernels": prof.kernels,
                        "profile": text})  # fmt: skip
    return results


PROFILED = ("torch.compile", "fuseopt-triton", "fuseopt-cuda")
"""The systems whose host side is profiled with cProfile."""

CHILD_MARK = "host_overhead-result:"
"""The line prefix before a child process's JSON result."""


CHILD_TIMEOUT_S = 1800
"""How long one child process may take (compiling and measuring one system)."""


def _in_child(flag: str, entry: str, name: str, args: argparse.Namespace) -> list[dict]:
    """`measure` in a fresh Python process, so that what one system leaves behind
    (compiled frames counting against Dynamo's recompile limit, CUDA graph pools,
    profiler state) cannot change the next one's figures. A run that fails or takes
    longer than CHILD_TIMEOUT_S gives one result with `failed` set (the section is the
    instance entry: the child never said which shapes it has)."""
    command = [
        sys.executable, "-m", "benchmarks.host_overhead", "--child", flag, entry,
        "--systems", name, "--calls", str(args.calls), "--top", str(args.top),
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, timeout=CHILD_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return [{"section": entry, "system": name, "ok": False, "profile": "",
                 "failed": f"no result within {CHILD_TIMEOUT_S} s"}]  # fmt: skip
    for line in done.stdout.splitlines():
        if line.startswith(CHILD_MARK):
            return json.loads(line[len(CHILD_MARK) :])
    lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
    reason = next((x for x in reversed(lines) if "Error" in x), lines[-1])
    return [{"section": entry, "system": name, "ok": False, "profile": "",
             "failed": reason[:200]}]  # fmt: skip


def pick_medians(results: list[dict]) -> list[dict]:
    """The rows of one instance's rounds: per (section, system), in order of first
    appearance, the round with the median us per call (the lower middle of an even
    count), with every round's us per call under `rounds`. A system that failed in any
    round is reported by its failure in each of its sections (in its own section, the
    instance entry, when no round of it succeeded)."""
    failures = {r["system"]: r for r in results if "failed" in r}
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        if "failed" not in r:
            groups.setdefault((r["section"], r["system"]), []).append(r)
    picked = []
    for (section, system), group in groups.items():
        if system in failures:
            picked.append({**failures[system], "section": section})
            continue
        ordered = sorted(group, key=lambda r: r["us"])
        picked.append({**ordered[(len(ordered) - 1) // 2], "rounds": [r["us"] for r in group]})
    shown = {r["system"] for r in picked}
    picked += [f for system, f in failures.items() if system not in shown]
    return picked


def table_row(r: dict) -> str:
    """The Markdown row of one picked result."""
    if "failed" in r:
        return f"| {r['system']} | failed: {r['failed']} | | | | | |"
    rounds = ", ".join(f"{us:.0f}" for us in r["rounds"])
    return (
        f"| {r['system']} | {'yes' if r['ok'] else 'NO'} | {r['us']:.1f} | {rounds} "
        f"| {r['kernel_us']:.1f} | {max(r['us'] - r['kernel_us'], 0.0):.1f} | {r['kernels']} |"
    )


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
    parser.add_argument("--rounds", type=int, default=3, help="child processes per system")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("host_overhead: needs a CUDA GPU")
        return 0
    if args.child:  # one system, one instance: print the result for the parent
        flag, entry = _instances(args)[0]
        result = measure(flag, entry, args.systems, args.calls, args.top)
        print(CHILD_MARK + json.dumps(result))
        return 0

    lines = [
        f"# Host overhead per call on {torch.cuda.get_device_name()}",
        f"torch {torch.__version__}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"fuseopt commit {os.environ.get('FUSEOPT_GIT_COMMIT', 'unknown')}; "
        f"{args.calls} back-to-back calls, one synchronize; each system in a process "
        f"of its own, {args.rounds} rounds of every system in turn, the median round shown",
        "",
    ]
    keep = set(args.systems.split(",")) if args.systems else None
    names = [
        n
        for n in system_names(args.backend.split(","))
        if keep is None or n in keep or n == "eager"
    ]
    bad = 0
    for flag, entry in _instances(args):
        measured = [
            result
            for _ in range(max(1, args.rounds))
            for name in names
            for result in _in_child(flag, entry, name, args)
        ]
        sections: dict[str, list[dict]] = {}
        for result in pick_medians(measured):
            sections.setdefault(result["section"], []).append(result)
        for section, results in sections.items():
            lines += [
                f"## {section}",
                "",
                "| system | correct (as the benchmark judges) | us per call "
                "(launch-inclusive, median round) | every round | kernel us | host overhead us "
                "| kernels |",
                "|---|---|---|---|---|---|---|",
                *[table_row(r) for r in results],
                "",
            ]
            bad += sum(not r["ok"] for r in results)
            for r in results:
                if r["profile"]:
                    lines += [f"### cProfile of {r['system']} ({args.calls} calls)", "", "```"]
                    lines += r["profile"].strip().splitlines() + ["```", ""]
        _write(args.out, lines)  # what is measured so far survives a later timeout
    report = "\n".join(lines) + "\n"
    print(report)
    _write(args.out, lines)
    return 1 if bad else 0


def _write(out: str | None, lines: list[str]) -> None:
    """Write the report's `lines` to `out` (when given), replacing what was there."""
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
