"""The HBM traffic model of an instance, from fuseopt's fusion report.

fuseopt's compiler decides kernels in `nn-fuse`; `fuseopt.passes.nn_fuse.report.build_report`
models, per function, the HBM bytes and kernels before fusion (one kernel per nn op,
as eager runs them) and after it (one kernel per fusion group). This module exports a
workload's model with `fuseopt.export`, runs the named ``fuse`` pipeline (the same
passes every fuseopt backend runs before tiling) and sums the report, so each
instance gets the compiler's own traffic prediction next to the workload's floor
(`Workload.min_bytes`) whether or not a GPU backend exists yet.

It is a model, not a measurement: the numbers say what fuseopt's groups must move,
given its cost model; the timings say what the kernels achieved.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from typing import Any

import torch


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def fusion_traffic(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> dict[str, Any]:
    """The fusion report's totals for `model` on `inputs`.

    Returns ``{"bytes_before", "bytes_after", "kernels_before", "kernels_after",
    "groups"}`` (integers; summed over the exported function), or ``{"error": reason}``
    when fuseopt cannot export or fuse the model (an op without an nn lowering, for
    example): the model is informational and never fails a benchmark.
    """
    try:
        import fuseopt
        from fuseopt.passes.nn_fuse.report import build_report
        from fuseopt.pipelines import PIPELINES, run_pipeline
    except ImportError as exc:
        return {"error": f"fuseopt is not importable here ({exc})"}
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            module = fuseopt.parse(fuseopt.export(model, inputs))
            run_pipeline(module, PIPELINES["fuse"])
            reports = build_report(module)
    except Exception as exc:  # informational: record why there is no model
        return {"error": _short(exc)}
    rows = [row for report in reports for row in report.rows]
    return {
        "bytes_before": int(sum(r.bytes_before for r in rows)),
        "bytes_after": int(sum(r.bytes_after for r in rows)),
        "kernels_before": int(sum(r.kernels_before for r in rows)),
        "kernels_after": int(sum(r.kernels_after for r in rows)),
        "groups": sum(1 for r in rows if r.fused),
    }
