"""Shared by the Triton backend tests (CPU and GPU): run a workload of the workload suite through
`fuseopt.compile(backend="triton")` and judge it against a float64 reference with the
benchmark's own correctness gate (`benchmarks.accuracy`: at most twice eager's error,
never below a per-dtype floor). No tests here."""

from __future__ import annotations

from dataclasses import dataclass

import torch

import fuseopt
from benchmarks.accuracy import Reference, judge, tolerance_from_eager
from benchmarks.workloads import Dims, Workload, all_workloads


def workload(name: str) -> Workload:
    """The workload family called `name`."""
    return {w.name: w for w in all_workloads()}[name]


@dataclass
class Checked:
    """One compiled workload and how it did."""

    compiled: fuseopt.api.CompiledModule
    outputs: tuple[torch.Tensor, ...]
    ok: bool
    message: str


def check_workload(
    name: str,
    dims: Dims,
    dtype: torch.dtype,
    device: torch.device,
    mode: str | None = None,
    calls: int = 1,
    **options: object,
) -> Checked:
    """Compile workload `name` at `dims`, run it `calls` times on fresh inputs each time,
    and judge the last outputs against float64 (eager's error sets the bound)."""
    w = workload(name)
    model = w.make_model(dims, dtype, device, 0)
    with torch.no_grad():
        compiled = fuseopt.compile(
            model, w.make_inputs(dims, dtype, device, 1), backend="triton", mode=mode, **options
        )
        for call in range(calls):
            inputs = w.make_inputs(dims, dtype, device, 2 + call)
            outputs = compiled(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        reference = Reference(w, model, inputs)
        eager = reference.error_of(model(*inputs), tuple(o.dtype for o in outputs))
        ours = reference.error_of(outputs, tuple(o.dtype for o in outputs))
    verdict = judge(ours, tolerance_from_eager(eager, dtype))
    return Checked(compiled, outputs, verdict.ok, verdict.message)
