"""CUDA C++ for `whole_tensor` kernels: one nn op on whole tensors, element-parallel.

convert-nn-to-tile emits these for ops the tiler cannot index (slice, concat,
transpose, regrouping reshape, reductions over scattered axes) as one program that
loads every operand whole. A whole tensor does not fit one thread block's registers,
so the CUDA printer gives such a kernel a grid-stride loop over output elements
instead: each thread maps its output coordinates to the operands' elements (the index
maps below) and computes the elements directly, 16 bytes of consecutive outputs per
step (one vector store) where the innermost dim allows. The launch grid is chosen by the
printer (`grid_for`), not the IR's single program.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from fuseopt.backends.cuda import op_table
from fuseopt.backends.cuda.names import NameTable
from fuseopt.dialects import nn, tile
from fuseopt.dialects.syntax import array_values

THREADS = 256
"""Threads per block of an element-parallel kernel."""
MAX_BLOCKS = 65536
"""Most blocks one element-parallel launch uses (the loop strides over the rest)."""


def grid_for(n: int) -> int:
    """Blocks of an element-parallel kernel over `n` output elements."""
    return max(1, min(MAX_BLOCKS, -(-n // THREADS)))


def _strides(shape: tuple[int, ...]) -> list[int]:
    out, acc = [0] * len(shape), 1
    for i in reversed(range(len(shape))):
        out[i] = acc
        acc *= shape[i]
    return out


def _shape(v: SSAValue) -> tuple[int, ...]:
    t = v.type
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def match(kernel: tile.KernelOp) -> tuple[Operation, dict[SSAValue, int]] | None:
    """(the nn op, its operand -> parameter index) when `kernel` is loads, one nn op and
    a store of its result into the last parameter; None otherwise."""
    args = list(kernel.body.block.args)
    loads: dict[SSAValue, int] = {}
    ops = [o for o in kernel.body.block.ops if not isinstance(o, arith.ConstantOp | tile.ReturnOp)]
    computes = [o for o in ops if not isinstance(o, tile.LoadOp | tile.StoreOp)]
    stores = [o for o in ops if isinstance(o, tile.StoreOp)]
    if len(computes) != 1 or len(stores) != 1:
        return None
    for o in ops:
        if isinstance(o, tile.LoadOp):
            if o.buffer not in args:
                return None
            loads[o.result] = args.index(o.buffer)
    op = computes[0]
    if stores[0].value is not op.results[0] or stores[0].buffer is not args[-1]:
        return None
    if any(v not in loads for v in op.operands):
        return None
    return op, loads


def _index(coords: list[str], strides: list[int]) -> str:
    return " + ".join(f"{c} * {s}LL" for c, s in zip(coords, strides, strict=True)) or "0LL"


def print_whole_tensor(kernel: tile.KernelOp, c_name: str) -> tuple[str, int, int] | None:
    """(source, threads, blocks) of the element-parallel form of `kernel`, or None
    when it is not a whole-tensor kernel of one supported op."""
    got = match(kernel)
    if got is None:
        return None
    op, param_of = got
    params = kernel.param_types
    names = NameTable()
    pnames = [names.fresh(f"p{i}") for i in range(len(params))]
    out_t = params[-1]
    assert isinstance(out_t, MemRefType)
    if isinstance(op, nn.CumsumOp):
        elem = op.results[0].type.element_type  # type: ignore[union-attr]
        return print_line_scan(_shape(op.results[0]), op.axis_value, elem, pnames, params, c_name)
    shape = _shape(op.results[0])
    n = math.prod(shape)
    coords = [f"fo_c{d}" for d in range(len(shape))]
    body: list[str] = []
    inner = 1
    for d in reversed(range(len(shape))):
        # 32-bit division where the tensor allows it (64-bit division is slow on GPUs)
        if n < 2**31 - THREADS * MAX_BLOCKS:
            body.append(f"const int {coords[d]} = (int)fo_o / {inner} % {shape[d]};")
        else:
            body.append(f"const long long {coords[d]} = fo_o / {inner}LL % {shape[d]}LL;")
        inner *= shape[d]

    def ref(v: SSAValue, idx: str) -> str:
        return f"{pnames[param_of[v]]}[{idx}]"

    ctype = op_table.c_type(out_t.element_type)
    width = 16 // op_table.element_bytes(out_t.element_type)
    reduction = isinstance(op, nn.SumOp | nn.MeanOp | nn.ReduceMaxOp | nn.ReduceMinOp)
    if reduction or not shape or shape[-1] % width:
        width = 1
    values = []
    for j in range(width):
        cs = coords if width == 1 else [*coords[:-1], f"({coords[-1]} + {j})"]
        v = _value(op, cs, shape, ref, body, "fo_o" if width == 1 else f"(fo_o + {j})")
        if v is None:
            return None
        values.append(v)
    if width == 1:
        store = [f"    {pnames[-1]}[fo_o] = ({ctype})({values[0]});"]
    else:  # `width` consecutive outputs, one 16-byte store
        store = [f"    alignas(16) {ctype} fo_r[{width}];"]
        store += [f"    fo_r[{j}] = ({ctype})({v});" for j, v in enumerate(values)]
        store += [
            f"    if (fo_aligned({pnames[-1]} + fo_o, 16)) "
            f"fo_copy_vec<{ctype}, {width}>({pnames[-1]} + fo_o, fo_r);",
            f"    else for (int fo_j = 0; fo_j < {width}; ++fo_j) "
            f"{pnames[-1]}[fo_o + fo_j] = fo_r[fo_j];",
        ]
    sig = []
    for i, t in enumerate(params):
        const = "const " if i < len(params) - 1 else ""
        sig.append(f"{const}{op_table.c_type(t.element_type)}* __restrict__ {pnames[i]}")
    step = THREADS * width
    lines = [
        f'extern "C" __global__ void __launch_bounds__({THREADS})',
        f"{c_name}({', '.join(sig)}) {{",
        f"  for (long long fo_o = ((long long)blockIdx.x * {THREADS} + threadIdx.x) * {width};",
        f"       fo_o < {n}LL; fo_o += (long long)gridDim.x * {step}) {{",
        *("    " + b for b in body),
        *store,
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n", THREADS, grid_for(n // width)


def print_scan_kernel(kernel: tile.KernelOp, c_name: str) -> tuple[str, int, int]:
    """(source, threads, blocks) of a `scan` kernel that scans (convert-nn-to-tile's
    `scan.py`): its first parameter is the input and its last the result, as [outer,
    length(, inner)], scanned along dim 1 (a split scan's partial sums in between go
    unread). Printed as `print_line_scan`: the tiled scan is not ported to CUDA."""
    params = kernel.param_types
    shape = tuple(params[0].get_shape())
    names = NameTable()
    pnames = [names.fresh(f"p{i}") for i in range(len(params))]
    return print_line_scan(shape, 1, params[-1].element_type, pnames, params, c_name)


def print_line_scan(
    shape: tuple[int, ...],
    axis: int,
    elem: Attribute,
    pnames: list[str],
    params: list,
    c_name: str,
) -> tuple[str, int, int]:
    """A scan: one thread per line along the axis (the other coordinates), summing in
    f32 (floats) or 64-bit integers and storing every prefix, rounded once. Linear
    work; the parallelism is the number of lines (a tiled scan is future work)."""
    length, inner = shape[axis], math.prod(shape[axis + 1 :])
    lines = math.prod(shape) // length if length else 0
    ck = "float" if op_table.compute_kind(elem) == "float" else "int"
    acc_t = "float" if ck == "float" else "long long"
    ctype = op_table.c_type(elem)
    x, out = pnames[0], pnames[-1]
    value = op_table.to_compute(f"{x}[fo_at]", elem, ck)
    sig = [  # every parameter (a split scan's partial sums too), the last one written
        *(
            f"const {op_table.c_type(p.element_type)}* __restrict__ {name}"
            for p, name in zip(params[:-1], pnames[:-1], strict=True)
        ),
        f"{ctype}* __restrict__ {out}",
    ]
    lines_src = [
        f'extern "C" __global__ void __launch_bounds__({THREADS})',
        f"{c_name}({', '.join(sig)}) {{",
        f"  for (long long fo_l = (long long)blockIdx.x * {THREADS} + threadIdx.x;",
        f"       fo_l < {lines}LL; fo_l += (long long)gridDim.x * {THREADS}) {{",
        f"    const long long fo_base = fo_l / {inner}LL * {length * inner}LL + fo_l % {inner}LL;",
        f"    {acc_t} fo_a = 0;",
        f"    for (long long fo_i = 0; fo_i < {length}LL; ++fo_i) {{",
        f"      const long long fo_at = fo_base + fo_i * {inner}LL;",
        f"      fo_a += {value};",
        f"      {out}[fo_at] = ({ctype})({op_table.from_compute('fo_a', elem)});",
        "    }",
        "  }",
        "}",
    ]
    return "\n".join(lines_src) + "\n", THREADS, grid_for(lines)


def _value(  # noqa: ANN001
    op: Operation, coords: list[str], shape: tuple[int, ...], ref, body: list[str], flat: str
) -> str | None:
    """C expression of the output element at `coords`, flat index `flat` (statements go
    to `body`)."""
    if isinstance(op, nn.UnaryElementwiseOp):
        return op_table.unary(op, ref(op.operands[0], flat), op.operands[0].type.element_type)  # type: ignore[union-attr]
    if isinstance(op, nn.BinaryElementwiseOp):
        t = op.operands[0].type.element_type  # type: ignore[union-attr]
        return op_table.binary(op, ref(op.operands[0], flat), ref(op.operands[1], flat), t)
    if isinstance(op, nn.CastOp):
        src = op.operands[0].type.element_type  # type: ignore[union-attr]
        return op_table.cast(ref(op.operands[0], flat), src, op.results[0].type.element_type)  # type: ignore[union-attr]
    if isinstance(op, nn.CompareOp):
        t = op.lhs.type.element_type  # type: ignore[union-attr]
        return op_table.compare(op.predicate.data, ref(op.lhs, flat), ref(op.rhs, flat), t)
    if isinstance(op, nn.SelectOp):
        c, a, b = op.operands
        return f"({ref(c, flat)} ? {ref(a, flat)} : {ref(b, flat)})"
    if isinstance(op, nn.ReshapeOp):
        return ref(op.operands[0], flat)
    if isinstance(op, nn.BroadcastOp):
        x = op.operands[0]
        xs = _shape(x)
        lead = len(shape) - len(xs)
        cs = ["0" if xs[i] == 1 else coords[lead + i] for i in range(len(xs))]
        return ref(x, _index(cs, _strides(xs)))
    if isinstance(op, nn.TransposeOp):
        x = op.operands[0]
        perm = array_values(op.attributes["permutation"])  # type: ignore[arg-type]
        xs = _strides(_shape(x))
        return ref(x, _index(coords, [xs[p] for p in perm]))
    if isinstance(op, nn.SliceOp):
        x = op.operands[0]
        start, step = array_values(op.start), array_values(op.step)
        cs = [f"({s} + {c} * {st})" for c, s, st in zip(coords, start, step, strict=True)]
        return ref(x, _index(cs, _strides(_shape(x))))
    if isinstance(op, nn.ConcatOp):
        axis = op.axis.value.data % len(shape)
        expr, base = None, 0
        parts = []
        for x in op.inputs:
            xs = _shape(x)
            cs = [f"({c} - {base})" if d == axis else c for d, c in enumerate(coords)]
            parts.append((base + xs[axis], ref(x, _index(cs, _strides(xs)))))
            base += xs[axis]
        expr = parts[-1][1]
        for bound, e in reversed(parts[:-1]):
            expr = f"({coords[axis]} < {bound} ? {e} : {expr})"
        return expr
    if isinstance(op, nn.SumOp | nn.MeanOp | nn.ReduceMaxOp | nn.ReduceMinOp):
        return _reduction(op, coords, ref, body)
    return None


def _reduction(op: Operation, coords: list[str], ref, body: list[str]) -> str:  # noqa: ANN001
    x = op.operands[0]
    xs = _shape(x)
    axes = sorted(array_values(op.axes))  # type: ignore[attr-defined]
    keep = op.keepdim is not None  # type: ignore[attr-defined]
    elem = x.type.element_type  # type: ignore[union-attr]
    ck = "float" if op_table.compute_kind(elem) == "float" else "int"
    acc_t = "float" if ck == "float" else "long long"
    kind = {nn.SumOp: "sum", nn.MeanOp: "sum", nn.ReduceMaxOp: "max", nn.ReduceMinOp: "min"}[
        type(op)
    ]
    from fuseopt.backends.cuda.reduce import COMBINE, IDENTITY

    kept = [d for d in range(len(xs)) if d not in axes]
    out_coord = {}
    if keep:
        out_coord = {d: coords[d] for d in kept}
    else:
        out_coord = {d: coords[i] for i, d in enumerate(kept)}
    red = [xs[d] for d in axes]
    count = math.prod(red)
    strides = _strides(xs)
    body.append(f"{acc_t} fo_a = {IDENTITY[(kind, ck)]};")
    body.append(f"for (long long fo_r = 0; fo_r < {count}LL; ++fo_r) {{")
    terms, inner = [], 1
    for d, size in reversed(list(zip(axes, red, strict=True))):
        terms.append(f"(fo_r / {inner}LL % {size}LL) * {strides[d]}LL")
        inner *= size
    terms += [f"{out_coord[d]} * {strides[d]}LL" for d in kept]
    v = op_table.to_compute(ref(x, " + ".join(terms)), elem, ck)
    body.append(f"  fo_a = {COMBINE[kind].format('fo_a', v)};")
    body.append("}")
    result = "fo_a"
    if isinstance(op, nn.MeanOp):
        result = f"(fo_a / {float(count)!r}f)"
    return op_table.from_compute(result, op.results[0].type.element_type)  # type: ignore[union-attr]
