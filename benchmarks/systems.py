"""The systems compared: eager PyTorch, torch.compile (two modes), fuseopt per backend.

A `System` turns an eager module into a callable (`prepare`), reporting the cold
compile time (compile plus first call), and can measure the warm compile time (a fresh
compile of the same model, served from the on-disk caches). `availability` says
before any work whether the system can run here at all; a system that cannot is
recorded as ``n/a`` with the reason, never as a crash.

fuseopt is imported lazily, only when a fuseopt system is asked about, so the suite
runs where fuseopt's dependencies (xDSL) are not installed: the fuseopt columns then
read ``n/a``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from benchmarks.timing import synchronize

InputFactory = Callable[[], tuple[torch.Tensor, ...]]

FUSEOPT_AUTOTUNE_MODE = "max-autotune"
"""The `mode` fuseopt.compile is given for the autotuned fuseopt systems."""
REDUCE_OVERHEAD = "reduce-overhead"
"""The CUDA-graph mode of torch.compile and fuseopt (for launch-bound work: decode)."""
MODE_SUFFIXES = {None: "", FUSEOPT_AUTOTUNE_MODE: "-autotune", REDUCE_OVERHEAD: "-reduce-overhead"}
"""How a fuseopt mode shows in a system's name (``fuseopt-triton-autotune``)."""
AUTOTUNING_BACKENDS = ("triton", "cuda")
"""The fuseopt backends that tune under FUSEOPT_AUTOTUNE_MODE (both GPU backends; the
interpreter has nothing to time)."""

EAGER = "eager"
TORCH_COMPILE = "torch.compile"
MAX_AUTOTUNE = "max-autotune"
BASELINES = (EAGER, TORCH_COMPILE, MAX_AUTOTUNE)
"""The names of the baseline systems every fuseopt number is compared against."""


class SystemUnavailable(Exception):
    """The system cannot run here (not built yet, dependency missing): recorded as n/a."""


@dataclass
class Prepared:
    """A system's compiled callable and what compiling it cost and produced.

    `kernels` and `hbm_bytes_model` come from the compiler itself where it reports them
    (fuseopt's kernel records and fusion report); None otherwise.
    """

    fn: Callable[..., Any]
    compile_cold_s: float | None
    kernels: int | None = None
    hbm_bytes_model: int | None = None
    fallback_ops: int | None = None
    fallback_reasons: list[str] | None = None


class System:
    """Base class: a named way of running a PyTorch module."""

    name: str = "system"
    description: str = ""
    autotunes: bool = False
    """Autotuning systems compile for much longer; ``--autotune-budget-s`` limits them."""
    reports_traffic: bool = False
    """Whether the instance's fuseopt HBM traffic model (`benchmarks.traffic`) applies."""
    launch_bound_only: bool = False
    """A CUDA-graph mode: compared only where launches dominate (the model suite's decode)."""

    def availability(self, device: torch.device, quick: bool) -> str | None:
        """None if the system can run on `device`; otherwise the n/a or skip reason."""
        return None

    def prepare(self, model: torch.nn.Module, make_inputs: InputFactory) -> Prepared:
        """Compile `model` for the inputs `make_inputs` draws and run it once."""
        raise NotImplementedError

    def warm_compile_s(self, model: torch.nn.Module, make_inputs: InputFactory) -> float | None:
        """Seconds for a fresh compile and first call once the caches are warm (None: n/a)."""
        return None


def _timed_first_call(
    build: Callable[[tuple[torch.Tensor, ...]], Callable[..., Any]], make_inputs: InputFactory
) -> tuple[Callable[..., Any], float]:
    """Build the callable for freshly drawn example inputs and call it once, timed."""
    inputs = make_inputs()
    device = inputs[0].device
    synchronize(device)
    start = time.perf_counter()
    fn = build(inputs)
    fn(*inputs)
    synchronize(device)
    return fn, time.perf_counter() - start


class Eager(System):
    """PyTorch eager: the module as written."""

    name = EAGER
    description = "PyTorch eager"

    def prepare(self, model: torch.nn.Module, make_inputs: InputFactory) -> Prepared:
        """Eager needs no compilation."""
        return Prepared(fn=model, compile_cold_s=None)


