"""Operations on run records (the dict written as results.json): per-system summary
and the merge of several runs.

`benchmarks.report` renders what these compute; they live apart so the report module
stays about rendering.
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.harness import geometric_mean
from benchmarks.systems import BASELINES, MAX_AUTOTUNE, TORCH_COMPILE


def is_timed(entry: dict) -> bool:
    """Whether the system ran correctly and has a timing."""
    return entry.get("status") == "ok" and bool(entry.get("time_us"))


def summarize(doc: dict) -> dict[str, Any]:
    """Per-system summary by wall time (the do_bench median): geometric-mean speedups,
    the worst instance against torch.compile and against max-autotune, the median % of
    roofline; the same by kernel time under ``kernel_`` keys (a diagnostic).

    Also a "best fuseopt" line: per instance the fastest correct fuseopt system.
    """
    results = doc["results"]
    names = [s["name"] for s in doc["config"]["systems"]]
    summary: dict[str, Any] = {}
    for name in names:
        summary[name] = _system_summary(results, lambda r, n=name: r["systems"].get(n, {}))
        for base in (MAX_AUTOTUNE, TORCH_COMPILE):
            if name == base:  # against itself: 1.00x by definition
                for key in ("", "kernel_"):
                    summary[name][f"{key}worst_vs_{WORST_KEYS[base]}"] = None
    fuseopt = [n for n in names if n.startswith("fuseopt")]

    def best_fuseopt(result: dict) -> dict:
        entries = [result["systems"].get(n, {}) for n in fuseopt]
        timed = [e for e in entries if is_timed(e)]
        if timed:
            return min(timed, key=lambda e: e["time_us"])
        statuses = [e.get("status") for e in entries]
        return next(({"status": s} for s in ("FAILED", "skipped") if s in statuses), {})

    if fuseopt:
        summary["best fuseopt"] = _system_summary(results, best_fuseopt)
    return summary


def _has_kernel_time(entry: dict) -> bool:
    return is_timed(entry) and bool(entry.get("kernel_us"))


WORST_KEYS = {TORCH_COMPILE: "torch_compile", MAX_AUTOTUNE: "max_autotune"}
"""The baselines whose worst instance the summary names, and their key in it."""


def _system_summary(results: list[dict], pick: Any) -> dict[str, Any]:
    """One system's summary over `results`, by do_bench median and, where torch.profiler
    measured it (GPU runs), by kernel time: the device time per call, free of host
    overhead, which dominates (and makes noisy) the medians of short kernels."""
    counts: dict[str, int] = {}
    summary: dict[str, Any] = {}
    for key, field, has in (("", "time_us", is_timed), ("kernel_", "kernel_us", _has_kernel_time)):
        vs: dict[str, list[float]] = {base: [] for base in BASELINES}
        worst: dict[str, tuple[float, str] | None] = dict.fromkeys(WORST_KEYS)
        roofline_pcts: list[float] = []
        for result in results:
            entry = pick(result)
            if not key:
                status = entry.get("status", "n/a")
                counts[status] = counts.get(status, 0) + 1
            if not has(entry):
                continue
            label = f"{result['workload']} {result['shape']}"
            for base in BASELINES:
                base_entry = result["systems"].get(base, {})
                if has(base_entry):
                    vs[base].append(base_entry[field] / entry[field])
            for base in WORST_KEYS:
                base_entry = result["systems"].get(base, {})
                if has(base_entry):
                    ratio = base_entry[field] / entry[field]
                    if worst[base] is None or ratio < worst[base][0]:
                        worst[base] = (ratio, label)
            if result["bound"] == "memory" and result.get("roofline_us"):
                roofline_pcts.append(100.0 * result["roofline_us"] / entry[field])
        summary[f"{key}geomean_speedup"] = {base: geometric_mean(v) for base, v in vs.items()}
        for base, base_key in WORST_KEYS.items():
            found = worst[base]
            summary[f"{key}worst_vs_{base_key}"] = (
                {"speedup": found[0], "instance": found[1]} if found else None
            )
        summary[f"{key}median_pct_roofline_memory_bound"] = (
            statistics.median(roofline_pcts) if roofline_pcts else None
        )
    return {"counts": counts, **summary}


def runs_of(doc: dict) -> list[dict]:
    """The runs a record came from (one, unless it is a merge of several)."""
    if doc.get("runs"):
        return doc["runs"]
    return [
        {
            "environment": doc["environment"],
            "ceilings": doc["ceilings"],
            "command": doc["config"]["command"],
            "complete": doc.get("complete", True),
            "elapsed_s": doc.get("elapsed_s"),
        }
    ]


def _timed_count(result: dict) -> int:
    return sum(1 for e in result["systems"].values() if is_timed(e))


def merge_runs(docs: list[dict]) -> dict:
    """Merge run records: a later run's instance replaces an earlier run's, unless it
    timed fewer systems (a budget-cut later run never erases a fuller earlier row).

    Each instance keeps every system it was measured with in its own run (one process,
    one GPU), so comparisons stay within one run; the merged record lists the runs
    (machine, ceilings, command) and tags each instance with the run it came from.
    """
    devices = {run["environment"]["device_name"] for doc in docs for run in runs_of(doc)}
    if len(devices) > 1:
        raise ValueError(f"cannot merge runs from different devices: {', '.join(sorted(devices))}")
    runs: list[dict] = []
    results: dict[tuple[str, str], dict] = {}
    systems: dict[str, dict] = {}
    for doc in docs:
        offset = len(runs)
        runs.extend(runs_of(doc))
        for result in doc["results"]:
            merged = dict(result, run=result.get("run", 0) + offset)
            key = (result["workload"], result["shape"])
            if key not in results or _timed_count(merged) >= _timed_count(results[key]):
                results[key] = merged
        for system in doc["config"]["systems"]:
            systems.setdefault(system["name"], system)
    first = docs[0]
    return {
        **first,
        "config": {**first["config"], "systems": list(systems.values())},
        "runs": runs,
        "results": list(results.values()),
        "complete": all(run.get("complete", True) for run in runs),
        "timings_meaningful": all(doc["timings_meaningful"] for doc in docs),
        "elapsed_s": sum(run.get("elapsed_s") or 0 for run in runs),
    }
