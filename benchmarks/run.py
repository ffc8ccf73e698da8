"""``python -m benchmarks.run``: the workload suite (docs/performance.md).

Measures the machine's copy bandwidth and bf16 matmul rate, then for every workload
instance checks each system (eager, torch.compile, torch.compile max-autotune,
fuseopt per backend) against a float64 reference and times the correct ones. Writes
``results.json``, ``results.md`` and ``speedup.png`` under
``benchmarks/results/<device>/`` (or ``--out``); the JSON and Markdown are rewritten
after every instance, so a run cut short still leaves what it measured.

``--quick`` runs tiny shapes on any machine (CPU included) to test the harness itself;
its timings are labeled not meaningful.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.machine import REPO_ROOT, describe_environment
from benchmarks.report import render_markdown
from benchmarks.suite import (
    SuiteSpec,
    add_common_arguments,
    backends_from,
    device_from,
    fresh_compile_caches,
    only_entries,
    run_suite,
    started_config,
)
from benchmarks.systems import default_backends, make_systems
from benchmarks.workloads import (
    PERFORMANCE_BASELINE_ROWS,
    Shape,
    Workload,
    all_workloads,
    select_workloads,
)


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description=(
            "Run the workload suite: check every system against a float64 "
            "reference, time the correct ones, write JSON + Markdown + PNG results."
        ),
    )
    add_common_arguments(
        parser,
        budget_help="after S seconds, skip the remaining compiled systems (recorded as "
        "skipped); the baseline rows run first",
    )
    parser.add_argument(
        "--in-order",
        action="store_true",
        help="run the --only instances in the order given (default: baseline-table rows "
        "first, then memory-bound, then GEMM workloads)",
    )
    return parser


def plan_instances(
    selection: list[tuple[Workload, Shape | None]], quick: bool, in_order: bool = False
) -> list[tuple[int, Workload, Shape]]:
    """The instances to run, each with its table position, in run order.

    Table positions follow the workload table; unless `in_order`, instances run in
    `_priority` order so that a time budget is spent on the most useful ones first.
    """
    instances: list[tuple[int, Workload, Shape]] = []
    for workload, shape in selection:
        for s in (shape,) if shape is not None else workload.shapes_for(quick):
            instances.append((len(instances), workload, s))
    table = {(w.name, s.label): i for i, (w, s) in enumerate(_table_order())}
    instances = [(table.get((w.name, s.label), i), w, s) for i, w, s in instances]
    if in_order:
        return instances
    return sorted(instances, key=lambda i: _priority(i[1], i[2]))


def _table_order() -> list[tuple[Workload, Shape]]:
    return [(w, s) for w in all_workloads() for s in (*w.shapes, w.quick_shape)]


def _priority(workload: Workload, shape: Shape) -> int:
    """Run order under a time budget: the baseline rows, then memory-bound
    workloads (cheap to compile), then GEMM workloads (autotuning takes ~45 s each)."""
    if (workload.name, shape.label) in PERFORMANCE_BASELINE_ROWS:
        return 0
    return 2 if workload.flops(shape.dims) else 1


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.run``; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    try:
        device = device_from(args.device)
        if device.type != "cuda" and not args.quick:
            raise ValueError(
                "full-size shapes need a GPU (CPU timings say nothing about kernels); "
                "use --quick to test the harness on this machine"
            )
        selection = select_workloads(only_entries(args.only))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    config = started_config(args, device)
    fresh_compile_caches()
    backends = backends_from(args.backend, device, default_backends)
    spec = SuiteSpec(
        suite="workloads",
        title="fuseopt benchmarks",
        instances=plan_instances(selection, args.quick, args.in_order),
        systems=make_systems(device, backends, args.cpu_compile),
    )
    env_slug = describe_environment(device).device_slug + ("-quick" if args.quick else "")
    out_dir = args.out or REPO_ROOT / "benchmarks" / "results" / env_slug
    command = "python -m benchmarks.run " + " ".join(argv)
    doc = run_suite(spec, config, out_dir, command.strip(), chart=not args.no_chart)
    print()
    print(render_markdown(doc).split("## Details")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
