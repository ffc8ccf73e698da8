"""mode="max-autotune" on the CUDA backend: per kernel, the fastest tile sizes and warps.

The shared autotuner's steps (`fuseopt.backends.autotune`: candidates, timer, buffers,
progress) with CUDA kernels. At the first call on a CUDA device, `CudaAutotunedFunction`:

1. lowers the function once per distinct candidate configuration that
   convert-nn-to-tile recorded on its kernels (`candidates`: forced tile sizes, through
   `LoweringOptions.forcing`) and prints each lowering;
2. times every kernel of every lowering that lists the configuration, plus the
   heuristic's own kernel, launched alone over its launch's grid on random buffers of
   its launch's shapes (`do_bench`, median); a variant that does not lower, print,
   compile or launch, or whose launch takes other buffers, is skipped, and one that
   prints the same kernel as a variant already listed is timed once;
3. times each kernel's fastest tiling again with the other warp counts of TUNED_WARPS:
   the tile IR's `num_warps` set on the kernel op and the module printed anew (the
   printer may raise a matmul's warps to fit its accumulators: same source, not timed
   twice);
4. keeps per kernel the fastest variant, with its own launch grid, and runs the
   heuristic host function with them on that device from then on (`choices` keeps every
   timing).

Without a GPU nothing is timed: calling raises `CudaUnavailableError`, as the untuned
function does. Tests time variants in the CPU emulation through `loader` and `timer`.
"""

from __future__ import annotations

import logging
import math
import os
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Protocol

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, i64

from fuseopt.backends.autotune import (
    Progress,
    Timer,
    candidate_configs,
    config_label,
    device_name,
    distinct_configs,
    do_bench_timer,
    random_buffers,
)
from fuseopt.backends.cuda.backend import CudaFunction
from fuseopt.backends.cuda.printer import CudaKernel, print_cuda
from fuseopt.backends.cuda.runtime import LoadedKernel, compile_cubin, device_arch
from fuseopt.diagnostics import CompileError, parse_module
from fuseopt.dialects import tile, tile_host
from fuseopt.dialects.dtypes import torch_dtype
from fuseopt.pipelines import LoweringOptions, pipeline_passes, run_passes
from fuseopt.registry import make_context

log = logging.getLogger("fuseopt")

TUNED_WARPS = (1, 2, 4, 8, 16)
"""Warps per block tried on each kernel's fastest tiling."""


class Launchable(Protocol):
    """A loaded kernel: `LoadedKernel` on a GPU, `EmulatedKernel` in tests."""

    def launch(self, grid: tuple[int, ...], threads: int, args: list[torch.Tensor]) -> None:
        """Launch over `grid` blocks of `threads` threads on buffers `args`."""
        ...


Loader = Callable[[CudaKernel, torch.device], Launchable]
"""Loads a printed kernel for a device (compiles it first)."""


def load_on_gpu(k: CudaKernel, device: torch.device) -> LoadedKernel:
    """`k` compiled for `device`'s architecture (through the cubin cache) and loaded."""
    with torch.cuda.device(device):
        cubin = compile_cubin(k.source, k.c_name, device_arch(device))
        return LoadedKernel(cubin, k.c_name, k.smem_bytes)


@dataclass(frozen=True)
class KernelLaunch:
    """A kernel as its host function launches it: `kernel` with the launch's grid set,
    and the launch's buffers `args` as (shape, torch dtype name)."""

    kernel: CudaKernel
    args: tuple[tuple[tuple[int, ...], str], ...]


def kernel_launches(
    module: ModuleOp, func_name: str, kernels: Sequence[CudaKernel]
) -> dict[str, KernelLaunch]:
    """The kernels `func_name` of tile `module` launches exactly once, by IR name (a
    kernel launched twice keeps its heuristic sizes: one grid must serve both)."""
    f = next(
        (o for o in module.ops if isinstance(o, func.FuncOp) and o.sym_name.data == func_name),
        None,
    )
    if f is None:
        raise CompileError(f"no function @{func_name} in the compiled module")
    host = tile_host.read_host(f, "the cuda autotuner", "tune")
    launches = [s for s in host.steps if isinstance(s, tile_host.Launch)]
    count = Counter(s.kernel for s in launches)
    by_ir = {k.ir_name: k for k in kernels}
    found: dict[str, KernelLaunch] = {}
    for s in launches:
        k = by_ir.get(s.kernel)
        if k is None or count[s.kernel] != 1:
            continue
        args = []
        for a in s.args:
            assert isinstance(a.type, MemRefType)
            args.append((tuple(a.type.get_shape()), str(torch_dtype(a.type.element_type))))
        found[s.kernel] = KernelLaunch(replace(k, grid=tuple(k.grid or s.grid)), tuple(args))
    return found


