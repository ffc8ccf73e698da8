"""The Triton backend's host function in runs: its kernels launched by the C loop.

The printed module's host function (`printer.py`) calls one launcher per kernel, and
each launch goes through Triton's launcher: a Python frame or two and Triton's argument
parsing, a few microseconds a kernel. The *run form* is the same host function printed
with its launches batched into runs (`backends/launch_loop.py`), as the CUDA backend's
host function is: a run's buffer pointers and sizes are stored into its arrays by one
line (a temporary only kernels read is the workspace's pointer plus its offset, its
tensor made only where a failed guard's fallback needs it), and a run is issued by one
call of the C loop over `cuLaunchKernel`.

    fuseopt_run0_geometry[5:8] = (n, 1, 1, )
    fuseopt_run0_values[0:5] = (
        x.data_ptr(), t.data_ptr(), t.data_ptr(), out.data_ptr(), t.shape[0], )
    failed = fuseopt_launch_run(fuseopt_run0, fuseopt_stream(fuseopt_device_index))
    if failed:
        if failed != fuseopt_guard_failed:
            raise fuseopt_launch_failed(failed, 0)
        fuseopt_module.launch_k1(x, t)
        fuseopt_module.launch_k2(t, out, t.shape[0], grid=(n, 1, ))

Triton compiles a kernel at its first launch, specialized on its arguments, so the run
form is bound (`bind_run_host`) per device and host thread only once each of its Triton
kernels has a compiled kernel on that device, made for 16-byte-aligned pointers and
int32 sizes (the launchers keep one: `launchers.FastLauncher.compiled`), and only where
the compiled kernel's parameters are known (`kernel_parameters`). The run's guards
check those assumptions per call; a run whose guard fails (an input at an odd
address) goes through the launchers, which take Triton's JIT path, as it would without
the run form. Kernels that PyTorch runs (whole-tensor kernels) are called between runs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from xdsl.dialects import func
from xdsl.ir import SSAValue

from fuseopt.backends.host_source import (
    HOST_HELPERS,
    PADDED_GEMM,
    KernelPointers,
    RunValues,
    print_host,
    tuple_source,
)
from fuseopt.backends.launch_loop import (
    GEOMETRY,
    GUARD_FAILED,
    LaunchRun,
    RunLaunch,
    bind_runs,
)
from fuseopt.backends.library_gemm import mm_padded
from fuseopt.backends.python_names import NameTable
from fuseopt.backends.triton.printer import KernelInfo, TritonLaunches, size_arguments
from fuseopt.dialects import tile_host

KNOWN_TRITON = ("3.6",)
"""Triton versions whose compiled kernels' parameters (`kernel_parameters`) were read
from their launcher: the run form is bound only there."""

MODULE = "fuseopt_module."
"""What a run form calls the printed module's launchers through (the fallback path)."""


