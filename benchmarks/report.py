"""Reports: the JSON record, the Markdown table and the speedup chart of one run.

The JSON file is the source of truth; the Markdown and the PNG are rendered from it,
so `python -m benchmarks.report results.json` re-renders them (for example after a
run on a GPU machine was cut short before drawing its chart).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import geometric_mean
from benchmarks.systems import BASELINES, EAGER, MAX_AUTOTUNE

JSON_NAME = "results.json"
MARKDOWN_NAME = "results.md"
CHART_NAME = "speedup.png"
NOT_MEANINGFUL = "not meaningful (CPU)"


def _ok(entry: dict) -> bool:
    return entry.get("status") == "ok" and bool(entry.get("time_us"))


def summarize(doc: dict) -> dict[str, Any]:
    """Per-system summary: geometric-mean speedups, worst workload, median % of roofline.

    Also a "best fuseopt" line: per instance the fastest correct fuseopt system.
    """
    results = doc["results"]
    names = [s["name"] for s in doc["config"]["systems"]]
    summary: dict[str, Any] = {}
    for name in names:
        summary[name] = _system_summary(results, lambda r, n=name: r["systems"].get(n, {}))
    fuseopt = [n for n in names if n.startswith("fuseopt")]

    def best_fuseopt(result: dict) -> dict:
        entries = [result["systems"].get(n, {}) for n in fuseopt]
        timed = [e for e in entries if _ok(e)]
        if timed:
            return min(timed, key=lambda e: e["time_us"])
        statuses = [e.get("status") for e in entries]
        return next(({"status": s} for s in ("FAILED", "skipped") if s in statuses), {})

    if fuseopt:
        summary["best fuseopt"] = _system_summary(results, best_fuseopt)
    return summary


def _system_summary(results: list[dict], pick: Any) -> dict[str, Any]:
    counts: dict[str, int] = {}
    vs: dict[str, list[float]] = {base: [] for base in BASELINES}
    worst: tuple[float, str] | None = None
    roofline_pcts: list[float] = []
    for result in results:
        entry = pick(result)
        status = entry.get("status", "n/a")
        counts[status] = counts.get(status, 0) + 1
        if not _ok(entry):
            continue
        label = f"{result['workload']} {result['shape']}"
        for base in BASELINES:
            base_entry = result["systems"].get(base, {})
            if _ok(base_entry):
                vs[base].append(base_entry["time_us"] / entry["time_us"])
        mat = result["systems"].get(MAX_AUTOTUNE, {})
        if _ok(mat):
            ratio = mat["time_us"] / entry["time_us"]
            if worst is None or ratio < worst[0]:
                worst = (ratio, label)
        if result["bound"] == "memory":
            roofline_pcts.append(100.0 * result["roofline_us"] / entry["time_us"])
    return {
        "counts": counts,
        "geomean_speedup": {base: geometric_mean(v) for base, v in vs.items()},
        "worst_vs_max_autotune": {"speedup": worst[0], "instance": worst[1]} if worst else None,
        "median_pct_roofline_memory_bound": (
            statistics.median(roofline_pcts) if roofline_pcts else None
        ),
    }


def write_json(doc: dict, out_dir: Path) -> Path:
    """Write the run record (atomically: a cut-short run never leaves half a file)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / JSON_NAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)
    return path


def _runs_of(doc: dict) -> list[dict]:
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
    return sum(1 for e in result["systems"].values() if _ok(e))


def merge_runs(docs: list[dict]) -> dict:
    """Merge run records: a later run's instance replaces an earlier run's, unless it
    timed fewer systems (a budget-cut later run never erases a fuller earlier row).

    Each instance keeps every system it was measured with in its own run (one process,
    one GPU), so comparisons stay within one run; the merged record lists the runs
    (machine, ceilings, command) and tags each instance with the run it came from.
    """
    runs: list[dict] = []
    results: dict[tuple[str, str], dict] = {}
    systems: dict[str, dict] = {}
    for doc in docs:
        offset = len(runs)
        runs.extend(_runs_of(doc))
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


def _fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return ""
    if abs(value) >= 1000:
        return f"{value:.0f}"
    if 0 < abs(value) < 1 and digits < 3:
        return f"{value:.3f}"
    return f"{value:.{digits}f}"


HOST_BOUND_RATIO = 1.5
"""A timed median over this multiple of the profiled kernel time is marked host-bound."""


def host_bound(entry: dict) -> bool:
    """Whether the median is dominated by host work (Python, guards, launches): the
    do_bench median exceeds `HOST_BOUND_RATIO` x the kernels' own device time."""
    kernel_us = entry.get("kernel_us")
    return _ok(entry) and bool(kernel_us) and entry["time_us"] > HOST_BOUND_RATIO * kernel_us


