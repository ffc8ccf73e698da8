"""The harness: for each workload instance, check every system, then time the correct ones.

Per instance (one workload at one shape):

1. build the eager module (random non-trivial weights) and draw fresh check inputs;
2. compute the float64 reference, and eager's own error against it, which sets the
   tolerance (`benchmarks.accuracy`); if eager disagrees with float64 beyond a sanity
   bound the reference is suspect and nothing is timed;
3. for each system: skip it if it is unavailable here (``n/a``) or the time budget is
   spent (``skipped``); otherwise compile it on other example inputs (cold compile
   time), poison the allocator with NaN so unwritten outputs show, run it on the check
   inputs and judge the result. A wrong result is recorded as ``FAILED`` with its error
   and is never timed; a system running past ``--system-timeout-s`` is stopped and
   recorded as ``skipped``;
4. time correct systems (median), count their kernels (torch.profiler on a GPU; the
   compiler's own kernel records too, for fuseopt), and for tiny shapes measure
   launch-inclusive time; then the warm compile time;
5. derive % of roofline, host overhead (median minus kernel time) and the speedups
   over each baseline; when fuseopt systems are compared, attach fuseopt's HBM traffic
   model (`benchmarks.traffic`).

The reference runs in the workload's `reference_dtype` (float64; float32 for whole
models). A training workload (`Workload.training`) keeps its parameters trainable: its
module runs a whole training step, with gradients, inside the harness's no_grad.
"""

from __future__ import annotations

import contextlib
import gc
import math
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from benchmarks.accuracy import (
    OutputMismatch,
    Reference,
    as_tuple,
    eager_is_sane,
    judge,
    tolerance_from_eager,
)
from benchmarks.machine import Ceilings
from benchmarks.systems import BASELINES, EAGER, System, SystemUnavailable
from benchmarks.timing import launch_inclusive_us, median_us, profile_kernels
from benchmarks.traffic import fusion_traffic
from benchmarks.workloads import Shape, Workload

Log = Callable[[str], None]


@dataclass
class RunConfig:
    """How one run is made: device, dtype, quick mode, seeds and the time budget."""

    device: torch.device
    dtype: torch.dtype
    quick: bool
    seed: int = 0
    budget_s: float | None = None
    autotune_budget_s: float | None = None
    system_timeout_s: float | None = None
    warm_compile: bool = True
    started: float = field(default_factory=time.perf_counter)

    def elapsed_s(self) -> float:
        """Seconds since the run started."""
        return time.perf_counter() - self.started

    def over_budget(self, autotuning: bool = False) -> bool:
        """Whether the time budget (if any) is spent; autotuning systems have their own."""
        budget = self.budget_s
        if autotuning and self.autotune_budget_s is not None:
            budget = min(self.autotune_budget_s, budget or self.autotune_budget_s)
        return budget is not None and self.elapsed_s() > budget


class SystemTimeout(BaseException):
    """One system ran past `RunConfig.system_timeout_s` (a BaseException, so that library
    code catching Exception cannot swallow it)."""


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Raise `SystemTimeout` in the block after `seconds` of wall clock (SIGALRM; Unix
    main thread only, elsewhere no limit). A running GPU kernel finishes first: the
    signal lands at the next Python bytecode."""
    usable = (
        seconds is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise SystemTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _error_dict(stats: Any) -> dict[str, float | int]:
    return {"rel_l2": stats.rel_l2, "max_rel": stats.max_rel, "nonfinite": stats.nonfinite}


def _short(exc: BaseException) -> str:
    """The first line of an error; Dynamo's BackendCompilerFailed shows the backend's
    own error (its first line only names the backend)."""
    inner = getattr(exc, "inner_exception", None)
    prefix = ""
    if isinstance(inner, BaseException):
        prefix, exc = f"{type(exc).__name__}: ", inner
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return (prefix + (text[0] if text else type(exc).__name__))[:300]


def _free(device: torch.device) -> None:
    """Return freed GPU memory between systems (a no-op on CPU, where gc costs ~0.3 s)."""
    if device.type == "cuda":
        gc.collect()
        torch.cuda.empty_cache()


OutputMeta = tuple[tuple[torch.Size, torch.dtype], ...]


def _poison_allocator(expected: OutputMeta, device: torch.device) -> None:
    """Fill freshly freed blocks of the output sizes with NaN, so an unwritten output shows."""
    poison = [
        torch.full(shape, float("nan"), dtype=dtype, device=device)
        for shape, dtype in expected
        if dtype.is_floating_point
    ]
    del poison


def roofline(workload: Workload, shape: Shape, dtype: torch.dtype, ceilings: Ceilings) -> dict:
    """The instance's cost floor: bytes and FLOPs, each over its measured ceiling."""
    min_bytes = workload.min_bytes(shape.dims, dtype)
    flops = workload.flops(shape.dims)
    memory_us = min_bytes / ceilings.copy_bytes_per_s * 1e6
    compute_us = flops / ceilings.matmul_flops_per_s * 1e6
    return {
        "min_bytes": min_bytes,
        "flops": flops,
        "roofline_us": max(memory_us, compute_us),
        "bound": "compute" if compute_us > memory_us else "memory",
    }