def lower_variant(ir_text: str, lowering: LoweringOptions) -> ModuleOp:
    """nn IR `ir_text` through FUSE and the tile stage `lowering` builds."""
    module = parse_module(make_context(), ir_text, "<autotune>")
    return run_passes(module, pipeline_passes("standard", lowering))


def with_warps(module: ModuleOp, names: Sequence[str], warps: int) -> ModuleOp:
    """A copy of tile `module` whose kernels `names` launch `warps` warps per block."""
    copy = module.clone()
    for op in copy.walk():
        if isinstance(op, tile.KernelOp) and op.sym_name.data in names:
            op.num_warps = IntegerAttr(warps, i64)
    return copy


@dataclass
class Best:
    """The fastest variant of one kernel so far: its time, launch and label."""

    us: float
    launch: KernelLaunch
    label: str


class CudaAutotunedFunction:
    """A CudaFunction tuned per CUDA device at its first call there (module doc)."""

    def __init__(
        self,
        fn: CudaFunction,
        ir_text: str,
        func_name: str,
        lowering: LoweringOptions,
        timer: Timer | None = None,
        loader: Loader | None = None,
    ):
        self.fn, self.ir_text, self.func_name, self.lowering = fn, ir_text, func_name, lowering
        self.timer = timer or do_bench_timer
        self.loader = loader or load_on_gpu
        self.tuned: dict[str, CudaFunction] = {}
        self.choices: dict[str, dict[str, Any]] = {}

    @property
    def current(self) -> CudaFunction:
        """The function calls run now (the last tuned one, else the heuristic one)."""
        return next(reversed(self.tuned.values())) if self.tuned else self.fn

    @property
    def kernels(self) -> list[Any]:
        """Kernel records (of the tuned function once it exists)."""
        return self.current.kernels

    def __getattr__(self, name: str) -> Any:
        if name in ("module", "host_code", "cuda_kernels", "save", "check", "host", "compile_all"):
            return getattr(self.current, name)
        raise AttributeError(name)

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Tune on first use on a CUDA device, then run the tuned function."""
        xs = self.fn.check(inputs)  # no GPU: CudaUnavailableError
        device = xs[0].device if xs else torch.device("cuda", torch.cuda.current_device())
        name = device_name(device)
        tuned = self.tuned.get(name) or self.tune(device, name)
        return tuned(*xs)

    def tune(self, device: torch.device, name: str = "") -> CudaFunction:
        """The function with each kernel's fastest variant on `device`, kept as
        `tuned[name]` (the one calls run from then on); `choices[name]` records the
        timings."""
        best, timings = self.choose(device)
        kernels = [
            best[k.ir_name].launch.kernel if k.ir_name in best else k for k in self.fn.cuda_kernels
        ]
        tuned = CudaFunction(self.fn.module, self.func_name, kernels)
        self.choices[name or device.type] = {
            k: {"config": b.label, "us": b.us, "timings": timings.get(k, {})}
            for k, b in best.items()
        }
        if device.type == "cuda":
            tuned.compile_all(device)
        self.tuned[name or device.type] = tuned
        return tuned

    def choose(self, device: torch.device) -> tuple[dict[str, Best], dict[str, dict[str, float]]]:
        """Time the variants (module doc, steps 1-3): per kernel, the fastest and every
        timing by label."""
        base = kernel_launches(self.fn.module, self.func_name, self.fn.cuda_kernels)
        wanted = candidate_configs(self.fn.module)
        configs = distinct_configs(wanted)
        progress = Progress(len(base) * (1 + len(configs) + len(TUNED_WARPS)))
        modules: dict[str, ModuleOp] = {"heuristic": self.fn.module}
        tiled: list[tuple[str, str, KernelLaunch]] = [(n, "heuristic", k) for n, k in base.items()]
        for config in configs:
            label = config_label(config)
            try:
                module = lower_variant(self.ir_text, self.lowering.forcing(config))
                launches = kernel_launches(module, self.func_name, print_cuda(module))
            except Exception as e:  # noqa: BLE001 - a config that does not lower is skipped
                log.info("autotune: %s does not lower: %s", label, e)
                continue
            modules[label] = module
            for name, ref in base.items():
                got = launches.get(name)
                if config in wanted.get(name, []) and got is not None and _fits(ref, got):
                    if not any(n == name and _same(v, got) for n, _, v in tiled):
                        tiled.append((name, label, got))  # another kernel: timed
        best: dict[str, Best] = {}
        timings: dict[str, dict[str, float]] = {}
        self._time_all(tiled, device, best, timings, progress)
        by_label: dict[str, list[str]] = {}
        for name, b in best.items():
            by_label.setdefault(b.label, []).append(name)
        warped: list[tuple[str, str, KernelLaunch]] = []
        for label, names in by_label.items():
            for warps in TUNED_WARPS:
                try:
                    module = with_warps(modules[label], names, warps)
                    launches = kernel_launches(module, self.func_name, print_cuda(module))
                except Exception as e:  # noqa: BLE001 - warps the printer refuses
                    log.info("autotune: %s warps=%d does not print: %s", label, warps, e)
                    continue
                for name in names:
                    got = launches.get(name)
                    if got is None or not _fits(base[name], got):
                        continue
                    if got.kernel.source == best[name].launch.kernel.source:
                        continue  # the printer kept (or raised to) the tiling's warps
                    warped.append((name, f"{label} warps={warps}", got))
        self._time_all(warped, device, best, timings, progress)
        for name, b in best.items():
            progress.note(f"{name}: {b.label} {b.us:.1f} us")
        return best, timings

    def _time_all(
        self,
        variants: list[tuple[str, str, KernelLaunch]],
        device: torch.device,
        best: dict[str, Best],
        timings: dict[str, dict[str, float]],
        progress: Progress,
    ) -> None:
        """Time `variants` (kernel name, label, launch), updating `best` and `timings`."""
        if device.type == "cuda" and self.loader is load_on_gpu:
            arch = device_arch(device)
            kernels = {v[2].kernel.source: v[2].kernel for v in variants}.values()
            workers = max(1, min(len(kernels), os.cpu_count() or 1, 16))
            with ThreadPoolExecutor(max_workers=workers) as pool:  # cubins built in parallel
                list(pool.map(lambda k: _try_compile(k, arch), kernels))
        for name, label, launch in variants:
            us = self._time(launch, device)
            progress.step(f"{name} {label}")
            timings.setdefault(name, {})[label] = us
            if name not in best or us < best[name].us:
                best[name] = Best(us, launch, label)

    def _time(self, launch: KernelLaunch, device: torch.device) -> float:
        k = launch.kernel
        grid = k.grid or (1,)
        buffers: list[torch.Tensor] = []
        try:  # a kernel that does not compile or launch, or buffers too big: not timed
            loaded = self.loader(k, device)
            buffers = random_buffers(launch.args, device)
            loaded.launch(grid, k.threads, buffers)  # loads the module outside the timing
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            return self.timer(lambda: loaded.launch(grid, k.threads, buffers))
        except Exception as e:  # noqa: BLE001 - not a candidate
            log.info("autotune: %s failed: %s", k.c_name, e)
            return math.inf
        finally:
            buffers.clear()


def _fits(ref: KernelLaunch, got: KernelLaunch) -> bool:
    """Can `got` replace `ref` in the heuristic host function (same name and buffers)?"""
    return got.kernel.c_name == ref.kernel.c_name and got.args == ref.args


def _same(a: KernelLaunch, b: KernelLaunch) -> bool:
    """Are `a` and `b` the same kernel launched the same way (timed once)?"""
    return a.kernel.source == b.kernel.source and a.kernel.grid == b.kernel.grid


def _try_compile(k: CudaKernel, arch: str) -> None:
    try:
        compile_cubin(k.source, k.c_name, arch)
    except Exception as e:  # noqa: BLE001 - reported when timed
        log.info("autotune: %s does not compile: %s", k.c_name, e)


__all__ = ["TUNED_WARPS", "CudaAutotunedFunction", "KernelLaunch", "kernel_launches"]
