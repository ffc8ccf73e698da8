"""The CUDA backend's host function: tile IR's host steps planned as a list of steps
over one slot per SSA value.

`HostPlan` reads a host function (`dialects/tile_host.read_host`) once, at compile
time, and turns every step into either a `Launch` (a kernel over a grid with the
buffers of some slots) or a small closure over the slots (an allocation, a view, a
library GEMM, a call of a PyTorch op). A call then fills the input slots, allocates
the outputs (`allocate_outputs`) and runs the steps in order; nothing is looked up by
name per call.

Sizes known only at run time (`?` dims): the host function's index arithmetic
(`tile.dim` of an input, constants, `ceildiv` ...) is planned as closures that store
integers in slots; an output takes its dims from the inputs (`tile.dims_from`), a
temporary of dynamic size is allocated per call outside the workspace, and a launch
reads its grid from slots and passes each dynamic dim of its buffers after the
pointers (`Launch.sizes`). The inputs' dims that must be one size (`tile.same_size`)
are checked per call: a call that breaks the rule is an error, never a wrong result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from xdsl.dialects import func

from fuseopt.backends.cuda.printer import CudaKernel
from fuseopt.backends.host_memory import (
    contiguous_strides,
    plan_workspace,
    pointer_aliases,
    reinterpret,
)
from fuseopt.backends.library_gemm import (
    gemm_columns,
    gemm_depth,
    mm_padded,
    padded_output,
    padded_outputs,
)
from fuseopt.diagnostics import CompileError, error_at
from fuseopt.dialects import tile_host, torch_call
from fuseopt.dialects.dtypes import element_bytes, torch_dtype
from fuseopt.dialects.tile_host import read_host


@dataclass(frozen=True)
class Launch:
    """A host step: launch kernel `kernel` over `grid` with the buffers in slots `args`.

    Of a kernel of dynamic size: `grid_slots` holds, per grid dim, the slot of its
    size computed per call (None where `grid` has the number), and `sizes` the (slot,
    dim) of each dynamic dim the kernel takes after its pointers."""

    kernel: CudaKernel
    grid: tuple[int, ...]
    args: list[int]
    grid_slots: tuple[int | None, ...] = ()
    sizes: tuple[tuple[int, int], ...] = ()

    @property
    def dynamic(self) -> bool:
        """Whether the grid or the arguments depend on sizes read per call."""
        return bool(self.sizes) or any(s is not None for s in self.grid_slots)

    def resolve(self, bufs: list) -> tuple[tuple[int, ...], list[int]]:
        """(grid, argument values) of this launch: the buffers' pointers, then the
        dynamic dims of the kernel's buffers."""
        grid = self.grid
        if self.grid_slots:
            grid = tuple(
                g if s is None else bufs[s] for g, s in zip(grid, self.grid_slots, strict=True)
            )
        values = [bufs[a].data_ptr() for a in self.args]
        values += [bufs[s].shape[d] for s, d in self.sizes]
        return grid, values


Step = Callable[[list, torch.device], None] | Launch

_INDEX_OPS: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "ceildiv": lambda a, b: -(-a // b),
    "rem": lambda a, b: a % b,
    "max": max,
    "min": min,
}
"""The host index arithmetic (`tile_host.INDEX_OPS` kinds) on Python integers."""