@dataclass(frozen=True)
class RunStep:
    """One Triton launch of a run: its launcher, its grid (None: the launcher's own,
    "dynamic": stored per call) and how many buffers and sizes it passes."""

    launcher: str
    kernel: str
    grid: tuple[int, ...] | str | None
    buffers: int
    sizes: int

    def to_json(self) -> dict[str, Any]:
        """The step as the index stores it."""
        grid = list(self.grid) if isinstance(self.grid, tuple) else self.grid
        return {
            "launcher": self.launcher,
            "kernel": self.kernel,
            "grid": grid,
            "buffers": self.buffers,
            "sizes": self.sizes,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> RunStep:
        """The step from its index entry."""
        grid = data["grid"]
        return RunStep(
            data["launcher"],
            data["kernel"],
            tuple(grid) if isinstance(grid, list) else grid,
            data["buffers"],
            data["sizes"],
        )


class TritonRunLaunches:
    """The run form's `host_source.LaunchPrinter`: Triton launches batched into runs,
    each run's launcher calls kept as its fallback; a kernel PyTorch runs is a call."""

    def __init__(self, kernels: dict[str, KernelInfo]):
        self.kernels = kernels
        self.calls = TritonLaunches(kernels, MODULE)
        self.runs: list[list[RunStep]] = []
        self.pending: list[RunStep] = []
        self.values = RunValues()
        self.fallback: list[str] = []
        self.made: set[str] = set()  # tensors the pending run's fallback makes

    def tensor_args(self, step: tile_host.Launch) -> Collection[int]:
        """The buffers whose sizes a Triton kernel takes; every buffer of a kernel
        PyTorch runs (a call)."""
        k = self.kernels[step.kernel]
        if not k.triton:
            return range(len(step.args))
        return {i for i, _ in k.sizes}

    def launch(
        self,
        step: tile_host.Launch,
        expr: dict[SSAValue, str],
        local: NameTable,
        pointers: KernelPointers,
    ) -> tuple[list[str], str]:
        """Store the launch's arguments (and a dynamic grid) in the pending run; the
        fallback's launcher call first makes the tensors of kernel-only temporaries."""
        call, name = self.calls.launch(step, expr, local)
        k = self.kernels[step.kernel]
        if not k.triton:
            return self.flush(local) + call, name
        run, index = len(self.runs), len(self.pending)
        sizes = size_arguments(k, step, expr)
        self.values.add([pointers.of(a, expr) for a in step.args] + sizes)
        lines = []
        grid: tuple[int, ...] | str | None
        if step.static_grid is None:
            grid = "dynamic"
            dims = [expr[g] if isinstance(g, SSAValue) else str(g) for g in step.grid]
            first = GEOMETRY * index
            lines.append(
                f"fuseopt_run{run}_geometry[{first}:{first + 3}] = "
                f"{tuple_source((dims + ['1', '1'])[:3])}"
            )
        else:
            grid = None if step.grid == k.grid else tuple(step.static_grid)
        self.pending.append(RunStep(k.launcher, k.ir_name, grid, len(step.args), len(sizes)))
        self.fallback += pointers.tensors(list(step.args), self.made) + call
        return lines, name

    def flush(self, local: NameTable) -> list[str]:
        """Issue the pending run; if its guards fail, launch it through the launchers."""
        if not self.pending:
            return []
        run = len(self.runs)
        self.runs.append(self.pending)
        fallback, self.pending, self.fallback, self.made = self.fallback, [], [], set()
        failed = local.fresh("failed")
        stream = "fuseopt_stream(fuseopt_device_index)"
        return [
            *self.values.store(run),
            f"{failed} = fuseopt_launch_run(fuseopt_run{run}, {stream})",
            f"if {failed}:",
            f"    if {failed} != fuseopt_guard_failed:",
            f"        raise fuseopt_launch_failed({failed}, {run})",
            *[f"    {line}" for line in fallback],
        ]


def print_run_host(f: func.FuncOp, kernels: dict[str, KernelInfo]) -> dict[str, Any]:
    """The run form of host function `f` (module doc) as the index stores it: its
    source, Python name and runs. `kernels`: the module's printed kernels by IR name."""
    launches = TritonRunLaunches(kernels)
    source, info = print_host(f, NameTable(), "the triton target", launches)
    return {
        "source": source,
        "name": info.py_name,
        "runs": [[s.to_json() for s in run] for run in launches.runs],
    }


class RunFormUnavailable(Exception):
    """The run form cannot be bound here, ever (an unknown Triton, a kernel whose
    parameters are not the known ones): the host function keeps its launchers."""


def kernel_parameters(compiled: Any, buffers: int, sizes: int) -> tuple[int, int, int, int]:
    """(function handle, threads, shared bytes, trailing null parameters) to launch a
    Triton CompiledKernel that takes `buffers` pointers then `sizes` int32 sizes.

    The kernel's parameters are its signature's arguments that are not compile-time
    constants, then one null pointer per scratch buffer the Triton declares (global and
    profile scratch: their sizes must be 0). Raises RunFormUnavailable for anything
    else: cluster or cooperative launches, tensor descriptors, instrumentation, other
    argument types.
    """
    try:
        import triton

        version = ".".join(triton.__version__.split(".")[:2])
        metadata, src = compiled.metadata, compiled.src
        names = list(src.fn.arg_names)

        def name(key: Any) -> str:  # a signature or constants key: name, index or (index,)
            key = key[0] if isinstance(key, tuple) else key
            return names[key] if isinstance(key, int) else key

        constants = {name(k) for k in getattr(src, "constants", {})}
        types = [
            ty for k, ty in src.signature.items() if ty != "constexpr" and name(k) not in constants
        ]
    except (ImportError, AttributeError, IndexError, TypeError) as e:
        raise RunFormUnavailable(f"a compiled kernel without the expected attributes ({e})") from e
    if version not in KNOWN_TRITON:
        raise RunFormUnavailable(f"Triton {version}'s kernel parameters are not known")
    expected = len(types) == buffers + sizes and all(
        isinstance(ty, str) and ty.startswith("*") for ty in types[:buffers]
    )
    if not expected or any(ty != "i32" for ty in types[buffers:]):
        raise RunFormUnavailable(f"parameters {types} are not {buffers} pointers, {sizes} i32")
    trailing = 0
    for scratch in ("global_scratch_size", "profile_scratch_size"):
        if hasattr(metadata, scratch):
            if getattr(metadata, scratch):
                raise RunFormUnavailable(f"the kernel needs {scratch.removesuffix('_size')}")
            trailing += 1
    if (
        getattr(metadata, "num_ctas", 1) != 1
        or getattr(metadata, "launch_cooperative_grid", False)
        or getattr(metadata, "launch_pdl", False)
        or getattr(metadata, "tensordesc_meta", None)
        or getattr(metadata, "instrumentation_mode", "")
    ):
        raise RunFormUnavailable("the kernel needs a launch the run form does not make")
    function = getattr(compiled, "function", None)
    if not isinstance(function, int) or not function:
        raise RunFormUnavailable("the compiled kernel has no function handle")
    return function, 32 * metadata.num_warps, metadata.shared, trailing


def bind_run_host(
    form: Mapping[str, Any],
    module: Any,
    compiled: Callable[[str], tuple[Any, tuple[int, ...]] | None],
    launcher: tuple[Callable[[Any, int], int], Callable[[LaunchRun], Any], int],
    stream: Callable[[int], int],
    device_index: int,
    driver_message: Callable[[int], str],
) -> Callable[..., tuple[torch.Tensor, ...]] | None:
    """The run form `form` (`print_run_host`'s) bound to one device and host thread:
    `host(*inputs, device=...)`, or None while a kernel has no compiled kernel there yet.

    `compiled(launcher name)` gives the launcher's compiled kernel on this device and its
    own grid, or None; `module` is the printed module (the fallback calls its
    launchers); `launcher` is `launch_loop.run_launcher()`'s (launch_run, run_object,
    cuLaunchKernel's address); `stream(device_index)` the raw current stream;
    `driver_message(CUresult)` the driver's text for a failure. Raises
    RunFormUnavailable where it can never be bound (`kernel_parameters`).
    """
    launch_run, run_object, address = launcher
    namespace: dict[str, Any] = {"torch": torch, PADDED_GEMM: mm_padded}
    exec(HOST_HELPERS, namespace)  # noqa: S102 - fuseopt's own helper source
    runs, names = [], []
    for steps in form["runs"]:
        bound, aligned, small, at = [], [], [], 0
        for step in map(RunStep.from_json, steps):
            found = compiled(step.launcher)
            if found is None:
                return None
            kernel, own_grid = found
            function, threads, shared, trailing = kernel_parameters(
                kernel, step.buffers, step.sizes
            )
            grid = (0,) if step.grid == "dynamic" else step.grid or own_grid
            values = step.buffers + step.sizes
            bound.append(
                RunLaunch(function, (*grid, 1, 1)[:3], threads, shared, values, trailing)  # type: ignore[arg-type]
            )
            aligned += range(at, at + step.buffers)
            small += range(at + step.buffers, at + values)
            at += values
        runs.append(LaunchRun(bound, address, aligned, small))
        names.append([step["kernel"] for step in steps])
    bind_runs(namespace, runs, names, run_object, launch_run, stream, device_index, driver_message)
    namespace.update(fuseopt_guard_failed=GUARD_FAILED, fuseopt_module=module)
    code = compile(form["source"], f"<fuseopt triton runs {form['name']}>", "exec")
    exec(code, namespace)  # noqa: S102 - source printed by fuseopt, names generated
    return namespace[form["name"]]


__all__ = [
    "KNOWN_TRITON",
    "RunFormUnavailable",
    "RunStep",
    "TritonRunLaunches",
    "bind_run_host",
    "kernel_parameters",
    "print_run_host",
]
