"""The CUDA backend's host function: printed once as Python, bound once per device.

`print_cuda_host` prints a host `func.func` of tile IR with the shared host printer
(`backends/host_source.py`: allocations, views, index arithmetic, library GEMMs and
PyTorch calls as lines of Python) and this backend's launches (`CudaLaunches`): the
kernels between two library or PyTorch calls form a *run*; the run's launches' buffer
pointers and dynamic sizes are stored in its argument array by one line (a temporary
only kernels read is the workspace's pointer plus its offset: no tensor is made for
it), a grid of dynamic size in the run's geometry, and the run is issued with one call
of the C launch loop (`launch_loop.py`). The source is compiled to a code object once.

`CudaHost.bind` turns it into a function for one device and host thread: the run
arrays hold that device's kernel handles, and the function's globals name them, so a
call does no lookups. The CPU emulation binds the same source with emulated launches.

For a host function

    %t = tile.alloc ...
    tile.launch @k1 (4) (%x, %t)
    tile.launch @k2 (%n) (%t, %out)
    tile.gemm ...

(k2 over buffers of dynamic size: it takes a size after its pointers) the printed body
reads, in part:

    fuseopt_run0_geometry[5:8] = (n, 1, 1, )
    fuseopt_run0_values[0:5] = (
        x.data_ptr(), t.data_ptr(), t.data_ptr(), out.data_ptr(), t.shape[0], )
    failed = fuseopt_launch_run(fuseopt_run0, fuseopt_stream(fuseopt_device_index))
    if failed:
        raise fuseopt_launch_failed(failed, 0)
    torch.mm(...)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

import torch
from xdsl.dialects import func
from xdsl.ir import SSAValue

from fuseopt.backends.cuda.printer import CudaKernel
from fuseopt.backends.host_source import (
    HOST_HELPERS,
    PADDED_GEMM,
    HostInfo,
    KernelPointers,
    RunValues,
    print_host,
    tuple_source,
)
from fuseopt.backends.launch_loop import GEOMETRY, LaunchRun, RunLaunch, bind_runs
from fuseopt.backends.library_gemm import mm_padded
from fuseopt.backends.python_names import NameTable
from fuseopt.dialects import tile_host


@dataclass(frozen=True)
class PrintedLaunch:
    """One launch of the printed host function: its kernel, its grid (None: set per
    call, from sizes) and how many argument values it takes (pointers, then sizes)."""

    kernel: CudaKernel
    grid: tuple[int, ...] | None
    values: int


class CudaLaunches:
    """The CUDA backend's `host_source.LaunchPrinter`: launches batched into runs."""

    def __init__(self, kernels: dict[str, CudaKernel]):
        self.kernels = kernels
        self.runs: list[list[PrintedLaunch]] = []
        self.pending: list[PrintedLaunch] = []
        self.values = RunValues()

    def tensor_args(self, step: tile_host.Launch) -> set[int]:
        """The buffers whose sizes the kernel takes (read from their shapes)."""
        return {i for i, _ in self.kernels[step.kernel].sizes}

    def launch(
        self,
        step: tile_host.Launch,
        expr: dict[SSAValue, str],
        local: NameTable,
        pointers: KernelPointers,
    ) -> tuple[list[str], str]:
        """Store the launch's arguments (and a dynamic grid) in the pending run."""
        k = self.kernels[step.kernel]
        run, index = len(self.runs), len(self.pending)
        values = [pointers.of(a, expr) for a in step.args]
        values += [f"{expr[step.args[i]]}.shape[{d}]" for i, d in k.sizes]
        self.values.add(values)
        lines = []
        grid = k.grid or step.static_grid
        if grid is None:  # sizes read per call
            sizes = [expr[g] if isinstance(g, SSAValue) else str(g) for g in step.grid]
            sizes = (sizes + ["1", "1"])[:3]
            first = GEOMETRY * index
            lines.append(f"fuseopt_run{run}_geometry[{first}:{first + 3}] = {tuple_source(sizes)}")
        self.pending.append(PrintedLaunch(k, tuple(grid) if grid else None, len(values)))
        return lines, k.c_name

    def flush(self, local: NameTable) -> list[str]:
        """Issue the pending run: one call of the launch loop, its failure raised."""
        if not self.pending:
            return []
        run = len(self.runs)
        self.runs.append(self.pending)
        self.pending = []
        failed = local.fresh("failed")
        stream = "fuseopt_stream(fuseopt_device_index)"
        return [
            *self.values.store(run),
            f"{failed} = fuseopt_launch_run(fuseopt_run{run}, {stream})",
            f"if {failed}:",
            f"    raise fuseopt_launch_failed({failed}, {run})",
        ]


