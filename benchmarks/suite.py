"""What every benchmark suite shares: its command line, the loop over instances, resuming.

Three suites use it: `benchmarks.run` (the workload suite), `benchmarks.models`
(Hugging Face models) and `benchmarks.breadth` (single ops and short patterns). Each
names its instances (a `Workload` at a `Shape`) and the systems to compare on each; this
module measures the machine, runs every instance through `benchmarks.harness`, rewrites
the JSON and Markdown after every instance (a run cut short still leaves what it
measured) and renders the reports at the end.

A suite with ``--resume FILE`` starts from an earlier run's record: systems that
record already measured (ok, FAILED, n/a, or stopped by the per-system time limit) are
kept as they were, and only the rest (never run, or skipped by a time budget) run
now. Rerunning the same command until nothing is pending is how a suite longer than
one budgeted run is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from benchmarks.harness import RunConfig, run_instance
from benchmarks.machine import describe_environment, measure_ceilings
from benchmarks.records import merge_runs
from benchmarks.report import write_json, write_markdown, write_reports
from benchmarks.systems import System, default_backends
from benchmarks.workloads import Shape, Workload

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
"""The --dtype choices."""

SCHEMA = "fuseopt-benchmarks/1"
"""The record format written as results.json."""

BUDGET_REASON = "time budget"
"""Words every budget-skip reason contains (`pending` looks for them)."""


def add_common_arguments(parser: argparse.ArgumentParser, budget_help: str) -> None:
    """The options every suite takes: selection, backends, output, device, budgets."""
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME[:SHAPE]",
        help="run only these instances (comma-separated or repeated), e.g. NAME or NAME:SHAPE",
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
        "--out", type=Path, help="output directory (default: benchmarks/results/<device>...)"
    )
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="bf16")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights and inputs")
    parser.add_argument("--budget-s", type=float, metavar="S", help=budget_help)
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
        "--no-warm-compile", action="store_true", help="do not measure warm compile times"
    )
    parser.add_argument(
        "--cpu-compile",
        action="store_true",
        help="include torch.compile on a CPU (skipped by default: tens of seconds per graph)",
    )
    parser.add_argument("--no-chart", action="store_true", help="do not draw speedup.png")


def add_resume_arguments(parser: argparse.ArgumentParser) -> None:
    """``--systems`` and ``--resume``: the options that split a long suite into runs."""
    parser.add_argument(
        "--systems",
        metavar="NAME[,NAME]",
        help="compare only these systems (names as in the report; eager always runs: it "
        "sets the tolerance)",
    )
    parser.add_argument(
        "--resume",
        type=Path,
        metavar="FILE",
        help="an earlier results.json of this suite on this device: keep what it measured, "
        "run only what it lacks or skipped for time, write the merged record",
    )


def device_from(choice: str) -> torch.device:
    """The --device choice as a device; ``auto`` is CUDA when one is available."""
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available here")
    return torch.device(choice)


def backends_from(
    text: str | None, device: torch.device, default: Callable[[torch.device], tuple[str, ...]]
) -> tuple[str, ...]:
    """The --backend list (``none``: no fuseopt system; unset: `default(device)`)."""
    if text is None:
        return default(device)
    names = tuple(b.strip() for b in text.split(",") if b.strip())
    return () if names == ("none",) else names


def quick_backends(device: torch.device) -> tuple[str, ...]:
    """The model and breadth suites' default fuseopt backends: the GPU backends on a GPU;
    on a CPU the reference interpreter and Triton (its kernels run in Triton's CPU
    interpreter), so a quick run goes through generated Triton code too."""
    return ("interpret", "triton") if device.type == "cpu" else default_backends(device)


def only_entries(only: list[str] | None) -> list[str]:
    """The --only values, comma-separated or repeated, as one list."""
    return [n for entry in only or [] for n in entry.split(",") if n]


def system_filter(systems: list[System], text: str | None) -> list[System]:
    """The systems --systems names (eager is kept: its error sets the tolerance)."""
    if not text:
        return systems
    wanted = {n.strip() for n in text.split(",") if n.strip()}
    known = {s.name for s in systems}
    unknown = wanted - known
    if unknown:
        raise ValueError(
            f"unknown system(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}"
        )
    return [s for s in systems if s.name in wanted or s.name == "eager"]


def fresh_compile_caches() -> None:
    """Point Inductor's and fuseopt's on-disk caches at empty directories (unless set).

    "Cold" compile times then mean the first compile in this process: no kernels from
    earlier runs, although a later instance may reuse a kernel an earlier one built.
    """
    for variable in ("TORCHINDUCTOR_CACHE_DIR", "FUSEOPT_CACHE_DIR"):
        if not os.environ.get(variable):
            os.environ[variable] = tempfile.mkdtemp(prefix=f"bench-{variable.lower()}-")


def load_record(path: Path) -> dict:
    """A results.json record (raises ValueError, naming the file, when unreadable)."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc


def is_pending(entry: dict) -> bool:
    """Whether a system entry still needs a run: absent, or skipped by a time budget.

    A system stopped by ``--system-timeout-s`` is a result (it did not finish in that
    time), not pending: resuming would only stop it again.
    """
    return not entry or (
        entry.get("status") == "skipped" and BUDGET_REASON in entry.get("reason", "")
    )


def pending(doc: dict) -> int:
    """How many (instance, system) pairs of a record still need a run (see `is_pending`)."""
    names = [s["name"] for s in doc["config"]["systems"]]
    return sum(
        1
        for r in doc["results"]
        for n in names
        if n in r.get("applicable", names) and is_pending(r["systems"].get(n, {}))
    )


@dataclass
class SuiteSpec:
    """One suite: its title, its instances and the systems each instance compares.

    `systems_for(workload, shape)` returns the systems of one instance (all of
    `systems` unless the suite restricts some to some scenarios); `skip_rows_over_budget`
    records every instance that starts after the budget as skipped without building it
    (models take seconds to build); `traffic_model` attaches fuseopt's HBM model.
    """

    suite: str
    title: str
    instances: list[tuple[int, Workload, Shape]]
    systems: list[System]
    systems_for: Callable[[Workload, Shape], list[System]] | None = None
    skip_rows_over_budget: bool = False
    traffic_model: bool = True


def _skipped_row(workload: Workload, shape: Shape, systems: list[System], budget: float) -> dict:
    reason = f"skipped ({BUDGET_REASON} of {budget:g} s spent before this instance)"
    return {
        "workload": workload.name,
        "shape": shape.label,
        "dims": dict(shape.dims),
        "computation": workload.computation,
        "tiny": shape.tiny,
        "min_bytes": 0,
        "flops": 0,
        "roofline_us": 0.0,
        "bound": "memory",
        "applicable": [s.name for s in systems],
        "systems": {s.name: {"status": "skipped", "reason": reason} for s in systems},
    }


def _carried(resume: dict | None, workload: Workload, shape: Shape) -> dict[str, dict]:
    """The system entries an earlier record measured for this instance (not pending)."""
    if resume is None:
        return {}
    for r in resume["results"]:
        if r["workload"] == workload.name and r["shape"] == shape.label:
            run = r.get("run", 0)
            return {
                name: {"run": run, **entry}
                for name, entry in r["systems"].items()
                if not is_pending(entry)
            }
    return {}


def run_suite(
    spec: SuiteSpec,
    config: RunConfig,
    out_dir: Path,
    command: str,
    chart: bool = True,
    resume: dict | None = None,
) -> dict:
    """Measure the machine, run every instance, write the reports; returns the run record.

    With `resume` (an earlier record of this suite), measured system entries are carried
    over and the written record is the merge of both runs.
    """
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
        "schema": SCHEMA,
        "suite": spec.suite,
        "title": spec.title,
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
            "systems": [{"name": s.name, "description": s.description} for s in spec.systems],
        },
        "timings_meaningful": meaningful,
        "complete": False,
        "results": [],
    }

    def current() -> dict:
        if resume is None:
            return doc
        merged = merge_runs([resume, doc])
        merged["complete"] = doc["complete"]
        return merged

    for order, workload, shape in spec.instances:
        systems = spec.systems_for(workload, shape) if spec.systems_for else spec.systems
        carried = _carried(resume, workload, shape)
        if all(s.name in carried for s in systems):
            continue  # measured by the earlier run
        if spec.skip_rows_over_budget and config.over_budget() and config.budget_s is not None:
            result = _skipped_row(workload, shape, systems, config.budget_s)
            result["systems"].update(carried)
            print(f"{workload.name} {shape.label}: skipped (time budget spent)", flush=True)
        else:
            try:
                result = run_instance(
                    workload,
                    shape,
                    systems,
                    ceilings,
                    config,
                    carried=carried,
                    traffic_model=spec.traffic_model,
                )
            except torch.OutOfMemoryError as exc:
                print(f"{workload.name} {shape.label}: out of memory ({exc})", flush=True)
                continue
            result["applicable"] = [s.name for s in systems]
        result["order"] = order
        doc["results"].append(result)
        doc["elapsed_s"] = config.elapsed_s()
        record = current()
        write_json(record, out_dir)
        write_markdown({**record, "summary": {}}, out_dir)
    doc["complete"] = True
    doc["elapsed_s"] = config.elapsed_s()
    record = current()
    record["pending"] = pending(record)
    for path in write_reports(record, out_dir, chart=chart):
        print(f"wrote {path}", flush=True)
    print(
        f"{record['pending']} (instance, system) pair(s) still pending"
        + (f": rerun with --resume {out_dir / 'results.json'}" if record["pending"] else ""),
        flush=True,
    )
    return record


def started_config(args: argparse.Namespace, device: torch.device) -> RunConfig:
    """The RunConfig the common arguments describe, its clock started now."""
    return RunConfig(
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