class HostPlan:
    """The host function (`dialects/tile_host.py`'s reading of it) as a list of steps
    over a slot per SSA value (see the module docstring)."""

    def __init__(self, f: func.FuncOp, kernels: dict[str, CudaKernel]):
        host = read_host(f, "the cuda backend", "run")
        self.slots: dict[object, int] = {}
        self.inputs: list[tuple[int, tuple[int, ...], torch.dtype]] = []
        self.outputs: list[tuple[int, tuple[int, ...], torch.dtype]] = []
        """(slot, shape, dtype) per input and output; a negative dim is of dynamic size."""
        for p in host.params:
            spec = (self._slot(p.value), p.shape, torch_dtype(p.element))
            (self.outputs if p.output else self.inputs).append(spec)
        self.output_dims = {
            self._slot(p.value): tuple(
                (self._slot(host.params[i].value), d) for i, d in p.dims_from
            )
            for p in host.params
            if p.output and p.dims_from
        }
        """Per output of dynamic size: (input slot, dim) of each of its dynamic dims."""
        self.same_size = tuple((self._slot(host.params[i].value), d) for i, d in host.same_size)
        """(input slot, dim) of the input dims that must be one size."""
        self._same_size_shown = ", ".join(f"input {i} dim {d}" for i, d in host.same_size)
        self.pitches = {self._slot(v): n for v, n in padded_outputs(host).items()}
        """Output slots a padded GEMM writes whole: their row pitch (`padded_output`)."""
        self.steps: list[Step] = []
        self.launches: list[str] = []
        self.workspace = plan_workspace(host)
        self.aliases = pointer_aliases(host)
        self._typed: dict[torch.dtype, int] = {}  # the workspace viewed per dtype: slots
        if self.workspace.offsets:
            s, nbytes = self._slot("workspace"), self.workspace.nbytes

            def workspace(b: list, dev: torch.device, s=s, nbytes=nbytes) -> None:
                b[s] = torch.empty(nbytes, dtype=torch.uint8, device=dev)

            self.steps.append(workspace)
        for step in host.steps:
            self._plan(step, kernels)

    def _slot(self, v: object) -> int:
        return self.slots.setdefault(v, len(self.slots))

    def allocate_outputs(self, bufs: list, dev: torch.device) -> None:
        """Check the inputs in `bufs` are of one size where they must be, and allocate
        every output (its dynamic dims from the inputs)."""
        if self.same_size:
            sizes = [bufs[s].shape[d] for s, d in self.same_size]
            if any(n != sizes[0] for n in sizes):
                raise CompileError(
                    f"the inputs' dynamic dims must be one size, got {sizes} "
                    f"({self._same_size_shown})"
                )
        for s, shape, dt in self.outputs:
            if s in self.output_dims:
                sources = iter(self.output_dims[s])
                shape = tuple(n if n >= 0 else _size_of(bufs, *next(sources)) for n in shape)
            bufs[s] = _output(shape, dt, dev, self.pitches.get(s))

    def _plan(self, step: tile_host.Step, kernels: dict[str, CudaKernel]) -> None:
        if isinstance(step, tile_host.Index):
            self.steps.append(self._index(step))
        elif isinstance(step, tile_host.Alloc) and step.sizes:
            self.steps.append(self._dynamic_alloc(step))
        elif isinstance(step, tile_host.Alloc):
            s, shape, dt = self._slot(step.value), step.shape, torch_dtype(step.element)
            if dt not in self._typed:
                typed, whole = self._slot(("workspace", dt)), self.slots["workspace"]

                def view_as(b: list, dev: torch.device, t=typed, w=whole, dt=dt) -> None:
                    b[t] = b[w].view(dt)

                self._typed[dt] = typed
                self.steps.append(view_as)
            typed, strides = self._typed[dt], contiguous_strides(shape)
            offset = self.workspace.offsets[step.value] // element_bytes(step.element)

            def alloc(
                b: list, dev: torch.device, s=s, t=typed, shape=shape, st=strides, o=offset
            ) -> None:
                b[s] = reinterpret(b[t], shape, st, o)

            self.steps.append(alloc)
        elif isinstance(step, tile_host.View) and step.value in self.aliases:
            self.slots[step.value] = self._slot(step.source)  # kernels read the pointer
        elif isinstance(step, tile_host.View):
            self.steps.append(self._view(step))
        elif isinstance(step, tile_host.Launch):
            self.steps.append(self._launch(step, kernels[step.kernel]))
        elif isinstance(step, tile_host.TorchCall):
            self.launches.append(step.target)
            self.steps.append(self._torch_call(step))
        else:
            self.launches.append("library_gemm")
            self.steps.append(self._gemm(step))

    def _index(self, step: tile_host.Index) -> Step:
        """An index the host computes, stored as an integer in its slot."""
        s = self._slot(step.value)
        if step.kind == "constant":
            (number,) = step.args

            def constant(b: list, dev: torch.device, s=s, n=number) -> None:
                b[s] = n

            return constant
        if step.kind == "dim":
            source, dim = step.args
            src = self._slot(source)

            def dim_of(b: list, dev: torch.device, s=s, src=src, d=dim) -> None:
                b[s] = b[src].shape[d]

            return dim_of
        x, y = (self._slot(a) for a in step.args)
        fn = _INDEX_OPS[step.kind]

        def arith(b: list, dev: torch.device, s=s, x=x, y=y, fn=fn) -> None:
            b[s] = fn(b[x], b[y])

        return arith

    def _dynamic_alloc(self, step: tile_host.Alloc) -> Step:
        """A temporary of dynamic size: allocated per call, outside the workspace."""
        s, dt = self._slot(step.value), torch_dtype(step.element)
        sizes = [self._slot(v) for v in step.sizes]
        shape = step.shape

        def alloc(b: list, dev: torch.device) -> None:
            dims = iter(sizes)
            b[s] = torch.empty(
                tuple(n if n >= 0 else b[next(dims)] for n in shape), dtype=dt, device=dev
            )

        return alloc

    def _view(self, step: tile_host.View) -> Step:
        s, src, shape = self._slot(step.value), self._slot(step.source), step.shape
        dynamic = sum(1 for n in shape if n < 0)
        if step.offset is not None:  # a run of the source's elements
            if dynamic:
                raise error_at(step.value.owner, "a view at an offset of dynamic size (?)")  # type: ignore[arg-type]
            strides, offset = contiguous_strides(shape), step.offset

            def view(
                b: list, dev: torch.device, s=s, src=src, shape=shape, st=strides, o=offset
            ) -> None:
                b[s] = reinterpret(b[src], shape, st, o)

            return view
        if dynamic > 1:
            raise error_at(step.value.owner, "a view with two dims of dynamic size (?)")  # type: ignore[arg-type]
        shape = tuple(-1 if n < 0 else n for n in shape)

        def reshape(b: list, dev: torch.device, s=s, src=src, shape=shape) -> None:
            b[s] = b[src].view(shape)  # -1: the one dynamic dim

        return reshape

    def _launch(self, step: tile_host.Launch, k: CudaKernel) -> Launch:
        args = [self._slot(a) for a in step.args]
        self.launches.append(k.c_name)
        sizes = tuple((args[i], d) for i, d in k.sizes)
        if k.grid is not None or step.static_grid is not None:
            return Launch(k, tuple(k.grid or step.static_grid), args, (), sizes)  # type: ignore[arg-type]
        grid = tuple(g if isinstance(g, int) else 0 for g in step.grid)
        slots = tuple(None if isinstance(g, int) else self._slot(g) for g in step.grid)
        return Launch(k, grid, args, slots, sizes)

    def _gemm(self, step: tile_host.Gemm) -> Step:
        a, bb, c = self._slot(step.lhs), self._slot(step.rhs), self._slot(step.out)
        ta, tb = step.transpose_a, step.transpose_b
        if step.bias is not None:
            return self._bias_gemm(step, a, bb, c)
        # torch.mm / torch.bmm when the ranks allow: torch.matmul's broadcasting
        # dispatch costs several microseconds of host time per call
        shapes = [tuple(v.type.get_shape()) for v in (step.lhs, step.rhs, step.out)]  # type: ignore[attr-defined]
        product = torch.matmul
        if all(len(sh) == 2 for sh in shapes) and not ta:
            columns, depth = gemm_columns(step.op), gemm_depth(step.op)
            if (columns, depth) != (shapes[2][1], shapes[0][1]):  # N, K padded
                return self._padded_gemm(a, bb, c, tb, columns, depth)
        if all(len(sh) == 2 for sh in shapes):
            product = torch.mm
        elif all(len(sh) == 3 for sh in shapes) and len({sh[0] for sh in shapes}) == 1:
            product = torch.bmm

        def gemm(
            b: list, dev: torch.device, a=a, bb=bb, c=c, ta=ta, tb=tb, product=product
        ) -> None:
            x, y = b[a], b[bb]
            product(x.mT if ta else x, y.mT if tb else y, out=b[c])

        return gemm

    def _bias_gemm(self, step: tile_host.Gemm, a: int, b: int, c: int) -> Step:
        """`out = lhs @ rhs + bias` (rhs rank 2, no transpose_a: the verifier's rule) as
        `torch.addmm` over the rows of lhs (cuBLAS's bias epilogue), padded when N is
        not whole 16-byte vectors."""
        assert step.bias is not None
        bias, tb = self._slot(step.bias), step.transpose_b
        sa, sc = (tuple(v.type.get_shape()) for v in (step.lhs, step.out))  # type: ignore[attr-defined]
        rows = -1 if any(n < 0 for n in sa[:-1]) else math.prod(sa[:-1])
        columns, depth = gemm_columns(step.op), gemm_depth(step.op)

        def gemm(buffers: list, dev: torch.device) -> None:
            y = buffers[b].mT if tb else buffers[b]
            x, out = buffers[a].view(rows, sa[-1]), buffers[c].view(rows, sc[-1])
            if (columns, depth) != (sc[-1], sa[-1]):
                mm_padded(x, y, out, columns, buffers[bias], depth)
            else:
                torch.addmm(buffers[bias], x, y, out=out)

        return gemm

    @staticmethod
    def _padded_gemm(a: int, b: int, c: int, tb: bool, columns: int, depth: int) -> Step:
        """The 2-d library GEMM of slots a, b into c, run at N = `columns`, K = `depth`."""

        def gemm(buffers: list, dev: torch.device) -> None:
            y = buffers[b]
            mm_padded(buffers[a], y.mT if tb else y, buffers[c], columns, None, depth)

        return gemm

    def _torch_call(self, step: tile_host.TorchCall) -> Step:
        """The PyTorch op on its input slots, each result copied into its output slot."""
        ins = [self._slot(v) for v in step.ins]
        outs = [self._slot(v) for v in step.outs]

        def call(b: list, dev: torch.device) -> None:
            results = torch_call.invoke(step.target, step.call, [b[i] for i in ins], dev)
            for slot, r in zip(outs, results, strict=True):
                b[slot].copy_(r.reshape(b[slot].shape))

        return call


def _size_of(bufs: list, slot: int, dim: int) -> int:
    """The size of dim `dim` of the buffer in `slot`."""
    return bufs[slot].shape[dim]


def _output(
    shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, pitch: int | None
) -> torch.Tensor:
    """An output buffer: contiguous, or with rows `pitch` apart (`padded_output`)."""
    if pitch is None:
        return torch.empty(shape, dtype=dtype, device=device)

    def empty(size: tuple[int, ...], stride: tuple[int, ...], dt: torch.dtype) -> torch.Tensor:
        return torch.empty_strided(size, stride, dtype=dt, device=device)

    return padded_output(empty, shape, pitch, dtype)


__all__ = ["HostPlan", "Launch", "Step"]
