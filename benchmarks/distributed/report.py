"""The distributed benchmark's record (results.json) and table (results.md).

One record per device kind and output directory holds rows of every world size: a run
adds its rows and replaces those it measured again (same world size, strategy and
system), so runs at world sizes 1, 2 and 4, or of one strategy at a time, fill one
table. Each row names the run that measured it (command, date, versions). Rank 0
rewrites both files after every cell, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.distributed.launch import Rank
from benchmarks.machine import describe_environment
from benchmarks.report import JSON_NAME, MARKDOWN_NAME, write_json
from benchmarks.systems import EAGER, TORCH_COMPILE

SCHEMA = "fuseopt-benchmarks-distributed/1"
"""The record format written as results.json."""

TITLE = "fuseopt distributed benchmarks"


def row_key(row: dict[str, Any]) -> tuple[int, str, str]:
    """What a row measures: (world size, strategy, system)."""
    return row["world_size"], row["strategy"], row["system"]


def load_record(out_dir: Path, device_name: str) -> dict[str, Any] | None:
    """The record already in `out_dir` when it is this format and this device's, else None."""
    try:
        doc = json.loads((out_dir / JSON_NAME).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if doc.get("schema") != SCHEMA:
        return None
    devices = {run["environment"]["device_name"] for run in doc.get("runs", [])}
    return doc if devices <= {device_name} else None


class Writer:
    """Rank 0's record of a run: merged into `config.out`'s record, rewritten per row."""

    def __init__(self, where: Rank, config: Any):
        self.out = Path(config.out)
        environment = describe_environment(where.device)
        existing = load_record(self.out, environment.device_name) if config.merge else None
        self.doc = existing or {"schema": SCHEMA, "title": TITLE, "runs": [], "results": []}
        self.run = len(self.doc["runs"])
        self.doc["runs"].append(
            {
                "command": config.command,
                "world_size": where.world_size,
                "dtype": config.dtype,
                "quick": config.quick,
                "warmup_steps": config.warmup,
                "timed_steps": config.steps,
                "timings_meaningful": where.device.type == "cuda" and not config.quick,
                "environment": environment.as_dict(),
            }
        )

    def add(self, row: dict[str, Any]) -> None:
        """Add (or replace) a row and rewrite results.json and results.md."""
        row = {**row, "run": self.run}
        kept = [r for r in self.doc["results"] if row_key(r) != row_key(row)]
        self.doc["results"] = sorted([*kept, row], key=_order)
        write_json(self.doc, self.out)
        (self.out / MARKDOWN_NAME).write_text(render_markdown(self.doc), encoding="utf-8")


def _order(row: dict[str, Any]) -> tuple[Any, ...]:
    from benchmarks.distributed.parallel import STRATEGIES

    return row["world_size"], STRATEGIES.index(row["strategy"]), row["run"]


def _fmt(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def _ratio(row: dict[str, Any], base: dict[str, Any] | None) -> str:
    """How many times faster than `base` (the same world size and strategy)."""
    if not base or base.get("status") != "ok" or row.get("status") != "ok":
        return ""
    return f"{base['step_ms'] / row['step_ms']:.2f}x"


def _status(row: dict[str, Any]) -> str:
    if row["status"] == "ok":
        return "ok"
    return f"{row['status']}: {row.get('reason', '')}".replace("|", "\\|")


def _baselines(rows: list[dict[str, Any]]) -> dict[tuple[int, str, str], dict[str, Any]]:
    return {row_key(r): r for r in rows if r["system"] in (EAGER, TORCH_COMPILE)}


def _results_table(doc: dict[str, Any]) -> list[str]:
    lines = [
        "| world size | strategy | scenario | system | step (ms) | tokens/s | vs eager "
        "| vs torch.compile | compile (s) | rel_l2 vs eager | ops run eagerly | run | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    bases = _baselines(doc["results"])
    for r in doc["results"]:
        world, strategy, _ = row_key(r)
        error = r.get("error_vs_eager_rel_l2")
        lines.append(
            f"| {world} | {strategy} | {r['scenario']} | {r['system']} "
            f"| {_fmt(r.get('step_ms'), 2)} | {_fmt(r.get('tokens_per_s'), 0)} "
            f"| {_ratio(r, bases.get((world, strategy, EAGER)))} "
            f"| {_ratio(r, bases.get((world, strategy, TORCH_COMPILE)))} "
            f"| {_fmt(r.get('compile_s'))} | {'' if error is None else f'{error:.1e}'} "
            f"| {'' if r.get('fallback_ops') is None else r['fallback_ops']} "
            f"| {r['run']} | {_status(r)} |"
        )
    return lines


def _runs_table(doc: dict[str, Any]) -> list[str]:
    lines = [
        "| run | date | device | world size | dtype | steps (warm-up + timed) | torch "
        "| triton | fuseopt commit | command |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, run in enumerate(doc["runs"]):
        env = run["environment"]
        steps = f"{run['warmup_steps']} + {run['timed_steps']}"
        lines.append(
            f"| {i} | {env['date_utc']} | {env['device_name']} | {run['world_size']} "
            f"| {run['dtype']} | {steps} | {env['torch']} | {env['triton']} "
            f"| {env['fuseopt_commit']} | `{run['command']}` |"
        )
    return lines


def _model_line(doc: dict[str, Any]) -> str:
    dims = next((r["dims"] for r in doc["results"]), None)
    if dims is None:
        return ""
    return (
        f"Model: the model suite's Llama (hidden {dims['hidden']}, {dims['layers']} layers, "
        f"{dims['heads']} query / {dims['kv_heads']} key-value heads, intermediate "
        f"{dims['intermediate']}, vocab {dims['vocab']}), random weights, {dims['batch']} x "
        f"{dims['seq']} tokens per step and rank."
    )


METHOD = (
    "DDP and FSDP2 (`fully_shard` per decoder layer and the root): a training step "
    "(forward with labels, backward, AdamW), each rank its own batch; tokens/s counts every "
    "rank's. TP (ColwiseParallel q/k/v/gate/up, RowwiseParallel o/down): a prefill of one "
    "prompt shared by all ranks. Step time: the median of the timed steps after the warm-up, "
    "each started after a barrier and ended by a synchronize; the slowest rank's median. "
    "Compile: the system's compile and first call plus the first whole step. Each system's "
    "first output (the loss, or the logits) is checked against eager's (rel_l2); a system "
    "wrong or failing in any rank is FAILED and not timed. fuseopt runs with strict=True."
)


def render_markdown(doc: dict[str, Any]) -> str:
    """The Markdown report of a record."""
    meaningful = all(run["timings_meaningful"] for run in doc["runs"])
    lines = [f"# {TITLE}", "", _model_line(doc), "", METHOD, ""]
    if not meaningful:
        lines += ["**Timings not meaningful** (CPU or --quick): these rows test the plumbing.", ""]
    lines += ["## Results", "", *_results_table(doc), "", "## Runs", "", *_runs_table(doc), ""]
    return "\n".join(lines)


def progress_line(row: dict[str, Any]) -> str:
    """One line per finished cell, for the console."""
    head = f"world {row['world_size']} {row['strategy']}/{row['scenario']} {row['system']}"
    if row["status"] != "ok":
        return f"{head}: {_status(row)}"
    compile_s = "" if row["compile_s"] is None else f" (compile {row['compile_s']:.1f} s)"
    return f"{head}: {row['step_ms']:.2f} ms, {row['tokens_per_s']:,.0f} tokens/s{compile_s}"