def _cell(entry: dict) -> str:
    if _ok(entry):
        return _fmt(entry["time_us"]) + ("*" if host_bound(entry) else "")
    return {"FAILED": "FAILED", "skipped": "skipped"}.get(entry.get("status", ""), "n/a")


def _sorted(results: list[dict]) -> list[dict]:
    return sorted(results, key=lambda r: r.get("order", 0))


def _device_text(env: dict) -> str:
    gpu = env["device_name"]
    if env.get("sm_count"):
        gpu += f" ({env['sm_count']} SMs"
        if env.get("l2_bytes"):
            gpu += f", {env['l2_bytes'] / 2**20:.0f} MiB L2"
        if env.get("memory_bytes"):
            gpu += f", {env['memory_bytes'] / 2**30:.0f} GiB"
        gpu += ")"
    return gpu


def _run_rows(run: dict, prefix: str) -> list[str]:
    env, ceil = run["environment"], run["ceilings"]
    copy_note = f"{ceil['copy_bytes'] / 2**20:.0f} MiB device-to-device copy, read + write"
    matmul = ceil["matmul_size"]
    return [
        f"| {prefix}date | {env['date_utc']} |",
        f"| {prefix}device | {_device_text(env)} |",
        f"| {prefix}driver / CUDA | {env['driver']} / {env['cuda']} |",
        f"| {prefix}torch / Triton / Python | {env['torch']} / {env['triton']} / {env['python']} |",
        f"| {prefix}fuseopt | {env['fuseopt']} (commit {env['fuseopt_commit']}) |",
        f"| {prefix}copy bandwidth | {ceil['copy_bandwidth_GBps']:.0f} GB/s ({copy_note}) |",
        f"| {prefix}bf16 matmul | {ceil['matmul_bf16_TFLOPs']:.1f} TFLOP/s ({matmul}^3, "
        "random data) |",
        f"| {prefix}command | `{run['command']}` |",
        f"| {prefix}run time | {run.get('elapsed_s') or 0:.0f} s"
        + ("" if run.get("complete", True) else " (cut short)")
        + " |",
    ]


def _header(doc: dict) -> list[str]:
    lines = [f"# fuseopt benchmarks: {doc['environment']['device_name']}", ""]
    if not doc["timings_meaningful"]:
        lines += [
            f"> Timings are **{NOT_MEANINGFUL}**: this run only exercises the harness "
            "(tiny shapes, CPU). Numbers that mean something come from a GPU run.",
            "",
        ]
    if not doc.get("complete", True):
        lines += ["> A run did not finish; the tables hold what it measured.", ""]
    runs = _runs_of(doc)
    if len(runs) > 1:
        lines += [
            f"Merged from {len(runs)} runs; each instance was measured, all its systems "
            "side by side, in one run (the `run` column).",
            "",
        ]
    lines += ["| | |", "|---|---|"]
    for i, run in enumerate(runs):
        lines += _run_rows(run, f"run {i}: " if len(runs) > 1 else "")
    lines += [f"| dtype | {doc['config']['dtype']} |", ""]
    return lines


def _summary_lines(doc: dict) -> list[str]:
    lines = ["## Summary", ""]
    lines.append(
        "Geometric-mean speedup over each baseline (instances where both ran correctly), "
        "the worst instance against torch.compile max-autotune, and the median % of "
        "roofline over memory-bound instances."
    )
    lines.append("")
    lines.append(
        "| system | ok / FAILED / n/a / skipped | vs eager | vs torch.compile | "
        "vs max-autotune | worst vs max-autotune | median % roofline |"
    )
    lines.append("|---|---|---|---|---|---|---|")
    for name, s in doc["summary"].items():
        c = s["counts"]
        counts = f"{c.get('ok', 0)} / {c.get('FAILED', 0)} / {c.get('n/a', 0)} / "
        counts += f"{c.get('skipped', 0)}"
        geo = s["geomean_speedup"]
        worst = s["worst_vs_max_autotune"]
        worst_text = f"{worst['speedup']:.2f}x ({worst['instance']})" if worst else ""
        speedups = " | ".join(f"{geo[b]:.2f}x" if geo.get(b) else "" for b in BASELINES)
        pct = _fmt(s["median_pct_roofline_memory_bound"])
        lines.append(f"| {name} | {counts} | {speedups} | {worst_text} | {pct} |")
    lines.append("")
    if not any(name.startswith("fuseopt") for name in doc["summary"]):
        lines += ["No fuseopt system was compared in this run (`--backend none`).", ""]
    return lines


