"""Reports: the JSON record, the Markdown table and the speedup chart of one run.

The JSON file is the source of truth; the Markdown and the PNG are rendered from it,
so `python -m benchmarks.report results.json` re-renders them (for example after a
run on a GPU machine was cut short before drawing its chart).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.records import is_timed as _ok
from benchmarks.records import merge_runs, runs_of, summarize
from benchmarks.systems import BASELINES, EAGER, MAX_AUTOTUNE, TORCH_COMPILE

__all__ = ["merge_runs", "render_markdown", "summarize", "write_reports"]

JSON_NAME = "results.json"
MARKDOWN_NAME = "results.md"
CHART_NAME = "speedup.png"
NOT_MEANINGFUL = "not meaningful (CPU)"


def write_json(doc: dict, out_dir: Path) -> Path:
    """Write the run record (atomically: a cut-short run never leaves half a file)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / JSON_NAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)
    return path


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
        eager = "\u2020" if entry.get("fallback_ops") else ""
        return _fmt(entry["time_us"]) + ("*" if host_bound(entry) else "") + eager
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
    title = doc.get("title", "fuseopt benchmarks")
    lines = [f"# {title}: {doc['environment']['device_name']}", ""]
    if not doc["timings_meaningful"]:
        lines += [
            f"> Timings are **{NOT_MEANINGFUL}**: this run only exercises the harness "
            "(tiny shapes, CPU). Numbers that mean something come from a GPU run.",
            "",
        ]
    if not doc.get("complete", True):
        lines += ["> A run did not finish; the tables hold what it measured.", ""]
    if doc.get("pending"):
        lines += [
            f"> {doc['pending']} (instance, system) pair(s) were skipped for time (budget or "
            "per-system limit): rerunning with `--resume results.json` measures them.",
            "",
        ]
    runs = runs_of(doc)
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


def _worst_text(worst: dict | None) -> str:
    return f"{worst['speedup']:.2f}x ({worst['instance']})" if worst else ""