@dataclass
class CudaHost:
    """A printed host function: its source, description and runs (module doc)."""

    source: str
    info: HostInfo
    runs: list[list[PrintedLaunch]]
    code: CodeType = field(repr=False)
    inputs: list[tuple[tuple[int, ...], torch.dtype]]
    """(shape, dtype) per input; a negative dim is of dynamic size."""

    @property
    def launches(self) -> list[PrintedLaunch]:
        """Every kernel launch, in order."""
        return [p for run in self.runs for p in run]

    def bind(
        self,
        handle: Callable[[CudaKernel], tuple[int, int]],
        launch_run: Callable[[Any, int], int],
        run_object: Callable[[LaunchRun], Any],
        launch_function: int,
        stream: Callable[[int], int],
        device_index: int,
        driver_message: Callable[[int], str],
    ) -> Callable[..., tuple[torch.Tensor, ...]]:
        """The host function for one device and host thread: `host(*inputs, device=...)`.

        `handle(kernel)` gives the kernel's (function handle, shared bytes) there;
        `launch_run(run_object(run), stream)` issues a run (the C loop takes the run's
        address, the Python loops the run itself); `launch_function` is what the C
        loop calls (cuLaunchKernel's address); `stream(device_index)` the raw current
        stream; `driver_message(CUresult)` the driver's text for a failure.
        """
        namespace: dict[str, Any] = {"torch": torch, PADDED_GEMM: mm_padded}
        exec(HOST_HELPERS, namespace)  # noqa: S102 - fuseopt's own helper source
        runs = []
        for printed in self.runs:
            bound = []
            for p in printed:
                function, smem = handle(p.kernel)
                grid = (*(p.grid or (0,)), 1, 1)[:3]
                bound.append(RunLaunch(function, grid, p.kernel.threads, smem, p.values))  # type: ignore[arg-type]
            runs.append(LaunchRun(bound, launch_function))
        names = [[p.kernel.c_name for p in printed] for printed in self.runs]
        bind_runs(
            namespace, runs, names, run_object, launch_run, stream, device_index, driver_message
        )
        exec(self.code, namespace)  # noqa: S102 - source printed by fuseopt, names generated
        return namespace[self.info.py_name]


def print_cuda_host(f: func.FuncOp, kernels: dict[str, CudaKernel]) -> CudaHost:
    """The host function `f` printed for the CUDA backend (module doc); `kernels` by
    their IR name. Raises a located CompileError for a host function it cannot run."""
    launches = CudaLaunches(kernels)
    source, info = print_host(f, NameTable(), "the cuda backend", launches)
    code = compile(source, f"<fuseopt cuda host {info.py_name}>", "exec")
    inputs = [(shape, _dtype(dt)) for shape, dt in info.inputs]
    return CudaHost(source, info, launches.runs, code, inputs)


def _dtype(text: str) -> torch.dtype:
    """The torch dtype of its source text ("torch.float32")."""
    dtype = getattr(torch, text.removeprefix("torch."))
    assert isinstance(dtype, torch.dtype)
    return dtype


__all__ = ["CudaHost", "CudaLaunches", "PrintedLaunch", "print_cuda_host"]