def _time_system(
    entry: dict, fn: Callable[..., Any], inputs: tuple, shape: Shape, config: RunConfig
) -> None:
    call = lambda: fn(*inputs)  # noqa: E731
    entry["time_us"] = median_us(call, config.device)
    # the same measurement again: the gap between the two is the noise floor of this row
    entry["time_us_repeat"] = median_us(call, config.device)
    try:
        kernel_profile = profile_kernels(call, config.device)
        if shape.tiny and config.device.type == "cuda":  # on a CPU it says nothing
            entry["launch_us"] = launch_inclusive_us(call, config.device)
    except Exception as exc:  # counting is informational: record why, keep the timing
        entry["profile_error"] = _short(exc)
        return
    if kernel_profile is not None:
        entry["kernels"] = kernel_profile.kernels
        entry["kernel_us"] = kernel_profile.kernel_us
        entry["host_us"] = max(0.0, entry["time_us"] - kernel_profile.kernel_us)
        entry["kernel_names"] = list(kernel_profile.names[:12])
        # where the kernel time goes: [name, us per call, launches per call]
        entry["top_kernels"] = [
            [name[:160], round(us, 2), round(n, 2)] for name, us, n in kernel_profile.top
        ]


def run_system(
    system: System,
    model: torch.nn.Module,
    workload: Workload,
    shape: Shape,
    check_inputs: tuple[torch.Tensor, ...],
    reference: Reference,
    expected: OutputMeta,
    tolerance: Any,
    config: RunConfig,
) -> dict:
    """Check, then time, one system on one instance; returns its result entry."""
    unavailable = system.availability(config.device, config.quick)
    if unavailable is not None:
        status = "n/a" if unavailable.startswith("n/a") else "skipped"
        return {"status": status, "reason": unavailable}
    if system.name != EAGER and config.over_budget(system.autotunes):
        budget = config.autotune_budget_s if system.autotunes else config.budget_s
        kind = "autotuning " if system.autotunes else ""
        reason = f"skipped ({kind}time budget of {budget:g} s spent)"
        return {"status": "skipped", "reason": reason}

    def make_example() -> tuple[torch.Tensor, ...]:
        return workload.make_inputs(shape.dims, config.dtype, config.device, config.seed)

    entry: dict[str, Any] = {"status": "FAILED"}
    try:
        with deadline(config.system_timeout_s if system.name != EAGER else None):
            _check_and_time(
                entry,
                system,
                model,
                make_example,
                check_inputs,
                reference,
                expected,
                tolerance,
                shape,
                config,
            )
    except SystemTimeout:
        limit = f"stopped after the per-system limit of {config.system_timeout_s:g} s"
        if entry["status"] == "ok":  # only the warm compile was cut
            entry["compile_warm_note"] = limit
        else:
            entry.update(status="skipped", reason=f"skipped ({limit}; not timed)")
    except SystemUnavailable as exc:
        return {"status": "n/a", "reason": f"n/a ({exc})"}
    except OutputMismatch as exc:
        entry["reason"] = f"FAILED (wrong output: {exc}); not timed"
    except torch.OutOfMemoryError as exc:
        entry["reason"] = f"FAILED (out of memory: {_short(exc)})"
    except Exception as exc:  # a broken system must not stop the suite; record why
        entry["reason"] = f"FAILED ({_short(exc)})"
        entry["traceback"] = traceback.format_exc(limit=6)[-2000:]
    return entry


def _check_and_time(
    entry: dict,
    system: System,
    model: torch.nn.Module,
    make_example: Callable[[], tuple[torch.Tensor, ...]],
    check_inputs: tuple[torch.Tensor, ...],
    reference: Reference,
    expected: OutputMeta,
    tolerance: Any,
    shape: Shape,
    config: RunConfig,
) -> None:
    """Compile, check against the reference and (only if correct) time; fills `entry`."""
    prepared = system.prepare(model, make_example)
    entry.update(
        compile_cold_s=prepared.compile_cold_s,
        kernels_compiled=prepared.kernels,
        hbm_bytes_model=prepared.hbm_bytes_model,
    )
    if prepared.fallback_ops:
        entry["fallback_ops"] = prepared.fallback_ops
    if prepared.fallback_reasons:
        entry["fallback_reasons"] = prepared.fallback_reasons
    if prepared.kernels == 0 and prepared.fallback_ops:
        # every op ran in eager PyTorch: timing it would time eager under this name
        reasons = "; ".join(prepared.fallback_reasons or [])
        entry["reason"] = f"FAILED (compiled no kernel, every op ran eagerly: {reasons})"[:300]
        return
    _poison_allocator(expected, config.device)
    stats = reference.error_of(prepared.fn(*check_inputs), tuple(d for _, d in expected))
    verdict = judge(stats, tolerance)
    entry["error"] = _error_dict(stats)
    entry["check"] = verdict.message
    if not verdict.ok:
        entry["reason"] = f"FAILED ({verdict.message}); not timed"
        return
    _time_system(entry, prepared.fn, check_inputs, shape, config)
    entry["status"] = "ok"
    del prepared
    if config.warm_compile and not config.over_budget(system.autotunes):
        entry["compile_warm_s"] = system.warm_compile_s(model, make_example)