class TorchCompile(System):
    """`torch.compile` with static shapes in one mode (None is the default mode)."""

    def __init__(self, name: str, mode: str | None, description: str, cpu_compile: bool):
        self.name = name
        self.mode = mode
        self.description = description
        self.cpu_compile = cpu_compile
        self.autotunes = mode is not None and "autotune" in mode
        self.launch_bound_only = mode == REDUCE_OVERHEAD

    def availability(self, device: torch.device, quick: bool) -> str | None:
        """Skipped on CPU unless asked for: Inductor's C++ compile takes ~25 s cold there.
        CUDA graphs (reduce-overhead) need a GPU."""
        if self.launch_bound_only and device.type != "cuda":
            return "n/a (CUDA graphs need a GPU)"
        if device.type == "cpu" and not self.cpu_compile:
            return (
                "skipped (on CPU Inductor's C++ compile takes tens of seconds; "
                "pass --cpu-compile to include it)"
            )
        return None

    def _build(
        self, model: torch.nn.Module
    ) -> Callable[[tuple[torch.Tensor, ...]], Callable[..., Any]]:
        def build(inputs: tuple[torch.Tensor, ...]) -> Callable[..., Any]:
            torch._dynamo.reset()
            return torch.compile(model, mode=self.mode, dynamic=False)

        return build

    def prepare(self, model: torch.nn.Module, make_inputs: InputFactory) -> Prepared:
        """Reset Dynamo, compile, run once; the time is the cold compile time."""
        fn, seconds = _timed_first_call(self._build(model), make_inputs)
        return Prepared(fn=fn, compile_cold_s=seconds)

    def warm_compile_s(self, model: torch.nn.Module, make_inputs: InputFactory) -> float | None:
        """Recompile after a Dynamo reset: Inductor's FX-graph and autotuning caches are hot."""
        _, seconds = _timed_first_call(self._build(model), make_inputs)
        torch._dynamo.reset()
        return seconds


_UNAVAILABLE = re.compile(r"not (yet )?available|unknown backend|no (such )?backend", re.I)


def _first_line(exc: BaseException) -> str:
    lines = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:200]


def _report_bytes(compiled: Any) -> int | None:
    """HBM bytes after fusion, from the fusion report of the compiled regions.

    Each region's nn module after nn-fuse (the backend's `fused_module`, else the
    frontend's own FUSE run, as `compiled.fusion_report()` tabulates it) goes through
    `fuseopt.passes.nn_fuse.report.build_report`; ops left to eager PyTorch are not counted.
    None when the compiled object has no regions or the report fails.
    """
    regions = getattr(compiled, "regions", None)
    if not regions:
        return None
    try:
        from fuseopt.api import fused_module
        from fuseopt.passes.nn_fuse.report import build_report

        rows = [
            r for region in regions for rep in build_report(fused_module(region)) for r in rep.rows
        ]
    except Exception:  # the report is informational; never fail a benchmark over it
        return None
    return int(sum(r.bytes_after for r in rows))


