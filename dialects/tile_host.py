"""The one reader of tile host functions, for every backend.

A host function of tile IR (what convert-nn-to-tile makes of an nn function) takes its
inputs and its `{tile.output}` buffers as memrefs and holds only buffer allocations,
views, kernel launches, library GEMMs and calls of PyTorch ops, then a `func.return`
without operands; where buffers have dynamic sizes (`?`), also the index arithmetic
that computes grids from them (`tile.dim`, `arith.constant` and `arith` on index).
`read_host` checks that and returns it as plain data, `HostFunction`: its parameters
and its steps in order. The Triton printer prints the steps as Python, the CUDA backend
plans them as launches over buffer slots, the tile interpreter checks a host function
with it before running it; anything else in a host function is one located error,
worded for the reader that met it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Attribute, SSAValue
from xdsl.utils.exceptions import VerifyException

from fuseopt.diagnostics import error_at
from fuseopt.dialects import tile


@dataclass(frozen=True)
class Buffer:
    """A buffer of the host function: its SSA value, shape and element type."""

    value: SSAValue
    shape: tuple[int, ...]
    element: Attribute


@dataclass(frozen=True)
class Param(Buffer):
    """A parameter: an input, or an `{tile.output}` the function writes. `dims_from`:
    for each dynamic dim (`?`, -1 in `shape`) of an output, in order, the (input
    parameter position, dim) whose size it takes (`tile.dims_from`)."""

    output: bool
    dims_from: tuple[tuple[int, int], ...] = ()


INDEX_OPS: dict[type, str] = {
    arith.AddiOp: "add",
    arith.SubiOp: "sub",
    arith.MuliOp: "mul",
    arith.DivUIOp: "floordiv",
    arith.DivSIOp: "floordiv",
    arith.FloorDivSIOp: "floordiv",
    arith.CeilDivUIOp: "ceildiv",
    arith.CeilDivSIOp: "ceildiv",
    arith.RemUIOp: "rem",
    arith.RemSIOp: "rem",
    arith.MaxUIOp: "max",
    arith.MaxSIOp: "max",
    arith.MinUIOp: "min",
    arith.MinSIOp: "min",
}
"""The index arithmetic a host function may hold, by the operation each computes on
sizes (non-negative numbers, so signed and unsigned forms agree)."""


@dataclass(frozen=True)
class Index:
    """An index a host function computes: `kind` "dim" (the size of dim `args[1]` of
    buffer `args[0]`), "constant" (`args[0]`), or an INDEX_OPS kind of two index
    values."""

    value: SSAValue
    kind: str
    args: tuple[SSAValue | int, ...]


@dataclass(frozen=True)
class Alloc(Buffer):
    """`tile.alloc` on the host: a temporary global buffer; `sizes`: the Index values
    of its dynamic dims (`?`, -1 in `shape`), in order."""

    sizes: tuple[SSAValue, ...] = ()


@dataclass(frozen=True)
class View(Buffer):
    """`tile.view`: `source` reinterpreted under this shape or, when `offset` is not None,
    the run of `source`'s elements that starts `offset` elements in (it may hold fewer
    elements than `source`, also at offset 0)."""

    source: SSAValue
    offset: int | None = None


@dataclass(frozen=True)
class Launch:
    """`tile.launch`: kernel `kernel` over `grid` (numbers, or Index values) with
    buffers `args`."""

    kernel: str
    grid: tuple[int | SSAValue, ...]
    args: tuple[SSAValue, ...]

    @property
    def static_grid(self) -> tuple[int, ...] | None:
        """The grid when every size is a number."""
        if all(isinstance(g, int) for g in self.grid):
            return self.grid  # type: ignore[return-value]
        return None


@dataclass(frozen=True)
class Gemm:
    """`tile.gemm`: `out = lhs @ rhs (+ bias)` (transposes as flagged) by a library
    GEMM."""

    op: tile.GemmOp
    lhs: SSAValue
    rhs: SSAValue
    out: SSAValue
    transpose_a: bool
    transpose_b: bool
    bias: SSAValue | None = None


@dataclass(frozen=True)
class TorchCall:
    """`tile.torch_call`: PyTorch's `target` on `ins` (the `call` text says how), its
    results copied into `outs`."""

    target: str
    call: str
    ins: tuple[SSAValue, ...]
    outs: tuple[SSAValue, ...]


Step = Alloc | View | Launch | Gemm | TorchCall | Index


def step_buffers(step: Step) -> tuple[SSAValue, ...]:
    """The buffers `step` reads or writes (a view: its source; an allocation: none)."""
    if isinstance(step, Launch):
        return step.args
    if isinstance(step, Gemm):
        return tuple(v for v in (step.lhs, step.rhs, step.out, step.bias) if v is not None)
    if isinstance(step, TorchCall):
        return (*step.ins, *step.outs)
    if isinstance(step, View):
        return (step.source,)
    if isinstance(step, Index) and step.kind == "dim":
        return (step.args[0],)  # type: ignore[return-value]
    return ()


@dataclass(frozen=True)
class HostFunction:
    """A host function read by `read_host`: its name, parameters and steps."""

    name: str
    params: tuple[Param, ...]
    steps: tuple[Step, ...]
    same_size: tuple[tuple[int, int], ...] = ()
    """(input position, dim) of input dims that must be one size (`tile.same_size`)."""

    @property
    def dynamic(self) -> bool:
        """Does a parameter have a dim of dynamic size, or a step compute sizes?"""
        return any(d < 0 for p in self.params for d in p.shape) or any(
            isinstance(s, Index) for s in self.steps
        )


def is_host_function(f: func.FuncOp) -> bool:
    """Is `f` a host function of tile IR: memref parameters and no results? (An nn
    function returns tensors, also one without parameters, as a region that only
    builds constants: `arange` positions, a causal mask.)"""
    signature = f.function_type
    return not signature.outputs.data and all(
        isinstance(t, MemRefType) for t in signature.inputs.data
    )


def is_tile_module(module: ModuleOp) -> bool:
    """Is `module` tile IR already: it has functions, and every one is a host function?"""
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    return bool(funcs) and all(is_host_function(f) for f in funcs)


def _buffer(v: SSAValue) -> tuple[SSAValue, tuple[int, ...], Attribute]:
    t = v.type
    assert isinstance(t, MemRefType)  # the tile verifiers check every host buffer
    return v, tuple(t.get_shape()), t.element_type


def read_host(f: func.FuncOp, backend: str, verb: str) -> HostFunction:
    """Host function `f` as data. An op a host function cannot hold, or a `func.return`
    with operands, is a CompileError located at it: "`backend` cannot `verb` OP in a
    host function" (as "the triton target cannot print ...")."""
    block = f.body.block
    try:
        sources, same_size = tile.output_dims_from(f), tile.same_size_dims(f)
    except VerifyException as e:
        raise error_at(f, str(e)) from None
    params = tuple(
        Param(*_buffer(arg), output=out, dims_from=dims)
        for arg, out, dims in zip(block.args, tile.output_params(f), sources, strict=True)
    )
    for p in params:
        _check_param_sizes(f, p, params)
    for source, dim in same_size:
        _check_input_dim(f, tile.SAME_SIZE_ATTR, source, dim, params)
    steps: list[Step] = []
    for op in block.ops:
        if isinstance(op, tile.DimOp):
            steps.append(Index(op.result, "dim", (op.buffer, op.index)))
        elif isinstance(op, arith.ConstantOp) and isinstance(op.result.type, IndexType):
            assert isinstance(op.value, IntegerAttr)
            steps.append(Index(op.result, "constant", (op.value.value.data,)))
        elif type(op) in INDEX_OPS and isinstance(op.results[0].type, IndexType):
            steps.append(Index(op.results[0], INDEX_OPS[type(op)], tuple(op.operands)))
        elif isinstance(op, tile.AllocOp):
            steps.append(Alloc(*_buffer(op.result), sizes=tuple(op.dynamic_sizes)))
        elif isinstance(op, tile.ViewOp):
            offset = None if op.offset is None else op.element_offset
            steps.append(View(*_buffer(op.result), source=op.source, offset=offset))
        elif isinstance(op, tile.LaunchOp):
            steps.append(Launch(op.kernel.root_reference.data, op.grid_sizes, tuple(op.args)))
        elif isinstance(op, tile.GemmOp):
            steps.append(
                Gemm(
                    op,
                    op.lhs,
                    op.rhs,
                    op.out,
                    op.transpose_a is not None,
                    op.transpose_b is not None,
                    op.bias,
                )
            )
        elif isinstance(op, tile.TorchCallOp):
            steps.append(TorchCall(op.target.data, op.call.data, tuple(op.ins), tuple(op.outs)))
        elif isinstance(op, func.ReturnOp):
            if op.arguments:
                raise error_at(op, "host functions return through {tile.output} buffers")
        else:
            raise error_at(op, f"{backend} cannot {verb} {op.name} in a host function")
    return HostFunction(f.sym_name.data, params, tuple(steps), same_size)