def _summary_table(doc: dict, key: str) -> list[str]:
    lines = [
        "| system | ok / FAILED / n/a / skipped | vs eager | vs torch.compile | "
        "vs max-autotune | worst vs torch.compile | worst vs max-autotune | "
        "median % roofline |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in doc["summary"].items():
        c = s["counts"]
        counts = f"{c.get('ok', 0)} / {c.get('FAILED', 0)} / {c.get('n/a', 0)} / "
        counts += f"{c.get('skipped', 0)}"
        geo = s.get(f"{key}geomean_speedup", {})
        worst_tc = _worst_text(s.get(f"{key}worst_vs_torch_compile"))
        worst_ma = _worst_text(s.get(f"{key}worst_vs_max_autotune"))
        speedups = " | ".join(f"{geo[b]:.2f}x" if geo.get(b) else "" for b in BASELINES)
        pct = _fmt(s.get(f"{key}median_pct_roofline_memory_bound"))
        lines.append(f"| {name} | {counts} | {speedups} | {worst_tc} | {worst_ma} | {pct} |")
    lines.append("")
    return lines


def _has_kernel_summary(doc: dict) -> bool:
    return any(s.get("kernel_geomean_speedup", {}).get(EAGER) for s in doc["summary"].values())


def _summary_lines(doc: dict) -> list[str]:
    lines = ["## Summary", ""]
    lines.append(
        "By wall time (the do_bench median of a whole call, what a user waits for): "
        "geometric-mean speedup over each baseline (instances where both ran correctly), "
        "the worst instance against torch.compile and against max-autotune, and the "
        "median % of roofline over memory-bound instances."
    )
    lines.append("")
    lines += _summary_table(doc, "")
    if _has_kernel_summary(doc):
        lines += [
            "By kernel time (torch.profiler, without host overhead): a diagnostic, "
            "tabulated in the details below.",
            "",
        ]
    if not any(name.startswith("fuseopt") for name in doc["summary"]):
        lines += ["No fuseopt system was compared in this run (`--backend none`).", ""]
    return lines


def _kernel_summary_lines(doc: dict) -> list[str]:
    """The summary table again by kernel time (a diagnostic: host overhead left out)."""
    if not doc.get("summary") or not _has_kernel_summary(doc):
        return []
    return [
        "### Summary by kernel time",
        "",
        "The same summary over torch.profiler's device time of one call's kernels, without "
        "host overhead (the medians of short kernels are host-bound and noisy, see `*`).",
        "",
        *_summary_table(doc, "kernel_"),
    ]


def _times_table(doc: dict, names: list[str]) -> list[str]:
    unit = f"us, median, {NOT_MEANINGFUL}" if not doc["timings_meaningful"] else "us, median"
    multi = len(runs_of(doc)) > 1
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
    if any(_ok(e) and e.get("fallback_ops") for r in doc["results"] for e in r["systems"].values()):
        lines += [
            "\u2020 some ops ran in eager PyTorch inside this system's time (fuseopt's "
            "fallbacks: see Ops run eagerly).",
            "",
        ]
    return lines


def _details_table(doc: dict, names: list[str]) -> list[str]:
    lines = ["## Details", "", *_kernel_summary_lines(doc)]
    lines.append(
        "Speedups are the baseline's time over this system's. Kernels and kernel time "
        "come from torch.profiler (per call); host us is the median minus the kernel "
        "time (Python, guards, launches); launch time is host wall clock per call over "
        "back-to-back calls (tiny shapes only). `again us` is a second do_bench median of "
        "the same callable right after the first: their gap is the row's noise. "
        "HBM bytes: the compiler's fusion-report model (fuseopt only); the workload's "
        "floor is in the JSON (`min_bytes`). "
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
        "again us",
        "% roofline",
        "x eager",
        "x compile",
        "x max-autotune",
        "kernels",
        "kernel us",
        "host us",
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
                _fmt(e.get("time_us_repeat")),
                _fmt(e.get("pct_roofline")),
                _fmt(sp.get(EAGER), 2),
                _fmt(sp.get(BASELINES[1]), 2),
                _fmt(sp.get(MAX_AUTOTUNE), 2),
                _kernels(e),
                _fmt(e.get("kernel_us")),
                _fmt(e.get("host_us")),
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


def _size(nbytes: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


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
        "| workload | shape | floor | unfused | fused | fused / floor | kernels unfused -> fused |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        m = r["fusion_model"]
        head = f"| {r['workload']} | {r['shape']} | {_size(r['min_bytes'])} |"
        if "error" in m:
            reason = m["error"].split("error: ", 1)[-1][:120]  # drop the local file path
            lines.append(f"{head} no model: {reason} | | | |")
            continue
        ratio = m["bytes_after"] / r["min_bytes"] if r["min_bytes"] else 0.0
        lines.append(
            f"{head} {_size(m['bytes_before'])} | {_size(m['bytes_after'])} | {ratio:.2f}x | "
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


def _fallbacks(doc: dict, names: list[str]) -> list[str]:
    """The ops each fuseopt system left to eager PyTorch, per instance (never silent)."""
    lines = []
    for r in _sorted(doc["results"]):
        for n in names:
            e = r["systems"].get(n, {})
            if e.get("fallback_reasons"):
                reasons = "; ".join(e["fallback_reasons"])
                lines.append(f"- {r['workload']} {r['shape']}, {n}: {reasons}")
    if not lines:
        return []
    return ["## Ops run eagerly", "", "fuseopt's eager fallbacks (op: reason):", "", *lines, ""]


def render_markdown(doc: dict) -> str:
    """The human-readable report: header, summary, time table, details, reasons."""
    names = [s["name"] for s in doc["config"]["systems"]]
    lines = _header(doc) + _summary_lines(doc) + _times_table(doc, names)
    if doc.get("chart"):
        lines += [f"![wall-time speedup per instance]({doc['chart']})", ""]
    lines += _traffic_table(doc) + _details_table(doc, names) + _notes(doc, names)
    lines += _fallbacks(doc, names)
    return "\n".join(lines)


def write_markdown(doc: dict, out_dir: Path) -> Path:
    """Render and write the Markdown report next to the JSON."""
    path = out_dir / MARKDOWN_NAME
    path.write_text(render_markdown(doc))
    return path


def chart_baseline(doc: dict) -> str:
    """The system the chart divides by: torch.compile where any instance timed it (the
    summary's reference), else eager (CPU runs, where torch.compile is skipped)."""
    timed = any(_ok(r["systems"].get(TORCH_COMPILE, {})) for r in doc["results"])
    return TORCH_COMPILE if timed else EAGER


def write_chart(doc: dict, out_dir: Path) -> Path | None:
    """Draw the wall-time speedup over `chart_baseline` per instance for every other
    system (log scale).

    Returns None (and draws nothing) when matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    results = _sorted(doc["results"])
    base = chart_baseline(doc)
    names = [s["name"] for s in doc["config"]["systems"] if s["name"] != base]
    names = [n for n in names if any(_ok(r["systems"].get(n, {})) for r in results)]
    labels = [f"{r['workload']}\n{r['shape']}" for r in results]
    width_in = min(24.0, max(8.0, 0.3 * len(results) * max(1, len(names)) + 2.0))
    fig, ax = plt.subplots(figsize=(width_in, 6.0))
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        xs, ys = [], []
        for j, r in enumerate(results):
            e = r["systems"].get(name, {})
            speed = e.get("speedup", {}).get(base)
            if _ok(e) and speed:
                xs.append(j + (i - (len(names) - 1) / 2) * width)
                ys.append(speed)
        ax.bar(xs, ys, width=width, label=name)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylabel(f"wall-time speedup over {base} (x)")
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    title = f"{doc.get('title', 'fuseopt benchmarks')}, {doc['environment']['device_name']}"
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
    try:
        doc = docs[0] if len(docs) == 1 else merge_runs(docs)
    except (KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in write_reports(doc, args.out or args.json[0].parent, chart=True):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