def _times_table(doc: dict, names: list[str]) -> list[str]:
    unit = f"us, median, {NOT_MEANINGFUL}" if not doc["timings_meaningful"] else "us, median"
    multi = len(_runs_of(doc)) > 1
    lines = [f"## Time ({unit})", ""]
    run_head = "run | " if multi else ""
    lines.append(f"| workload | shape | {run_head}bound | roofline | " + " | ".join(names) + " |")
    lines.append("|---|---|---|---|" + ("---|" if multi else "") + "---|" * len(names))
    for r in _sorted(doc["results"]):
        cells = " | ".join(_cell(r["systems"].get(n, {})) for n in names)
        run_cell = f"{r.get('run', 0)} | " if multi else ""
        lines.append(
            f"| {r['workload']} | {r['shape']} | {run_cell}{r['bound']} | "
            f"{_fmt(r['roofline_us'])} | {cells} |"
        )
    lines.append("")
    if any(host_bound(e) for r in doc["results"] for e in r["systems"].values()):
        lines += [
            f"\\* host-bound: the median is over {HOST_BOUND_RATIO:g}x the profiled kernel "
            "time (`kernel us` in the details), so host work (Python, guards, launches) "
            "shows in it.",
            "",
        ]
    return lines


def _details_table(doc: dict, names: list[str]) -> list[str]:
    lines = ["## Details", ""]
    lines.append(
        "Speedups are the baseline's time over this system's. Kernels and kernel time "
        "come from torch.profiler (per call); launch time is host wall clock per call over "
        "back-to-back calls (tiny shapes only). HBM bytes: the compiler's fusion-report "
        "model (fuseopt only); the workload's floor is in the JSON (`min_bytes`). "
        "The roofline is the larger of min_bytes over the measured copy bandwidth and "
        "GEMM FLOPs over the measured 8192^3 matmul rate; that rate is one cuBLAS "
        "GEMM, not a hardware limit, so a larger GEMM can exceed 100%."
    )
    lines.append("")
    heads = [
        "workload",
        "shape",
        "system",
        "status",
        "time us",
        "% roofline",
        "x eager",
        "x compile",
        "x max-autotune",
        "kernels",
        "kernel us",
        "launch us",
        "HBM bytes",
        "compile cold s",
        "compile warm s",
        "rel_l2",
        "max_rel",
    ]
    lines.append("| " + " | ".join(heads) + " |")
    lines.append("|" + "---|" * len(heads))
    for r in _sorted(doc["results"]):
        for n in names:
            e = r["systems"].get(n, {})
            if e.get("status") in ("n/a", "skipped"):
                continue
            sp = e.get("speedup", {})
            err = e.get("error", {})
            row = [
                r["workload"],
                r["shape"],
                n,
                e.get("status", ""),
                _fmt(e.get("time_us")),
                _fmt(e.get("pct_roofline")),
                _fmt(sp.get(EAGER), 2),
                _fmt(sp.get(BASELINES[1]), 2),
                _fmt(sp.get(MAX_AUTOTUNE), 2),
                _kernels(e),
                _fmt(e.get("kernel_us")),
                _fmt(e.get("launch_us")),
                str(e.get("hbm_bytes_model") or ""),
                _fmt(e.get("compile_cold_s"), 2),
                _fmt(e.get("compile_warm_s"), 2),
                f"{err['rel_l2']:.1e}" if err else "",
                f"{err['max_rel']:.1e}" if err else "",
            ]
            lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    return lines


def _kernels(entry: dict) -> str:
    """Profiled kernels per call; else the compiler's own count, marked "(compiled)"."""
    eager = f" + {entry['fallback_ops']} eager op(s)" if entry.get("fallback_ops") else ""
    if entry.get("kernels") is not None:
        return f"{entry['kernels']}{eager}"
    if entry.get("kernels_compiled") is not None:
        return f"{entry['kernels_compiled']} (compiled){eager}"
    return ""


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.2f}" if nbytes < 1e7 else f"{nbytes / 1e6:.0f}"