def _check_param_sizes(f: func.FuncOp, p: Param, params: tuple[Param, ...]) -> None:
    """An output of dynamic size says where each `?` comes from (`tile.dims_from`): one
    (input, dim) pair per `?`, naming a dim of an input parameter."""
    dynamic = sum(1 for d in p.shape if d < 0)
    if not p.output:
        if p.dims_from:
            raise error_at(f, f"{tile.DIMS_FROM_ATTR} is for outputs of dynamic size only")
        return
    if len(p.dims_from) != dynamic:
        raise error_at(
            f,
            f"an output of type {p.value.type} needs {tile.DIMS_FROM_ATTR} with one "
            f"(input, dim) pair per dynamic dim, got {list(p.dims_from)}",
        )
    for source, dim in p.dims_from:
        _check_input_dim(f, tile.DIMS_FROM_ATTR, source, dim, params)


def _check_input_dim(
    f: func.FuncOp, attr: str, source: int, dim: int, params: tuple[Param, ...]
) -> None:
    """(source, dim) of attribute `attr` must name a dynamic dim of an input parameter."""
    if not (0 <= source < len(params)) or params[source].output:
        raise error_at(f, f"{attr} names parameter {source}, not an input")
    if not 0 <= dim < len(params[source].shape) or params[source].shape[dim] >= 0:
        raise error_at(f, f"{attr} names dim {dim} of parameter {source}: not a dynamic dim")
