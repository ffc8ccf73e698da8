"""`-t cuda`: tile IR printed as one self-contained CUDA C++ translation unit per kernel.

Each `tile.kernel` becomes a `.cu` file holding, in order: a comment with the kernel's
schedule and launch configuration (grid, threads, dynamic shared memory), the `fo_`
helpers (`prelude`), `<mma.h>` when it uses tensor cores, its constant tables, the
`extern "C" __global__` kernel (`kernel_emitter`), and a small host launcher
`launch_<kernel>(buffers..., stream)` outside NVRTC, so the file builds with plain
`nvcc` and no fuseopt. Host functions are not printed: the runtime runs them from
the IR (allocations, views, launches, library GEMMs). Every C identifier is generated
or sanitized (`names`): input text never reaches the source.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest
from typing import IO

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType, ModuleOp, TensorType
from xdsl.utils.target import Target

from fuseopt.backends.cuda import op_table
from fuseopt.backends.cuda.emission_order import written_params
from fuseopt.backends.cuda.kernel_emitter import KernelEmitter
from fuseopt.backends.cuda.names import NameTable
from fuseopt.backends.cuda.prelude import CP_ASYNC, PRELUDE, WMMA_INCLUDE
from fuseopt.backends.cuda.whole_tensor import print_scan_kernel, print_whole_tensor
from fuseopt.diagnostics import error_at, op_location
from fuseopt.dialects import nn, tile
from fuseopt.passes.generalize_sizes import SizeDependentLowering

STATIC_SMEM = 48 * 1024
"""Dynamic shared memory a kernel gets without opting in (cudaFuncSetAttribute)."""


@dataclass(frozen=True)
class CudaKernel:
    """One printed kernel: names, its `.cu` source and launch configuration.

    `grid` is None when the launch's grid (from `tile.launch`) is used, or the grid
    the printer chose (element-parallel kernels).
    """

    ir_name: str
    c_name: str
    source: str
    threads: int
    smem_bytes: int
    grid: tuple[int, ...] | None
    schedule: str
    ops: tuple[str, ...]
    params: tuple[str, ...] = ()
    sizes: tuple[tuple[int, int], ...] = ()
    """(buffer argument, dim) of each dynamic dim (`?`) the kernel takes after its
    pointers, in order (`params` ends with their `long long` types)."""

    @property
    def file_name(self) -> str:
        """The `.cu` file name (`<c_name>.cu`)."""
        return f"{self.c_name}.cu"


def _launch_grids(
    module: ModuleOp,
) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...] | None]]:
    """Per kernel, the grid of its first launch of static grid (its printed launcher's),
    and the largest grid any of its launches uses along each axis (None for a kernel
    some launch gives a grid computed per call: its program ids are not bounded)."""
    grids: dict[str, tuple[int, ...]] = {}
    bounds: dict[str, tuple[int, ...] | None] = {}
    for op in module.walk():
        if isinstance(op, tile.LaunchOp):
            name, sizes = op.kernel.root_reference.data, op.grid_sizes
            seen = bounds.get(name, ())
            if not all(isinstance(n, int) for n in sizes):  # a computed grid
                bounds[name] = None
                continue
            grids.setdefault(name, sizes)  # type: ignore[arg-type]
            if seen is not None:
                widest = zip_longest(seen, sizes, fillvalue=0)
                bounds[name] = tuple(max(a, b) for a, b in widest)  # type: ignore[type-var]
    return grids, bounds


def _host_launcher(
    k: tile.KernelOp,
    c_name: str,
    grid: tuple[int, ...],
    threads: int,
    smem: int,
    written: set[int],
    sizes: tuple[tuple[int, int], ...],
) -> str:
    """`launch_<kernel>(pointers..., sizes..., stream)`, for builds with plain nvcc; a
    kernel of dynamic size takes its `grid` too (the host computes it per call)."""
    params, args = [], []
    for i, t in enumerate(k.param_types):
        assert isinstance(t, MemRefType)
        const = "" if i in written else "const "
        params.append(f"{const}{op_table.c_type(t.element_type)}* p{i}")
        args.append(f"p{i}")
    for i, d in sizes:
        params.append(f"long long p{i}_n{d}")
        args.append(f"p{i}_n{d}")
    if sizes:
        params.append("dim3 grid")
        dims = "grid"
    else:
        dims = f"dim3({', '.join(str(g) for g in (list(grid) + [1, 1])[:3])})"
    lines = [
        "#ifndef __CUDACC_RTC__",
        f'extern "C" cudaError_t launch_{c_name}({", ".join([*params, "cudaStream_t stream"])}) {{',
    ]
    if smem > STATIC_SMEM:
        lines.append(
            f"  cudaFuncSetAttribute({c_name}, "
            f"cudaFuncAttributeMaxDynamicSharedMemorySize, {smem});"
        )
    lines += [
        f"  {c_name}<<<{dims}, dim3({threads}), {smem}, stream>>>({', '.join(args)});",
        "  return cudaGetLastError();",
        "}",
        "#endif",
    ]
    return "\n".join(lines) + "\n"


def print_kernel(
    k: tile.KernelOp,
    c_name: str,
    grid: tuple[int, ...] | None,
    grid_bound: tuple[int, ...] | None = None,
) -> CudaKernel:
    """Print one kernel as a self-contained translation unit. `grid` is the launcher's
    grid; `grid_bound` the largest grid along each axis any launch of it uses (None:
    unknown), which bounds its program ids. Buffers of dynamic size
    (`?`) are printed by the tile schedules; the whole-tensor and scan kernels, which
    pick their own grid from the sizes, refuse them (`SizeDependentLowering`, located:
    a caller compiles such a function per size)."""
    schedule = k.require_schedule()
    dynamic = any(tile.is_dynamic(t) for t in k.param_types)
    if dynamic and schedule in (tile.Schedule.WHOLE_TENSOR, tile.Schedule.SCAN):
        raise SizeDependentLowering(
            f"the cuda target prints {schedule.value} kernels over buffers of static "
            "size only; this one has dynamic sizes (?)",
            op_location(k),
        )
    ops = tuple(o.name for o in k.walk() if o.dialect_name() == "nn")
    own_grid: tuple[int, ...] | None = None
    wmma = cp_async = False
    tables: list[str] = []
    whole = print_whole_tensor(k, c_name) if schedule == tile.Schedule.WHOLE_TENSOR else None
    if schedule == tile.Schedule.SCAN and any(isinstance(o, nn.CumsumOp) for o in k.walk()):
        whole = print_scan_kernel(k, c_name)  # (a split scan's chunk sums print as tiles)
    sizes: tuple[tuple[int, int], ...] = ()
    if whole is not None:
        body, threads, blocks = whole
        smem, own_grid = 0, (blocks,)
    else:
        # a kernel of dynamic size takes its grid from its caller (`dim3 grid`): no bound
        em = KernelEmitter(k, c_name, None if dynamic else grid_bound)
        body = em.emit()
        threads, smem, wmma, tables = em.nt, em.smem_bytes, em.uses_wmma, em.constants
        cp_async, sizes = em.uses_cp_async, tuple(em.sizes)
    launch_grid = own_grid or grid or (1,) * k.grid_rank
    shown = "computed per call" if sizes else ", ".join(map(str, launch_grid))
    head = [
        f"// fuseopt CUDA kernel `{c_name}` (schedule: {schedule.value})",
        f"// launch: grid ({shown}), block ({threads}), "
        f"dynamic shared memory {smem} bytes, num_warps {k.require_int('num_warps')}",
        f"// build: nvcc -arch=sm_90 -c {c_name}.cu",
    ]
    parts = ["\n".join(head) + "\n", PRELUDE]
    if wmma:
        parts.append(WMMA_INCLUDE)
    if cp_async:
        parts.append(CP_ASYNC)
    if tables:
        parts.append("\n".join(tables) + "\n")
    parts.append(body)
    written = written_params(k)
    parts.append(_host_launcher(k, c_name, launch_grid, threads, smem, written, sizes))
    params = tuple(
        f"{'' if i in written else 'const '}{op_table.c_type(t.element_type)}*"
        for i, t in enumerate(k.param_types)
    ) + ("long long",) * len(sizes)
    return CudaKernel(
        k.sym_name.data,
        c_name,
        "\n".join(parts),
        threads,
        smem,
        own_grid,
        schedule.value,
        ops,
        params,
        sizes,
    )


def _not_lowered(f: func.FuncOp) -> bool:
    """Whether host function `f` still has tensors or nn ops (not lowered to tile IR)."""
    types = [*f.function_type.inputs.data, *f.function_type.outputs.data]
    if any(isinstance(t, TensorType) for t in types):
        return True
    return any(o.dialect_name() == "nn" and tile.enclosing_kernel(o) is None for o in f.walk())


def print_cuda(module: ModuleOp) -> list[CudaKernel]:
    """Print every `tile.kernel` of `module` (a located CompileError when one cannot be)."""
    for f in module.ops:
        if isinstance(f, func.FuncOp) and _not_lowered(f):
            raise error_at(
                f,
                "-t cuda prints tile IR, and this function is not lowered to it yet: run "
                "the standard pipeline first (fuse-opt --pipeline standard -t cuda)",
            )
    names = NameTable()
    grids, bounds = _launch_grids(module)
    out = []
    for op in module.ops:
        if isinstance(op, tile.KernelOp):
            c_name = names.fresh(op.sym_name.data, "kernel")
            while f"launch_{c_name}" in names.taken:  # another kernel's name is our launcher's
                c_name = names.fresh(c_name)
            names.taken.add(f"launch_{c_name}")
            name = op.sym_name.data
            out.append(print_kernel(op, c_name, grids.get(name), bounds.get(name)))
        elif not isinstance(op, func.FuncOp):
            raise error_at(op, f"the cuda target cannot print {op.name} at module level")
    return out


class CudaTarget(Target):
    """`-t cuda`: print each tile.kernel as a self-contained CUDA C++ translation unit."""

    name = "cuda"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        """Write every kernel's `.cu` source, then every host function as the backend
        runs it (Python: `host_function.py`), each under a `// ===== file:` banner."""
        from fuseopt.backends.cuda.host_function import print_cuda_host
        from fuseopt.dialects.tile_host import is_host_function

        kernels = print_cuda(module)
        for k in kernels:
            output.write(f"// ===== file: {k.file_name} =====\n")
            output.write(k.source)
            output.write("\n")
        by_ir = {k.ir_name: k for k in kernels}
        for op in module.ops:
            if isinstance(op, func.FuncOp) and is_host_function(op) and op.body.blocks:
                host = print_cuda_host(op, by_ir)
                output.write(f"// ===== file: {host.info.py_name}.py =====\n")
                output.write(host.source)


__all__ = ["CudaKernel", "CudaTarget", "print_cuda", "print_kernel"]
