"""``python -m benchmarks.models``: whole Hugging Face models, wall time first.

Builds each model of `benchmarks.models` from its config with random weights (no
download), checks every system against a float32 run of the same weights and inputs
(a wrong result or a compile failure is FAILED and never timed; fuseopt runs with
``strict=True``, so a backend failure is never a silent eager fallback), and times the
correct ones: wall time (do_bench median on a GPU), kernel time and launches
(torch.profiler), host overhead (wall minus kernel time), compile time cold and warm.
Writes ``results.json``, ``results.md`` and ``speedup.png`` under
``benchmarks/results/<device>/models/`` (or ``--out``).

Systems: eager, torch.compile (default, max-autotune-no-cudagraphs, and reduce-overhead
for decode), fuseopt per backend and mode through ``fuseopt.compile`` and again through
``torch.compile(backend="fuseopt")``. ``--budget-s`` stops starting rows and systems
after S seconds (recorded as skipped); ``--resume results.json`` reruns only those.
Needs ``transformers`` (the ``test`` extra); without it the suite says so and exits 0.
"""

from __future__ import annotations

import argparse
import sys

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
from benchmarks.systems import System, make_model_systems
from benchmarks.workloads import Shape, Workload

TRANSFORMERS_MISSING = (
    "benchmarks.models: skipped: `transformers` is not installed "
    "(pip install -e '.[test]' installs it)"
)
"""What the suite prints, and exits 0 with, when transformers is missing."""


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.models",
        description="Hugging Face models (random weights) in prefill, decode and training: "
        "check against float32, time wall and kernels, write JSON + Markdown + PNG.",
    )
    add_common_arguments(
        parser,
        budget_help="after S seconds start no new row or system (recorded as skipped; "
        "--resume reruns them)",
    )
    add_resume_arguments(parser)
    return parser


def systems_for_scenario(systems: list[System], scenario: str) -> list[System]:
    """The systems of one scenario: CUDA-graph modes only for decode; in training
    every system compiles the loss inside the same AdamW step (`TrainingSystem`)."""
    from benchmarks.models.training import TrainingSystem

    if scenario != "decode":
        systems = [s for s in systems if not s.launch_bound_only]
    if scenario == "train":
        systems = [TrainingSystem(s) for s in systems]
    return systems


def plan(workloads: list[Workload], quick: bool) -> list[tuple[int, Workload, Shape]]:
    """Rows with their table position, run scenario by scenario (prefill first)."""
    rows = [(i, w, w.shapes_for(quick)[0]) for i, w in enumerate(workloads)]
    from benchmarks.models import SCENARIOS

    return sorted(rows, key=lambda row: SCENARIOS.index(row[2].label))


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.models``; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    try:
        import transformers  # noqa: F401 - only whether it is there
    except ImportError:
        print(TRANSFORMERS_MISSING)
        return 0
    from benchmarks.models import select_models

    try:
        device = device_from(args.device)
        if device.type != "cuda" and not args.quick:
            raise ValueError(
                "full-size models need a GPU (CPU timings say nothing about kernels); "
                "use --quick to test the suite on this machine"
            )
        workloads = select_models(only_entries(args.only))
        backends = backends_from(args.backend, device, quick_backends)
        systems = system_filter(
            make_model_systems(device, backends, args.cpu_compile), args.systems
        )
        resume = load_record(args.resume) if args.resume else None
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    config = started_config(args, device)
    fresh_compile_caches()
    spec = SuiteSpec(
        suite="models",
        title="fuseopt model benchmarks",
        instances=plan(workloads, args.quick),
        systems=systems,
        systems_for=lambda workload, shape: systems_for_scenario(systems, shape.label),
        skip_rows_over_budget=True,
        traffic_model=False,
    )
    env_slug = describe_environment(device).device_slug + ("-quick" if args.quick else "")
    out_dir = args.out or REPO_ROOT / "benchmarks" / "results" / env_slug / "models"
    command = ("python -m benchmarks.models " + " ".join(argv)).strip()
    doc = run_suite(spec, config, out_dir, command, chart=not args.no_chart, resume=resume)
    print()
    print(render_markdown(doc).split("## Details")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