class Fuseopt(System):
    """`fuseopt.compile(model, inputs, backend=..., mode=...)`."""

    reports_traffic = True

    def __init__(self, backend: str, mode: str | None):
        self.backend = backend
        self.mode = mode
        self.autotunes = mode == FUSEOPT_AUTOTUNE_MODE
        self.launch_bound_only = mode == REDUCE_OVERHEAD
        self.name = f"fuseopt-{backend}{MODE_SUFFIXES[mode]}"
        self.description = f"fuseopt.compile(backend={backend!r}, mode={mode!r})"

    def _compile_fn(self) -> Callable[..., Any]:
        try:
            import fuseopt
        except ImportError as exc:
            raise SystemUnavailable(f"fuseopt is not importable here ({exc})") from exc
        compile_fn = getattr(fuseopt, "compile", None)
        if compile_fn is None:
            raise SystemUnavailable("fuseopt.compile does not exist yet")
        return compile_fn

    def availability(self, device: torch.device, quick: bool) -> str | None:
        """n/a when fuseopt, its compile API or this backend is not available here.

        Backends are detected with `fuseopt.api.available_backends()` (a backend exists
        once its package defines ``make_backend``), so a backend that lands later is
        timed by the same harness with no change here. CUDA graphs (reduce-overhead)
        need a GPU.
        """
        if self.launch_bound_only and device.type != "cuda":
            return "n/a (CUDA graphs need a GPU)"
        try:
            self._compile_fn()
        except SystemUnavailable as exc:
            return f"n/a ({exc})"
        try:
            from fuseopt.api import available_backends, resolve_backend
        except ImportError:  # an older API without the registry: let compile decide
            return None
        try:
            available = available_backends()
            if self.backend not in available:
                return (
                    f"n/a (backend not available: fuseopt has {', '.join(available) or 'none'}"
                    f"; {self.backend!r} has no runtime yet)"
                )
            resolve_backend(self.backend)  # its make_backend() may still fail to import
        except Exception as exc:
            return f"n/a (backend not available: {_first_line(exc)})"
        return None

    def prepare(self, model: torch.nn.Module, make_inputs: InputFactory) -> Prepared:
        """Compile with fuseopt and run once; a "backend not available" error becomes n/a."""
        compile_fn = self._compile_fn()

        def build(inputs: tuple[torch.Tensor, ...]) -> Callable[..., Any]:
            return self._compile(compile_fn, model, inputs)

        try:
            fn, seconds = _timed_first_call(build, make_inputs)
        except Exception as exc:
            if _UNAVAILABLE.search(str(exc)) or "Unavailable" in type(exc).__name__:
                raise SystemUnavailable(f"backend not available: {_first_line(exc)}") from exc
            raise
        kernels = getattr(fn, "kernels", None)
        fallbacks = getattr(fn, "fallbacks", None)
        return Prepared(
            fn=fn,
            compile_cold_s=seconds,
            kernels=len(kernels) if kernels is not None else None,
            hbm_bytes_model=_report_bytes(fn),
            fallback_ops=len(fallbacks) if fallbacks is not None else None,
            fallback_reasons=fallback_reasons(fallbacks) if fallbacks else None,
        )

    def warm_compile_s(self, model: torch.nn.Module, make_inputs: InputFactory) -> float | None:
        """Compile the same model again: served from fuseopt's kernel cache."""
        compile_fn = self._compile_fn()
        _, seconds = _timed_first_call(
            lambda inputs: self._compile(compile_fn, model, inputs), make_inputs
        )
        return seconds

    def _compile(
        self,
        compile_fn: Callable[..., Any],
        model: torch.nn.Module,
        inputs: tuple[torch.Tensor, ...],
    ) -> Any:
        """`fuseopt.compile` with ``strict=True``: a backend failure raises (recorded as
        FAILED) instead of silently running the region in eager PyTorch, which would time
        eager under fuseopt's name. Ops without an nn lowering still run eagerly; their
        count is recorded (`fallback_ops`)."""
        return compile_fn(model, inputs, backend=self.backend, mode=self.mode, strict=True)


class FuseoptDynamo(Fuseopt):
    """`torch.compile(model, backend="fuseopt", options={"backend": ..., "strict": True})`:
    fuseopt as a Dynamo backend, the way a torch.compile user reaches it.

    The mode travels in the options (torch.compile takes a mode or options, not both).
    Dynamo's compiled module keeps no fuseopt records, so kernels and eager fallbacks
    are not counted here (the profiler still counts launches on a GPU).
    """

    def __init__(self, backend: str, mode: str | None):
        super().__init__(backend, mode)
        self.name = f"torch.compile({self.name})"
        self.description = (
            f'torch.compile(backend="fuseopt", options={{"backend": {backend!r}, '
            f'"mode": {mode!r}, "strict": True}})'
        )

    def prepare(self, model: torch.nn.Module, make_inputs: InputFactory) -> Prepared:
        """Compile and run once, counting the eager fallbacks fuseopt logs (its records
        are not reachable through Dynamo)."""
        collector = _FallbackLog()
        logger = logging.getLogger("fuseopt")
        logger.addHandler(collector)
        try:
            prepared = super().prepare(model, make_inputs)
        finally:
            logger.removeHandler(collector)
        if collector.ops:
            prepared.fallback_ops = collector.ops
            prepared.fallback_reasons = collector.reasons[:FALLBACK_REASONS_KEPT]
        return prepared

    def _compile(
        self,
        compile_fn: Callable[..., Any],
        model: torch.nn.Module,
        inputs: tuple[torch.Tensor, ...],
    ) -> Any:
        """A fresh Dynamo compile through the registered ``fuseopt`` backend, strict (a
        backend failure raises instead of running eagerly)."""
        torch._dynamo.reset()
        options: dict[str, Any] = {"backend": self.backend, "strict": True}
        if self.mode is not None:
            options["mode"] = self.mode
        return torch.compile(model, backend="fuseopt", options=options, dynamic=False)


