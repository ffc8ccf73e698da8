"""Timing and kernel counting.

On a GPU: `triton.testing.do_bench` medians (it flushes L2 before every repetition and
times with CUDA events), kernel counts and kernel-only time from `torch.profiler`, and
a launch-inclusive time (host wall clock over back-to-back calls) for tiny shapes,
where host overhead is what a user feels. On a CPU (``--quick``): a wall-clock median,
which only proves the plumbing works; reports label it as not meaningful.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

CPU_WINDOW_MS = 50.0
"""Wall-clock window of a CPU median: CPU timings only exist in --quick runs (plumbing)."""

MIN_REPETITIONS = 10
"""do_bench's repetition window is widened so that even slow workloads get this many runs."""


def synchronize(device: torch.device) -> None:
    """Wait for all work queued on `device` (no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def single_call_ms(fn: Callable[[], object], device: torch.device) -> float:
    """Wall-clock milliseconds of one synchronized call (a rough estimate for sizing runs)."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return (time.perf_counter() - start) * 1e3


def median_us(fn: Callable[[], object], device: torch.device) -> float:
    """Median time of one call of `fn` in microseconds (do_bench on GPU, wall clock on CPU)."""
    estimate_ms = single_call_ms(fn, device)
    if device.type == "cuda":
        from triton.testing import do_bench

        rep_ms = max(100.0, MIN_REPETITIONS * estimate_ms)
        warmup_ms = max(25.0, 2 * estimate_ms)
        return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")) * 1e3
    repetitions = max(3, min(50, int(CPU_WINDOW_MS / max(estimate_ms, 1e-3))))
    samples = []
    for _ in range(repetitions):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def launch_inclusive_us(fn: Callable[[], object], device: torch.device, calls: int = 200) -> float:
    """Host wall-clock microseconds per call over `calls` back-to-back calls, synchronized once.

    Includes Python, dispatcher and launch overhead: for tiny (decode) shapes this, not
    the kernel time, is what a user waits for.
    """
    fn()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    synchronize(device)
    return (time.perf_counter() - start) * 1e6 / calls


@dataclass(frozen=True)
class KernelProfile:
    """Kernels launched per call and their summed device time per call."""

    kernels: int
    kernel_us: float
    names: tuple[str, ...]
    top: tuple[tuple[str, float, float], ...] = ()
    """(name, device us per call, launches per call) by time, longest first."""


TOP_KERNELS = 12
"""How many of a call's kernels `KernelProfile.top` lists."""


def top_kernels(
    timed: list[tuple[str, float]], calls: int, count: int = TOP_KERNELS
) -> tuple[tuple[str, float, float], ...]:
    """The `count` kernel names with the most device time over `calls` calls, from
    (name, us) per launch: each with its us and launches per call."""
    total: dict[str, float] = {}
    launches: dict[str, int] = {}
    for name, us in timed:
        total[name] = total.get(name, 0.0) + us
        launches[name] = launches.get(name, 0) + 1
    ranked = sorted(total, key=lambda n: -total[n])[:count]
    return tuple((n, total[n] / calls, launches[n] / calls) for n in ranked)


def _is_kernel(name: str) -> bool:
    return not (name.startswith("Memcpy") or name.startswith("Memset"))


def profile_kernels(
    fn: Callable[[], object], device: torch.device, calls: int = 3, top: int = TOP_KERNELS
) -> KernelProfile | None:
    """Count the GPU kernels one call launches (memcpy/memset excluded) with torch.profiler,
    listing the `top` longest by name.

    Returns None on CPU, where there are no kernels to count.
    """
    if device.type != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()
    synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        synchronize(device)
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA and _is_kernel(e.name)]
    total_us = sum(e.time_range.elapsed_us() for e in kernels)
    names = tuple(dict.fromkeys(e.name for e in kernels))
    timed = [(e.name, e.time_range.elapsed_us()) for e in kernels]
    return KernelProfile(
        kernels=round(len(kernels) / calls),
        kernel_us=total_us / calls,
        names=names,
        top=top_kernels(timed, calls, top),
    )
