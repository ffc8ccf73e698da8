"""The "cuda" backend of `fuseopt.compile`: nn IR -> tile IR -> CUDA C++ -> cubins.

`CudaBackend.compile` runs the standard pipeline to tile IR (pass objects with the CUDA
target's tile options, `backends/targets.py`), prints every kernel
(`printer.print_cuda`) and prints the host function as Python once
(`host_function.py`): buffer allocations, views, library GEMMs (cuBLAS through
PyTorch's out= calls) and runs of kernel launches issued by a C loop
(`launch_loop.py`). Cubins are built on first use on a GPU (the device's architecture is
known only then) and cached on disk; without a GPU, calling the result raises
`CudaUnavailableError` while `kernels` and `save()` still give the source.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from fuseopt.backends.contract import GRAPH_MODES, KernelRecord, partly_checked, shape_matches
from fuseopt.backends.cuda.host_function import print_cuda_host
from fuseopt.backends.cuda.printer import CudaKernel, print_cuda
from fuseopt.backends.cuda.runtime import LoadedKernel, check_gpu, compile_cubin, device_arch
from fuseopt.backends.cuda_graphs import CudaGraphFunction
from fuseopt.backends.launch_loop import driver_message, raw_stream, run_launcher
from fuseopt.backends.targets import CUDA
from fuseopt.diagnostics import CompileError
from fuseopt.passes.generalize_sizes import (
    SizeDependentLowering,
    SizedFunction,
    as_sized,
    lower_sized,
)

if TYPE_CHECKING:
    from fuseopt.backends.cuda.autotune import CudaAutotunedFunction
    from fuseopt.pipelines import LoweringOptions

logger = logging.getLogger(__name__)


def tile_pipeline(precision: str = "f32") -> str:
    """The CUDA target's pipeline from imported nn IR to promoted tile IR as `-p` text
    (`fuse-opt -p "$(...)"`, tests), derived from the pass objects the backend runs
    (`backends/targets.py` CUDA)."""
    from fuseopt.pipelines import pipeline_passes, pipeline_spec

    return pipeline_spec(pipeline_passes("standard", CUDA.lowering({"precision": precision})))


def _lower(module: ModuleOp, lowering: LoweringOptions) -> ModuleOp:
    """The standard pipeline with the CUDA target's `lowering`, in place (`lower_sized`'s
    callback: it returns the module, of which the CUDA backend keeps no fused stage)."""
    from fuseopt.pipelines import pipeline_passes, run_passes

    run_passes(module, pipeline_passes("standard", lowering))
    return module


def as_compiled(i: int, x: torch.Tensor, shape: tuple[int, ...], dt: torch.dtype) -> torch.Tensor:
    """Input `i` as the compiled function takes it: contiguous, of dtype `dt` and of
    `shape` (a negative dim is of dynamic size: any size fits; a static shape takes any
    tensor of as many elements)."""
    if x.dtype == dt and shape_matches(x.shape, shape):
        return x.contiguous()
    if x.dtype != dt or min(shape, default=0) < 0 or x.numel() != math.prod(shape):
        raise CompileError(
            f"input {i} must be {dt} of shape {_shown(shape)}, "
            f"got {x.dtype} of shape {tuple(x.shape)}"
        )
    return x.reshape(shape).contiguous()


def _shown(shape: tuple[int, ...]) -> str:
    """A shape as the IR writes it (`?` for a dynamic dim)."""
    return "(" + ", ".join("?" if n < 0 else str(n) for n in shape) + ")"


def _record(cls: type, k: CudaKernel, grid: tuple[int, ...] | None) -> Any:
    """A `fuseopt.backends.contract.KernelRecord` for `k` (with its file suffix and launch when the
    record has those fields)."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    extra: dict[str, Any] = {}
    if "suffix" in names:
        extra["suffix"] = ".cu"
    if "launch" in names:
        g = ", ".join(map(str, grid or k.grid or (1,)))
        extra["launch"] = f"grid ({g}), block ({k.threads}), shared memory {k.smem_bytes} B"
    return cls(k.c_name, k.ops, k.schedule, k.source, **extra)