class _FallbackLog(logging.Handler):
    """Collects fuseopt's "N op(s) run eagerly in PyTorch: ..." warnings."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.ops = 0
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Count the ops of one fallback warning and keep its text."""
        if "run eagerly" in str(record.msg) and len(record.args or ()) >= 3:
            _, count, text = record.args[:3]  # type: ignore[index]
            self.ops += int(count)
            self.reasons.append(str(text))


FALLBACK_REASONS_KEPT = 8
"""How many distinct eager-fallback reasons a row records (the count is always whole)."""


def fallback_reasons(fallbacks: list[Any]) -> list[str]:
    """The distinct ``op: reason`` lines of fuseopt's eager fallbacks, with counts."""
    counts: dict[str, int] = {}
    for record in fallbacks:
        key = f"{getattr(record, 'target', '?')}: {getattr(record, 'reason', '?')}"
        counts[key] = counts.get(key, 0) + 1
    lines = [f"{n}x {key}" for key, n in counts.items()]
    return lines[:FALLBACK_REASONS_KEPT]


def default_backends(device: torch.device) -> tuple[str, ...]:
    """fuseopt backends to try: the GPU backends on a GPU, the interpreter on a CPU."""
    return ("triton", "cuda") if device.type == "cuda" else ("interpret",)


def make_systems(
    device: torch.device, backends: tuple[str, ...], cpu_compile: bool
) -> list[System]:
    """The systems of one run, baselines first (eager, torch.compile, max-autotune)."""
    systems: list[System] = [
        Eager(),
        TorchCompile(TORCH_COMPILE, None, "torch.compile (default mode)", cpu_compile),
        TorchCompile(
            MAX_AUTOTUNE,
            "max-autotune-no-cudagraphs",
            'torch.compile(mode="max-autotune-no-cudagraphs")',
            cpu_compile,
        ),
    ]
    for backend in backends:
        systems.append(Fuseopt(backend, None))
        if device.type == "cuda" and backend in AUTOTUNING_BACKENDS:
            systems.append(Fuseopt(backend, FUSEOPT_AUTOTUNE_MODE))
    return systems


def make_model_systems(
    device: torch.device, backends: tuple[str, ...], cpu_compile: bool
) -> list[System]:
    """The model suite's systems: `make_systems`' (baselines, fuseopt per backend and
    its autotuned mode), then torch.compile and fuseopt in reduce-overhead (CUDA graphs;
    decode only), then every fuseopt (backend, mode) again through
    ``torch.compile(backend="fuseopt")``."""
    systems = make_systems(device, backends, cpu_compile)
    systems.append(
        TorchCompile(
            f"{TORCH_COMPILE}-{REDUCE_OVERHEAD}",
            REDUCE_OVERHEAD,
            f'torch.compile(mode="{REDUCE_OVERHEAD}")',
            cpu_compile,
        )
    )
    systems += [Fuseopt(backend, REDUCE_OVERHEAD) for backend in backends]
    fuseopt = [s for s in systems if isinstance(s, Fuseopt)]
    systems += [FuseoptDynamo(s.backend, s.mode) for s in fuseopt]
    return systems