def _traffic_table(doc: dict) -> list[str]:
    """fuseopt's HBM traffic model per instance next to the workload's floor."""
    rows = [r for r in _sorted(doc["results"]) if "fusion_model" in r]
    if not rows:
        return []
    lines = [
        "## HBM traffic (model)",
        "",
        "The floor is each input and weight read once and each output written once. "
        "Unfused and fused are fuseopt's fusion-report model (`nn-fuse` groups on the "
        "exported graph, `benchmarks/traffic.py`): unfused is one kernel per nn op, as "
        "eager runs them. Model numbers, not measurements.",
        "",
        "| workload | shape | floor MB | unfused MB | fused MB | fused / floor | "
        "kernels unfused -> fused |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        m = r["fusion_model"]
        head = f"| {r['workload']} | {r['shape']} | {_mb(r['min_bytes'])} |"
        if "error" in m:
            lines.append(f"{head} no model: {m['error'][:120]} | | | |")
            continue
        ratio = m["bytes_after"] / r["min_bytes"] if r["min_bytes"] else 0.0
        lines.append(
            f"{head} {_mb(m['bytes_before'])} | {_mb(m['bytes_after'])} | {ratio:.2f}x | "
            f"{m['kernels_before']} -> {m['kernels_after']} |"
        )
    lines.append("")
    return lines


def _notes(doc: dict, names: list[str]) -> list[str]:
    seen: dict[str, list[str]] = {}
    for r in _sorted(doc["results"]):
        for n in names:
            e = r["systems"].get(n, {})
            if e.get("status") in ("FAILED", "n/a", "skipped"):
                reason = e.get("reason", e["status"])
                seen.setdefault(f"{n}: {reason}", []).append(f"{r['workload']} {r['shape']}")
    if not seen:
        return []
    lines = ["## Not timed", ""]
    for reason, where in seen.items():
        shown = ", ".join(where[:6]) + (", ..." if len(where) > 6 else "")
        lines.append(f"- {reason} ({len(where)}: {shown})")
    lines.append("")
    return lines


def render_markdown(doc: dict) -> str:
    """The human-readable report: header, summary, time table, details, reasons."""
    names = [s["name"] for s in doc["config"]["systems"]]
    lines = _header(doc) + _summary_lines(doc) + _times_table(doc, names)
    if doc.get("chart"):
        lines += [f"![speedup over eager per workload]({doc['chart']})", ""]
    lines += _traffic_table(doc) + _details_table(doc, names) + _notes(doc, names)
    return "\n".join(lines)


def write_markdown(doc: dict, out_dir: Path) -> Path:
    """Render and write the Markdown report next to the JSON."""
    path = out_dir / MARKDOWN_NAME
    path.write_text(render_markdown(doc))
    return path


def write_chart(doc: dict, out_dir: Path) -> Path | None:
    """Draw speedup over eager per instance for every non-eager system (log scale).

    Returns None (and draws nothing) when matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    results = _sorted(doc["results"])
    names = [s["name"] for s in doc["config"]["systems"] if s["name"] != EAGER]
    names = [n for n in names if any(_ok(r["systems"].get(n, {})) for r in results)]
    labels = [f"{r['workload']}\n{r['shape']}" for r in results]
    width_in = min(24.0, max(8.0, 0.3 * len(results) * max(1, len(names)) + 2.0))
    fig, ax = plt.subplots(figsize=(width_in, 6.0))
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        xs, ys = [], []
        for j, r in enumerate(results):
            e = r["systems"].get(name, {})
            speed = e.get("speedup", {}).get(EAGER)
            if _ok(e) and speed:
                xs.append(j + (i - (len(names) - 1) / 2) * width)
                ys.append(speed)
        ax.bar(xs, ys, width=width, label=name)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("speedup over eager (x)")
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    title = f"fuseopt benchmarks, {doc['environment']['device_name']}"
    if not doc["timings_meaningful"]:
        title += f" ({NOT_MEANINGFUL})"
    ax.set_title(title)
    if names:
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / CHART_NAME
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_reports(doc: dict, out_dir: Path, chart: bool) -> list[Path]:
    """Summarize `doc`, then write JSON, Markdown and (if asked and possible) the chart."""
    doc["summary"] = summarize(doc)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if chart:
        chart_path = write_chart(doc, out_dir)
        doc["chart"] = chart_path.name if chart_path else None
        if chart_path is None:
            print("note: matplotlib is not installed; no chart drawn", file=sys.stderr)
        else:
            written.append(chart_path)
    written.insert(0, write_json(doc, out_dir))
    written.insert(1, write_markdown(doc, out_dir))
    return written


def main(argv: list[str] | None = None) -> int:
    """Re-render results.md and speedup.png from results.json files (merging several)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.report",
        description="Re-render the Markdown table and the chart from results.json files; "
        "with several, later runs' instances replace earlier ones'.",
    )
    parser.add_argument("json", type=Path, nargs="+", help="results.json files")
    parser.add_argument("--out", type=Path, help="output directory (default: the first's)")
    args = parser.parse_args(argv)
    docs = []
    for path in args.json:
        try:
            docs.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            print(f"error: cannot read {path}: {exc}", file=sys.stderr)
            return 2
    doc = docs[0] if len(docs) == 1 else merge_runs(docs)
    for path in write_reports(doc, args.out or args.json[0].parent, chart=True):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
