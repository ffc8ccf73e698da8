"""``python -m benchmarks.breadth``: single ops and short patterns at a few shapes each.

Runs every case of `benchmarks.breadth.cases` through the workload harness: each
system (eager, torch.compile default and max-autotune-no-cudagraphs, fuseopt per
backend, strict) is checked against float64 before it is timed (a wrong result or a
compile failure is FAILED, never timed), then timed by wall clock (do_bench median on a
GPU) with kernel time, launches, host overhead and compile times beside it. Writes
``results.json``, ``results.md`` and ``speedup.png`` under
``benchmarks/results/<device>/breadth/`` (or ``--out``).

``--only`` takes case names, family names (``reduction``, ``loss``, ``norm``, ``rows``,
``elementwise``, ``matmul``, ``index``, ``scan``) or ``CASE:SHAPE``; ``--budget-s``
stops starting instances and systems after S seconds (recorded as skipped) and
``--resume results.json`` reruns only what was skipped.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.breadth import Case
from benchmarks.breadth.cases import ALL_CASES
from benchmarks.machine import REPO_ROOT, describe_environment
from benchmarks.report import render_markdown
from benchmarks.suite import (
    SuiteSpec,
    add_common_arguments,
    add_resume_arguments,
    backends_from,
    device_from,
    fresh_compile_caches,
    load_record,
    only_entries,
    quick_backends,
    run_suite,
    started_config,
    system_filter,
)
from benchmarks.systems import make_systems
from benchmarks.workloads import Shape, Workload


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.breadth",
        description="Single ops and short patterns beyond the workload suite: check "
        "against float64, time wall and kernels, write JSON + Markdown + PNG.",
    )
    add_common_arguments(
        parser,
        budget_help="after S seconds start no new instance or system (recorded as "
        "skipped; --resume reruns them)",
    )
    add_resume_arguments(parser)
    return parser


def select_cases(only: list[str], quick: bool) -> list[tuple[int, Workload, Shape]]:
    """The instances ``--only`` names (case, family or ``CASE:SHAPE``; empty: all), each
    with its table position. Raises ValueError naming an unknown entry."""
    table: list[tuple[Case, Shape]] = [
        (case, s) for case in ALL_CASES for s in (case.shapes if not quick else (case.quick,))
    ]
    chosen: list[tuple[Case, Shape]] = []
    for entry in only or [""]:
        name, _, label = entry.partition(":")
        matches = [
            (case, s)
            for case, s in table
            if name in ("", case.name, case.group) and label in ("", s.label)
        ]
        if not matches:
            cases = ", ".join(c.name for c in ALL_CASES)
            groups = ", ".join(dict.fromkeys(c.group for c in ALL_CASES))
            raise ValueError(f"unknown case {entry!r}; cases: {cases}; families: {groups}")
        chosen += [m for m in matches if m not in chosen]
    workloads = {case.name: case.workload() for case, _ in chosen}
    return [(table.index((case, s)), workloads[case.name], s) for case, s in chosen]


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.breadth``; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    try:
        device = device_from(args.device)
        if device.type != "cuda" and not args.quick:
            raise ValueError(
                "full-size shapes need a GPU (CPU timings say nothing about kernels); "
                "use --quick to test the suite on this machine"
            )
        instances = select_cases(only_entries(args.only), args.quick)
        backends = backends_from(args.backend, device, quick_backends)
        systems = system_filter(make_systems(device, backends, args.cpu_compile), args.systems)
        resume = load_record(args.resume) if args.resume else None
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    config = started_config(args, device)
    fresh_compile_caches()
    spec = SuiteSpec(
        suite="breadth",
        title="fuseopt breadth benchmarks",
        instances=instances,
        systems=systems,
        skip_rows_over_budget=True,
    )
    env_slug = describe_environment(device).device_slug + ("-quick" if args.quick else "")
    out_dir = args.out or REPO_ROOT / "benchmarks" / "results" / env_slug / "breadth"
    command = ("python -m benchmarks.breadth " + " ".join(argv)).strip()
    doc = run_suite(spec, config, out_dir, command, chart=not args.no_chart, resume=resume)
    print()
    print(render_markdown(doc).split("## Details")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