class CudaFunction:
    """A compiled function: call it with CUDA tensors (see the module docstring)."""

    def __init__(self, module: ModuleOp, func_name: str, kernels: list[CudaKernel]):
        self.module = module
        self.func_name = func_name
        self.cuda_kernels = kernels
        by_ir = {k.ir_name: k for k in kernels}
        f = next(
            (o for o in module.ops if isinstance(o, func.FuncOp) and o.sym_name.data == func_name),
            None,
        )
        if f is None:
            raise CompileError(f"no function @{func_name} in the compiled module")
        self.host_code = print_cuda_host(f, by_ir)
        """The printed host function (`host_function.py`): `.source` shows it."""
        by_name = {k.c_name: k for k in kernels}
        grids = iter(self.host_code.launches)
        self.kernels = []
        """One record per launch of the host function, library GEMMs and calls of
        PyTorch ops included (as the Triton backend's)."""
        for name in self.host_code.info.launches:
            if name in by_name:
                self.kernels.append(_record(KernelRecord, by_name[name], next(grids).grid))
            elif name == "library_gemm":
                self.kernels.append(KernelRecord(name, ("nn.matmul",), name, None, ".cu", "cuBLAS"))
            else:
                self.kernels.append(
                    KernelRecord(name, ("nn.torch_call",), "torch_call", None, ".cu", "PyTorch")
                )
        self.inputs = self.host_code.inputs
        """(shape, dtype) per input, negative for a dim of dynamic size (as a TritonFunction's:
        `cuda_graphs` records graphs per input shapes when one is dynamic)."""
        self._checked = self._partly_checked([False] * len(self.inputs))
        self._loaded: dict[tuple[int, str], LoadedKernel] = {}
        # per (device index, host thread): the bound host function (`_bound_host`)
        self._bound: dict[tuple[int, int], Callable[..., tuple[torch.Tensor, ...]]] = {}

    def save(self, directory: str | Path) -> list[Path]:
        """Write every kernel's `.cu` file into `directory`; return the paths."""
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        paths = []
        for k in self.cuda_kernels:
            path = root / k.file_name
            path.write_text(k.source)
            paths.append(path)
        return paths

    def compile_all(self, device: torch.device | None = None) -> None:
        """Build (in parallel: one compiler process per kernel) and load every kernel for
        `device` (the current CUDA device)."""
        check_gpu()
        dev = torch.device("cuda", torch.cuda.current_device()) if device is None else device
        arch = device_arch(dev)
        todo = [k for k in self.cuda_kernels if ((dev.index or 0), k.c_name) not in self._loaded]
        workers = max(1, min(len(todo), os.cpu_count() or 1, 16))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            cubins = list(pool.map(lambda k: compile_cubin(k.source, k.c_name, arch), todo))
        with torch.cuda.device(dev):
            for k, cubin in zip(todo, cubins, strict=True):
                self._loaded[((dev.index or 0), k.c_name)] = LoadedKernel(
                    cubin, k.c_name, k.smem_bytes
                )

    def _kernel(self, k: CudaKernel, dev: torch.device) -> LoadedKernel:
        key = (dev.index or 0, k.c_name)
        got = self._loaded.get(key)
        if got is None:
            with torch.cuda.device(dev):
                cubin = compile_cubin(k.source, k.c_name, device_arch(dev))
                got = LoadedKernel(cubin, k.c_name, k.smem_bytes)
            self._loaded[key] = got
        return got

    def check(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The inputs as contiguous CUDA tensors of the compiled shapes and dtypes."""
        check_gpu()
        if len(inputs) != len(self.inputs):
            raise CompileError(
                f"@{self.func_name} takes {len(self.inputs)} inputs, got {len(inputs)}"
            )
        out = []
        for i, (x, (shape, dt)) in enumerate(zip(inputs, self.inputs, strict=True)):
            if not isinstance(x, torch.Tensor) or x.device.type != "cuda":
                raise CompileError(f"input {i} must be a CUDA tensor for the cuda backend")
            out.append(as_compiled(i, x, shape, dt))
        return out

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Run on CUDA tensors; returns the outputs (on the inputs' device).

        The hot path does no more than: take inputs that already have the compiled
        shape, dtype and layout as they are, allocate outputs, and for each launch store
        the buffer pointers in its reusable parameter slot and call cuLaunchKernel.
        """
        return self._checked(*inputs)

    def trusting(self, trusted: Sequence[bool]) -> Callable[..., tuple[torch.Tensor, ...]]:
        """This function checking only the inputs not `trusted` (`partly_checked`)."""
        return self._partly_checked(trusted)

    def _partly_checked(self, trusted: Sequence[bool]) -> Callable[..., tuple[torch.Tensor, ...]]:
        # not `trusting`, which a subclass may override (the emulation returns itself)
        return partly_checked(self.inputs, trusted, self.check, self._run_inputs, cuda_only=True)

    def _run_inputs(self, inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """Run on inputs `check` accepted: the host function bound to their device."""
        dev = inputs[0].device if inputs else None
        if dev is None:
            check_gpu()
            dev = torch.device("cuda", torch.cuda.current_device())
        elif dev.type != "cuda":  # a trusted input on another device: `check` says why
            return self._run_inputs(self.check(inputs))
        index = dev.index or 0
        if index != torch.cuda.current_device():
            with torch.cuda.device(dev):
                return self._bound_host(index)(*inputs, device=dev)
        return self._bound_host(index)(*inputs, device=dev)

    def host(self, interpret: bool = False) -> Callable[..., tuple[torch.Tensor, ...]]:
        """The host function without input checks (what `cuda_graphs.CudaGraphFunction`
        records): `host(*inputs, device=...)` takes inputs `check` returned, allocates
        the outputs, launches every step on the current stream and returns the outputs.
        `interpret` must be False (CUDA kernels run on a GPU only)."""
        if interpret:
            raise CompileError("the cuda backend has no interpreter; run on a CUDA device")

        def run(*inputs: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, ...]:
            index = device.index or 0
            if index != torch.cuda.current_device():  # it allocates on the current device
                with torch.cuda.device(index):
                    return self._bound_host(index)(*inputs, device=device)
            return self._bound_host(index)(*inputs, device=device)

        return run

    def _bound_host(self, index: int) -> Callable[..., tuple[torch.Tensor, ...]]:
        """The printed host function bound to device `index` for this host thread
        (ctypes releases the GIL during a launch: two threads never share run arrays)."""
        key = (index, threading.get_ident())
        bound = self._bound.get(key)
        if bound is None:
            bound = self._bound[key] = self._bind(torch.device("cuda", index))
        return bound

    def _bind(self, dev: torch.device) -> Callable[..., tuple[torch.Tensor, ...]]:
        """The host function with `dev`'s kernel handles, launching runs through the C
        loop (through Python where it cannot be built: `launch_loop.py`)."""

        def handle(k: CudaKernel) -> tuple[int, int]:
            loaded = self._kernel(k, dev)
            return loaded.function.value or 0, loaded.smem_bytes

        launch_run, run_object, address = run_launcher()
        return self.host_code.bind(
            handle, launch_run, run_object, address, raw_stream, dev.index or 0, driver_message
        )


class CudaBackend:
    """`backend="cuda"`: CUDA C++ kernels compiled with NVRTC or nvcc."""

    sizes_at_run_time = True
    """A SizedFunction compiles once for every size (passes/generalize_sizes.py); one
    whose lowering depends on the size, per size."""

    def compile(
        self, module: ModuleOp | SizedFunction, func_name: str, options: Mapping[str, Any]
    ) -> CudaFunction | CudaGraphFunction | CudaAutotunedFunction:
        """Lower `func_name` of `module` to tile IR and print its kernels.

        Options: `precision` ("f32" or "eager": docs/numerics.md) and forced tile sizes
        by convert-nn-to-tile option name (`block-rows`, `block-m`, ...; powers of two).
        Unknown options are rejected. Modes, as on the Triton backend: "default";
        "reduce-overhead" replays CUDA graphs of the host function
        (`backends/cuda_graphs.py`) when it launches more than one kernel;
        "max-autotune-no-cudagraphs" tunes tile sizes and warps per kernel at the first
        call on a device (`backends/cuda/autotune.py`); "max-autotune" tunes and
        replays graphs."""
        from fuseopt.backends.contract import check_mode, check_options
        from fuseopt.backends.cuda.autotune import CudaAutotunedFunction
        from fuseopt.pipelines import pipeline_passes, run_passes

        mode = options.get("mode")
        check_mode(mode)
        check_options("cuda", options, CUDA.option_names())
        from fuseopt.backends.per_size import PerSizeFunction, parse_specialized

        lowering = CUDA.lowering(options)
        sized = as_sized(module, func_name, parse_specialized)
        fn: CudaFunction | CudaAutotunedFunction
        if sized is not None:
            try:  # lowered at size hints, then of dynamic size (passes/generalize_sizes.py)
                tiled, _ = lower_sized(sized, lambda m: _lower(m, lowering))
                fn = CudaFunction(tiled, func_name, print_cuda(tiled))
                if torch.cuda.is_available():
                    fn.compile_all()
            except CompileError as e:
                if not isinstance(module, SizedFunction):
                    raise  # a `?` module: its refusal is what the user asked to see
                # a frontend region: static kernels are always there to fall back on
                why = (
                    f"its lowering depends on the size: {e.message}"
                    if isinstance(e, SizeDependentLowering)
                    else f"at a size hint: {e.message}"
                )
                logger.info("fuseopt: %s is compiled per size (%s)", func_name, why)
                return PerSizeFunction(  # type: ignore[return-value]
                    sized, lambda m: self.compile(m, func_name, options), "cuda"
                )
            if mode in ("max-autotune", "max-autotune-no-cudagraphs"):
                logger.info(
                    "fuseopt: %s takes sizes at run time: its tile sizes are the heuristic's "
                    "(no autotuning)",
                    func_name,
                )
        else:
            assert isinstance(module, ModuleOp)
            text = str(module)
            run_passes(module, pipeline_passes("standard", lowering))
            fn = CudaFunction(module, func_name, print_cuda(module))
            if torch.cuda.is_available():
                fn.compile_all()
        launches = len(fn.host_code.info.launches)  # kernels, library GEMMs, PyTorch calls
        # a SizedFunction has no one text to re-lower per candidate: its heuristic tiling
        if sized is None and mode in ("max-autotune", "max-autotune-no-cudagraphs"):
            fn = CudaAutotunedFunction(fn, text, func_name, lowering)
        if mode in GRAPH_MODES and launches > 1:
            # one launch: replaying a graph costs more host time than the direct launch
            return CudaGraphFunction(fn)
        return fn
