"""A host function printed as Python: one function per compiled region, for every backend.

`print_host` reads a host `func.func` of tile IR (`dialects/tile_host.read_host`) once,
at compile time, and prints the Python function that runs it: it takes the input
tensors (and the `device` to allocate on), checks the inputs' dynamic dims that must be
one size (`tile.same_size`), allocates the outputs (`torch.empty_strided`'s fast path,
their dynamic dims read from the inputs: `tile.dims_from`) and one workspace for the
temporaries (`host_memory.plan_workspace`), computes the host's index arithmetic as
plain integer expressions, makes views, calls library GEMMs through their `out=`
variants and PyTorch ops kept as calls, and returns the outputs. Nothing is looked up
per call and no list of steps is walked: every step is a line. A kernel reads a
temporary (or a view of one) through the workspace's pointer plus its offset
(`KernelPointers`), and a temporary gets a tensor, made straight from the workspace,
only where a step reads it as one (`host_memory.workspace_uses`).

How a kernel is launched is the backend's (`LaunchPrinter`): the Triton module's own
host function calls the kernel's launcher (`triton/printer.py` TritonLaunches); the
CUDA backend's host function and the Triton backend's run form (`triton/host_runs.py`)
store a run's arguments with one line (`RunValues`) and launch its kernels with one
call of a C loop (`launch_loop.py`). The printed text refers to the
helpers of `HOST_HELPERS` (`fuseopt_empty`, `fuseopt_reinterpret`) and, where a padded
GEMM runs, `PADDED_GEMM`; every other identifier is generated (`python_names`).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Protocol

from xdsl.dialects import func
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import SSAValue

from fuseopt.backends.host_memory import (
    contiguous_strides,
    plan_workspace,
    pointer_aliases,
    workspace_uses,
)
from fuseopt.backends.library_gemm import gemm_columns, gemm_depth, padded_outputs
from fuseopt.backends.python_names import NameTable
from fuseopt.diagnostics import error_at
from fuseopt.dialects import tile, tile_host, torch_call
from fuseopt.dialects.dtypes import element_bytes, torch_dtype
from fuseopt.dialects.tile_host import read_host

HOST_HELPERS = '''fuseopt_reinterpret = getattr(
    torch._C._dynamo.guards,
    "_reinterpret_tensor",
    lambda base, size, stride, offset: base.as_strided(
        size, stride, base.storage_offset() + offset
    ),
)
"""A view of a buffer: (base, size, stride, offset in elements from the base's start), a
temporary in the workspace or a run of a buffer's elements (`tile.view` at an offset)."""

fuseopt_empty = {
    kind: getattr(torch._C._dynamo.guards, f"_empty_strided_{kind}", None)
    or (
        lambda size, stride, dtype, kind=kind: torch.empty_strided(
            size, stride, dtype=dtype, device=kind
        )
    )
    for kind in ("cuda", "cpu")
}
"""Allocators of (size, stride, dtype) by device type, on the current device: PyTorch's
fast paths (what Inductor's generated code calls), torch.empty_strided without them."""
'''
"""Python defining the helpers a printed host function calls (it needs `torch`)."""

PADDED_GEMM = "fuseopt_mm_padded"
"""The name a printed host function calls `library_gemm.mm_padded` by (a Triton module
prints its source; the CUDA backend binds the function)."""


@dataclass
class HostInfo:
    """One printed host function: its Python name and input/output tensor specs."""

    ir_name: str
    py_name: str
    inputs: list[tuple[tuple[int, ...], str]]
    outputs: list[tuple[tuple[int, ...], str]]
    launches: list[str] = field(default_factory=list)
    """What each launch runs, in order: a kernel's name as the backend records it (the
    IR name on Triton, the C name on CUDA), "library_gemm", or the target of a PyTorch
    op kept as a call."""


@dataclass
class KernelPointers:
    """The data pointers of the temporaries kernels read (`host_memory.workspace_uses`),
    each a Python expression: the workspace's pointer plus the temporary's offset; and,
    for those that get no tensor on the main path, the line that makes one, for a
    launch path that needs it after all (a fallback through launchers)."""

    pointer: dict[SSAValue, str] = field(default_factory=dict)
    tensor_line: dict[SSAValue, str] = field(default_factory=dict)

    def of(self, value: SSAValue, expr: dict[SSAValue, str]) -> str:
        """The Python expression of `value`'s data pointer."""
        return self.pointer.get(value) or f"{expr[value]}.data_ptr()"

    def tensors(self, values: list[SSAValue], made: set[str]) -> list[str]:
        """Lines making the tensors of those of `values` that have none, but for the
        lines in `made` (lines already printed on the same path; the new ones join it)."""
        lines = [self.tensor_line[v] for v in values if v in self.tensor_line]
        lines = [line for line in dict.fromkeys(lines) if line not in made]
        made.update(lines)
        return lines


class RunValues:
    """The argument values of a pending run's launches (`launch_loop`), as Python
    expressions, stored by one line when the run is issued: one store into the run's
    `values` array per run, not per launch. The names the expressions read are bound
    before the run is issued and never rebound (a fallback rebinds only the tensors of
    temporaries, which no value expression reads), so storing them late reads the same."""

    def __init__(self) -> None:
        self.values: list[str] = []

    def add(self, values: list[str]) -> None:
        """Append a launch's values (its slots follow the previous launch's)."""
        self.values += values

    def store(self, run: int) -> list[str]:
        """The line storing every value of run `run` (none for a run of no values);
        the next run starts empty."""
        values, self.values = self.values, []
        if not values:
            return []
        return [f"fuseopt_run{run}_values[0:{len(values)}] = {tuple_source(values)}"]


class LaunchPrinter(Protocol):
    """How a backend prints its kernel launches into a host function."""

    def tensor_args(self, step: tile_host.Launch) -> Collection[int]:
        """The positions of `step`'s arguments its printed lines read as tensors (a
        launcher call, a size read from a shape); the others only as data pointers
        (`KernelPointers.of`)."""
        ...

    def launch(
        self,
        step: tile_host.Launch,
        expr: dict[SSAValue, str],
        local: NameTable,
        pointers: KernelPointers,
    ) -> tuple[list[str], str]:
        """Lines launching `step` (buffers and sizes are the Python expressions `expr`
        gives; a temporary's data pointer is `pointers.of`'s expression, and one made
        without a tensor has its tensor line in `pointers`), and the name the launch
        is recorded under (`HostInfo.launches`)."""
        ...

    def flush(self, local: NameTable) -> list[str]:
        """Lines to print before a library call, a PyTorch call or the return: launches
        a backend batches must have been issued by then."""
        ...


def buffer_spec(t: object) -> tuple[tuple[int, ...], str]:
    """(shape, torch dtype as source text) of a memref type."""
    assert isinstance(t, MemRefType)
    return tuple(t.get_shape()), str(torch_dtype(t.element_type))


def print_host(
    f: func.FuncOp, names: NameTable, target: str, launches: LaunchPrinter
) -> tuple[str, HostInfo]:
    """The Python source of host function `f` (module doc) and its description.

    `names` holds the enclosing module's names (the function's own name joins them);
    `target` names the backend in errors. Raises a located CompileError for a host
    function the printed form cannot run (a view of two dynamic dims, say).
    """
    host = read_host(f, target, "print")
    py_name = names.fresh(host.name, "host")
    local = NameTable(names.taken)
    expr: dict[SSAValue, str] = {}
    params, body, outputs = [], [], []
    info = HostInfo(host.name, py_name, [], [])
    plan = plan_workspace(host)
    aliases = pointer_aliases(host)
    empty = local.fresh("empty")
    dynamic_allocs = any(isinstance(s, tile_host.Alloc) and s.sizes for s in host.steps)
    if plan.offsets or dynamic_allocs or any(p.output for p in host.params):
        body.append(f"{empty} = fuseopt_empty[device.type]")
    pitches = padded_outputs(host)
    for p in host.params:
        if not p.output:
            name = local.fresh(p.value.name_hint or f"in{len(params)}")
            params.append(name)
            info.inputs.append(buffer_spec(p.value.type))
            expr[p.value] = name
    for p in host.params:
        if p.output:
            spec = buffer_spec(p.value.type)
            name = local.fresh(p.value.name_hint or f"out{len(outputs)}")
            sizes = iter(p.dims_from)
            shape = tuple(
                n if n >= 0 else _size_expr(expr, host.params, *next(sizes)) for n in spec[0]
            )
            allocation = _output_allocation(empty, shape, spec[1], pitches.get(p.value))
            body.append(f"{name} = {allocation}")
            outputs.append(name)
            info.outputs.append(spec)
            expr[p.value] = name
    if host.same_size:  # the inputs' dynamic dims are one size: a call breaking that fails
        sizes = [f"{expr[host.params[p].value]}.shape[{d}]" for p, d in host.same_size]
        body[:0] = [
            f"if not ({' == '.join(sizes)}):",
            f'    raise ValueError(f"the dynamic dims {", ".join(sizes)} must be one size, '
            f'got {{({", ".join(sizes)})}}")',
        ]
    workspace = local.fresh("workspace")
    if plan.offsets:
        body.append(f"{workspace} = {empty}(({plan.nbytes},), (1,), torch.uint8)")
    uses = workspace_uses(host, plan, aliases, launches.tensor_args)
    pointers = KernelPointers()
    workspace_pointer = local.fresh("workspace_pointer")
    if uses.pointers:
        body.append(f"{workspace_pointer} = {workspace}.data_ptr()")
    typed: dict[str, str] = {}  # dtype -> the workspace viewed as that dtype

    def workspace_view(buffer: tile_host.Alloc | tile_host.View) -> None:
        """Name `buffer`, a temporary or a view of one: its tensor made from the
        workspace where a step reads it so, its pointer the workspace's plus its
        offset where a kernel reads only that (and its tensor for a fallback)."""
        shape, dtype = buffer_spec(buffer.value.type)
        hint = "tmp" if isinstance(buffer, tile_host.Alloc) else "view"
        name = expr[buffer.value] = local.fresh(buffer.value.name_hint or hint)
        nbytes = uses.offsets[buffer.value]
        elements = nbytes // element_bytes(buffer.element)
        place = f"{shape!r}, {contiguous_strides(shape)!r}, {elements}"
        if buffer.value in uses.pointers:
            pointers.pointer[buffer.value] = workspace_pointer + (f" + {nbytes}" if nbytes else "")
        if buffer.value in uses.tensors:
            if dtype not in typed:
                typed[dtype] = local.fresh(f"{workspace}_{dtype.removeprefix('torch.')}")
                body.append(f"{typed[dtype]} = {workspace}.view({dtype})")
            body.append(f"{name} = fuseopt_reinterpret({typed[dtype]}, {place})")
        elif buffer.value in uses.pointers:
            pointers.tensor_line[buffer.value] = (
                f"{name} = fuseopt_reinterpret({workspace}.view({dtype}), {place})"
            )

    for step in host.steps:
        if isinstance(step, tile_host.Index):
            expr[step.value] = local.fresh(step.value.name_hint or "n")
            body.append(f"{expr[step.value]} = {_index_expr(step, expr)}")
        elif isinstance(step, tile_host.Alloc) and step.sizes:  # per call, not in the workspace
            expr[step.value] = local.fresh(step.value.name_hint or "tmp")
            sizes = iter(step.sizes)
            shape_of = tuple(n if n >= 0 else expr[next(sizes)] for n in step.shape)
            dtype = buffer_spec(step.value.type)[1]
            body.append(f"{expr[step.value]} = {_output_allocation(empty, shape_of, dtype, None)}")
        elif isinstance(step, tile_host.View) and step.value in aliases:
            expr[step.value] = expr[step.source]  # kernels read the pointer: no view
            if step.source in pointers.pointer:
                pointers.pointer[step.value] = pointers.pointer[step.source]
            if step.source in pointers.tensor_line:
                pointers.tensor_line[step.value] = pointers.tensor_line[step.source]
        elif isinstance(step, tile_host.Alloc | tile_host.View) and step.value in uses.offsets:
            workspace_view(step)
        elif isinstance(step, tile_host.Alloc):
            pass  # nothing uses it: no bytes, no tensor
        elif isinstance(step, tile_host.View):
            expr[step.value] = local.fresh(step.value.name_hint or "view")
            body.append(f"{expr[step.value]} = {_view_expr(step, expr)}")
        elif isinstance(step, tile_host.Launch):
            lines, launched = launches.launch(step, expr, local, pointers)
            body += lines
            info.launches.append(launched)
        elif isinstance(step, tile_host.TorchCall):
            body += launches.flush(local)
            body += _torch_call_lines(step, expr, local)
            info.launches.append(step.target)
        else:
            body += launches.flush(local)
            body.append(_gemm_call(step.op, expr))
            info.launches.append("library_gemm")
    body += launches.flush(local)
    body.append(f"return ({''.join(o + ', ' for o in outputs)})")
    head = [
        f"def {py_name}({''.join(p + ', ' for p in params)}*, device):",
        f'    """Run the host code: {len(info.launches)} launch(es); returns the outputs."""',
    ]
    return "\n".join(head + ["    " + line for line in body]) + "\n", info


_INDEX_EXPRESSIONS = {
    "add": "{} + {}",
    "sub": "{} - {}",
    "mul": "{} * {}",
    "floordiv": "{} // {}",
    "ceildiv": "-(-{} // {})",
    "rem": "{} % {}",
    "max": "max({}, {})",
    "min": "min({}, {})",
}
"""Python for each kind of host index arithmetic (`tile_host.INDEX_OPS`)."""


def _index_expr(step: tile_host.Index, expr: dict[SSAValue, str]) -> str:
    """Python computing a host index: a tensor's size, a number, or arithmetic."""
    args = [expr[a] if isinstance(a, SSAValue) else str(a) for a in step.args]
    if step.kind == "dim":
        return f"{args[0]}.shape[{args[1]}]"
    if step.kind == "constant":
        return args[0]
    return _INDEX_EXPRESSIONS[step.kind].format(*args)


def _view_expr(step: tile_host.View, expr: dict[SSAValue, str]) -> str:
    """Python making view `step` of its source: a run of its elements at an offset, or
    a reshape (-1 for the one dim of dynamic size)."""
    shape, _ = buffer_spec(step.value.type)
    dynamic = sum(1 for n in shape if n < 0)
    if step.offset is not None:
        if dynamic:
            raise error_at(step.value.owner, "a view at an offset of dynamic size (?)")  # type: ignore[arg-type]
        return (
            f"fuseopt_reinterpret({expr[step.source]}, {shape!r}, "
            f"{contiguous_strides(shape)!r}, {step.offset})"
        )
    if dynamic > 1:
        raise error_at(step.value.owner, "a view with two dims of dynamic size (?)")  # type: ignore[arg-type]
    return f"{expr[step.source]}.view({_view_shape(shape)})"


def _size_expr(
    expr: dict[SSAValue, str], params: tuple[tile_host.Param, ...], source: int, dim: int
) -> str:
    """Python for dim `dim` of input parameter `source` (an output's dynamic size)."""
    return f"{expr[params[source].value]}.shape[{dim}]"


def _view_shape(shape: tuple[int, ...]) -> str:
    """A `view` argument for `shape`: -1 for its dynamic dim (at most one)."""
    return repr(tuple(-1 if n < 0 else n for n in shape))


def tuple_source(items: list[str]) -> str:
    """A Python tuple of the expressions `items`."""
    return f"({''.join(i + ', ' for i in items)})"


def _output_allocation(
    empty: str, shape: tuple[int | str, ...], dtype: str, pitch: int | None
) -> str:
    """The expression allocating an output of `shape` (numbers, or Python expressions of
    dynamic sizes) and `dtype`: contiguous, or the first columns of [rows, `pitch`] rows
    where a padded GEMM writes it whole (`library_gemm.padded_output`)."""
    if any(isinstance(n, str) for n in shape):
        sizes = [str(n) for n in shape]
        strides = [str(s) for s in tile.row_major_exprs(shape)]
        if pitch is not None:
            rows = " * ".join(sizes[:-1]) or "1"
            return (
                f"{empty}(({rows}, {pitch}), ({pitch}, 1), {dtype})[:, :{sizes[-1]}]"
                f".view({tuple_source(sizes)})"
            )
        return f"{empty}({tuple_source(sizes)}, {tuple_source(strides)}, {dtype})"
    if pitch is None:
        return f"{empty}({shape!r}, {contiguous_strides(shape)!r}, {dtype})"  # type: ignore[arg-type]
    rows = math.prod(shape[:-1])
    return f"{empty}(({rows}, {pitch}), ({pitch}, 1), {dtype})[:, :{shape[-1]}].view({shape!r})"


def _torch_call_lines(
    step: tile_host.TorchCall, expr: dict[SSAValue, str], local: NameTable
) -> list[str]:
    """The PyTorch op called on its input buffers, each result copied into its buffer
    (`copy_` keeps the buffer's shape and dtype; `view` first where the op's result
    has another shape of the same size)."""
    call = torch_call.python_call(step.target, step.call, [expr[v] for v in step.ins], "device")
    result = local.fresh("called")
    lines = [f"{result} = {call if len(step.outs) > 1 else f'({call},)'}"]
    for i, out in enumerate(step.outs):
        shape, _ = buffer_spec(out.type)
        size = f"{expr[out]}.shape" if any(n < 0 for n in shape) else repr(shape)
        lines.append(f"{expr[out]}.copy_({result}[{i}].reshape({size}))")
    return lines


def _gemm_call(op: tile.GemmOp, expr: dict[SSAValue, str]) -> str:
    """The library GEMM as the most direct torch call: `torch.mm` (rows of a batched
    left operand folded into M, views only), `torch.bmm` for batches of one size, else
    `torch.matmul` (whose broadcasting dispatch costs microseconds of host time);
    transposes are `.mT` views that cuBLAS reads as they are (no copy); a bias is
    `torch.addmm`'s (cuBLAS's epilogue). A 2-d product whose N or K is not whole
    16-byte vectors runs padded (`backends/library_gemm.py`)."""
    a, b, c = expr[op.lhs], expr[op.rhs], expr[op.out]
    ta, tb = op.transpose_a is not None, op.transpose_b is not None
    sa, sb, sc = (buffer_spec(v.type)[0] for v in (op.lhs, op.rhs, op.out))
    b_expr = f"{b}.mT" if tb else b
    if len(sb) == 2 and not ta:
        a2, c2 = a, c
        if len(sa) != 2:
            rows = math.prod(sa[:-1]) if all(n >= 0 for n in sa[:-1]) else -1
            a2, c2 = f"{a}.view({rows}, {sa[-1]})", f"{c}.view({rows}, {sc[-1]})"
        bias = expr[op.bias] if op.bias is not None else None
        columns, depth = gemm_columns(op), gemm_depth(op)
        if (columns, depth) != (sc[-1], sa[-1]):  # N, K padded: cuBLAS's aligned kernels
            tail = f", {bias}" if bias else ""
            if depth != sa[-1]:
                tail = f", {bias or None}, depth={depth}"
            return f"{PADDED_GEMM}({a2}, {b_expr}, {c2}, {columns}{tail})"
        if bias:  # cuBLAS's bias epilogue
            return f"torch.addmm({bias}, {a2}, {b_expr}, out={c2})"
        return f"torch.mm({a2}, {b_expr}, out={c2})"
    a_expr = f"{a}.mT" if ta else a
    if len(sa) == len(sb) == len(sc) == 3 and sa[0] == sb[0] == sc[0] >= 0:
        return f"torch.bmm({a_expr}, {b_expr}, out={c})"
    return f"torch.matmul({a_expr}, {b_expr}, out={c})"


__all__ = [
    "HOST_HELPERS",
    "PADDED_GEMM",
    "HostInfo",
    "KernelPointers",
    "LaunchPrinter",
    "RunValues",
    "buffer_spec",
    "print_host",
    "tuple_source",
]