def _derive(result: dict) -> None:
    """Add % of roofline, achieved rates and speedups over each baseline to every system."""
    systems = result["systems"]
    for entry in systems.values():
        t = entry.get("time_us")
        if entry.get("status") != "ok" or not t:
            continue
        entry["pct_roofline"] = 100.0 * result["roofline_us"] / t
        entry["achieved_GBps"] = result["min_bytes"] / (t * 1e-6) / 1e9
        if result["flops"]:
            entry["achieved_TFLOPs"] = result["flops"] / (t * 1e-6) / 1e12
        entry["speedup"] = {
            base: systems[base]["time_us"] / t
            for base in BASELINES
            if base in systems and systems[base].get("status") == "ok"
        }


def run_instance(
    workload: Workload,
    shape: Shape,
    systems: list[System],
    ceilings: Ceilings,
    config: RunConfig,
    log: Log = print,
    carried: dict[str, dict] | None = None,
    traffic_model: bool = True,
) -> dict:
    """Run every system on one workload instance; returns the instance's result record.

    `carried` holds system entries an earlier run measured (`benchmarks.suite`'s resume):
    those systems are not run again. `traffic_model=False` skips fuseopt's HBM model (an
    export of the whole program: slow and uninformative for whole models).
    """
    carried = carried or {}
    dims, dtype, device = shape.dims, config.dtype, config.device
    result: dict[str, Any] = {
        "workload": workload.name,
        "shape": shape.label,
        "dims": dict(dims),
        "computation": workload.computation,
        "dtype": str(dtype).removeprefix("torch."),
        "tiny": shape.tiny,
        **roofline(workload, shape, dtype, ceilings),
        "systems": {},
    }
    with torch.no_grad():
        model = workload.make_model(dims, dtype, device, config.seed + 7)
        if not workload.training:
            model.eval().requires_grad_(False)
        check_inputs = workload.make_inputs(dims, dtype, device, config.seed + 1)
        reference = Reference(workload, model, check_inputs)
        eager_out = as_tuple(model(*check_inputs))
        eager_stats = reference.error_of(eager_out, tuple(t.dtype for t in eager_out))
        expected = tuple((t.shape, t.dtype) for t in eager_out)
        del eager_out
        tolerance = tolerance_from_eager(eager_stats, dtype)
        result["eager_error"] = _error_dict(eager_stats)
        result["tolerance"] = {"rel_l2": tolerance.rel_l2, "max_rel": tolerance.max_rel}
        result["reference_dtype"] = str(workload.reference_dtype).removeprefix("torch.")
        if traffic_model and any(s.reports_traffic for s in systems):
            result["fusion_model"] = fusion_traffic(model, check_inputs)
        if not eager_is_sane(eager_stats, dtype, workload.sanity_rel_l2):
            reason = (
                f"FAILED (eager disagrees with the {result['reference_dtype']} reference: "
                f"rel_l2 {eager_stats.rel_l2:.2e}; reference suspect, nothing timed)"
            )
            for system in systems:
                result["systems"][system.name] = {"status": "FAILED", "reason": reason}
            return result
        for system in systems:
            if system.name in carried:
                result["systems"][system.name] = carried[system.name]
                continue
            entry = run_system(
                system,
                model,
                workload,
                shape,
                check_inputs,
                reference,
                expected,
                tolerance,
                config,
            )
            result["systems"][system.name] = entry
            log(_progress_line(config, workload, shape, system.name, entry))
            _free(device)
        del reference, check_inputs, model
    torch._dynamo.reset()
    _free(device)
    _derive(result)
    _attach_traffic(result, systems)
    return result


def _attach_traffic(result: dict, systems: list[System]) -> None:
    """Give each timed fuseopt system the instance's HBM traffic model (if it has none)."""
    after = result.get("fusion_model", {}).get("bytes_after")
    if after is None:
        return
    for system in systems:
        entry = result["systems"].get(system.name, {})
        if system.reports_traffic and entry.get("status") == "ok":
            if entry.get("hbm_bytes_model") is None:
                entry["hbm_bytes_model"] = after


def _progress_line(
    config: RunConfig, workload: Workload, shape: Shape, system: str, entry: dict
) -> str:
    head = f"[{config.elapsed_s():7.1f}s] {workload.name:<18} {shape.label:<14} {system:<26}"
    if entry["status"] == "ok":
        t = entry["time_us"]
        cold = entry.get("compile_cold_s")
        compile_text = f"  compile {cold:.1f}s" if cold is not None else ""
        return f"{head} ok {t:10.1f} us{compile_text}"
    return f"{head} {entry.get('reason', entry['status'])}"


def geometric_mean(values: list[float]) -> float | None:
    """The geometric mean of positive values (None when empty)."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))
