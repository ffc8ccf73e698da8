"""``python -m benchmarks.run``: the PERFORMANCE.md workload suite.

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
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.harness import RunConfig, run_instance
from benchmarks.machine import REPO_ROOT, describe_environment, measure_ceilings
from benchmarks.report import render_markdown, write_json, write_markdown, write_reports
from benchmarks.systems import System, default_backends, make_systems
from benchmarks.workloads import (
    PERFORMANCE_BASELINE_ROWS,
    Shape,
    Workload,
    all_workloads,
    select_workloads,
)

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description=(
            "Run the PERFORMANCE.md workloads: check every system against a float64 "
            "reference, time the correct ones, write JSON + Markdown + PNG results."
        ),
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME[:SHAPE]",
        help="run only these workloads (comma-separated or repeated), e.g. rmsnorm:prefill",
    )
    parser.add_argument(
        "--backend",
        metavar="B[,B]",
        help="fuseopt backends to compare (default: triton,cuda on a GPU, interpret on a "
        "CPU; 'none' for no fuseopt column)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny shapes, any device: tests the harness only"
    )
    parser.add_argument(
        "--out", type=Path, help="output directory (default: benchmarks/results/<device>)"
    )
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="bf16")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights and inputs")
    parser.add_argument(
        "--budget-s",
        type=float,
        metavar="S",
        help="after S seconds, skip the remaining compiled systems (recorded as skipped); "
        "PERFORMANCE.md's baseline rows run first",
    )
    parser.add_argument(
        "--autotune-budget-s",
        type=float,
        metavar="S",
        help="like --budget-s, for the autotuning systems only (max-autotune compiles a "
        "GEMM workload for 25-50 s on an H100)",
    )
    parser.add_argument(
        "--system-timeout-s",
        type=float,
        metavar="S",
        help="stop one system on one instance after S seconds of compile + check + timing "
        "(recorded as skipped, the suite goes on; eager is never stopped)",
    )
    parser.add_argument(
        "--in-order",
        action="store_true",
        help="run the --only instances in the order given (default: baseline-table rows "
        "first, then memory-bound, then GEMM workloads)",
    )
    parser.add_argument(
        "--no-warm-compile", action="store_true", help="do not measure warm compile times"
    )
    parser.add_argument(
        "--cpu-compile",
        action="store_true",
        help="include torch.compile on a CPU (skipped by default: tens of seconds per graph)",
    )
    parser.add_argument("--no-chart", action="store_true", help="do not draw speedup.png")
    return parser


def _device(choice: str) -> torch.device:
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available here")
    return torch.device(choice)


def _backends(text: str | None, device: torch.device) -> tuple[str, ...]:
    if text is None:
        return default_backends(device)
    names = tuple(b.strip() for b in text.split(",") if b.strip())
    return () if names == ("none",) else names


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
    """Run order under a time budget: PERFORMANCE.md's baseline rows, then memory-bound
    workloads (cheap to compile), then GEMM workloads (autotuning takes ~45 s each)."""
    if (workload.name, shape.label) in PERFORMANCE_BASELINE_ROWS:
        return 0
    return 2 if workload.flops(shape.dims) else 1


def run_suite(
    instances: list[tuple[int, Workload, Shape]],
    systems: list[System],
    config: RunConfig,
    out_dir: Path,
    command: str,
    chart: bool = True,
) -> dict:
    """Measure the machine, run every instance, write the reports; returns the run record."""
    env = describe_environment(config.device)
    print(f"device: {env.device_name}; torch {env.torch}; triton {env.triton}", flush=True)
    ceilings = measure_ceilings(config.device, config.quick)
    meaningful = config.device.type == "cuda" and not config.quick
    print(
        f"copy bandwidth {ceilings.copy_bytes_per_s / 1e9:.0f} GB/s; bf16 matmul "
        f"{ceilings.matmul_flops_per_s / 1e12:.1f} TFLOP/s"
        + ("" if meaningful else " (not meaningful: CPU/quick)"),
        flush=True,
    )
    doc: dict = {
        "schema": "fuseopt-benchmarks/1",
        "environment": env.as_dict(),
        "ceilings": ceilings.as_dict(),
        "config": {
            "command": command,
            "quick": config.quick,
            "device": str(config.device),
            "dtype": str(config.dtype).removeprefix("torch."),
            "budget_s": config.budget_s,
            "autotune_budget_s": config.autotune_budget_s,
            "system_timeout_s": config.system_timeout_s,
            "systems": [{"name": s.name, "description": s.description} for s in systems],
        },
        "timings_meaningful": meaningful,
        "complete": False,
        "results": [],
    }
    for order, workload, shape in instances:
        try:
            result = run_instance(workload, shape, systems, ceilings, config)
        except torch.OutOfMemoryError as exc:
            print(f"{workload.name} {shape.label}: out of memory ({exc})", flush=True)
            continue
        result["order"] = order
        doc["results"].append(result)
        doc["elapsed_s"] = config.elapsed_s()
        write_json(doc, out_dir)
        write_markdown({**doc, "summary": {}}, out_dir)
    doc["complete"] = True
    doc["elapsed_s"] = config.elapsed_s()
    for path in write_reports(doc, out_dir, chart=chart):
        print(f"wrote {path}", flush=True)
    return doc


def _fresh_compile_caches() -> None:
    """Point Inductor's and fuseopt's on-disk caches at empty directories (unless set).

    "Cold" compile times then mean the first compile in this process: no kernels from
    earlier runs, although a later workload may reuse a kernel an earlier one built.
    """
    for variable in ("TORCHINDUCTOR_CACHE_DIR", "FUSEOPT_CACHE_DIR"):
        if not os.environ.get(variable):
            os.environ[variable] = tempfile.mkdtemp(prefix=f"bench-{variable.lower()}-")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.run``; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    try:
        device = _device(args.device)
        if device.type != "cuda" and not args.quick:
            raise ValueError(
                "full-size shapes need a GPU (CPU timings say nothing about kernels); "
                "use --quick to test the harness on this machine"
            )
        only = [n for entry in args.only or [] for n in entry.split(",") if n]
        selection = select_workloads(only)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    config = RunConfig(
        device=device,
        dtype=DTYPES[args.dtype],
        quick=args.quick,
        seed=args.seed,
        budget_s=args.budget_s,
        autotune_budget_s=args.autotune_budget_s,
        system_timeout_s=args.system_timeout_s,
        warm_compile=not args.no_warm_compile,
        started=time.perf_counter(),
    )
    _fresh_compile_caches()
    systems = make_systems(device, _backends(args.backend, device), args.cpu_compile)
    env_slug = describe_environment(device).device_slug + ("-quick" if args.quick else "")
    out_dir = args.out or REPO_ROOT / "benchmarks" / "results" / env_slug
    command = "python -m benchmarks.run " + " ".join(argv)
    doc = run_suite(
        plan_instances(selection, args.quick, args.in_order),
        systems,
        config,
        out_dir,
        command.strip(),
        chart=not args.no_chart,
    )
    print()
    print(render_markdown(doc).split("## Details")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
