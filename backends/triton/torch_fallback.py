"""Whole-tensor kernels printed as PyTorch calls instead of Triton.

convert-nn-to-tile emits a `whole_tensor` kernel (schedule attribute) for an op the
tiler cannot index (transpose, slice, concat, a regrouping reshape, a reduction over
scattered axes): one program loads every operand whole, applies the nn op and stores
the result. Triton tiles must have power-of-two dims, so these kernels are printed as a
Python function on torch tensors with the same parameters: correct everywhere, as fast
as PyTorch's own copy kernels for the data-movement ops that reach this path.

Preconditions: the kernel body is `arith.constant`s, whole-buffer `tile.load`s, nn ops,
`tile.store`s and `tile.return` (what `whole_tensor_kernel` builds).
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType, TensorType
from xdsl.ir import Operation, SSAValue

from fuseopt.backends.python_names import NameTable
from fuseopt.backends.triton import op_table
from fuseopt.diagnostics import error_at
from fuseopt.dialects import nn, tile

UNARY: dict[type[Operation], str] = {
    nn.NegOp: "torch.neg({0})",
    nn.AbsOp: "torch.abs({0})",
    nn.ExpOp: "torch.exp({0})",
    nn.LogOp: "torch.log({0})",
    nn.Log1pOp: "torch.log1p({0})",
    nn.Exp2Op: "torch.exp2({0})",
    nn.SqrtOp: "torch.sqrt({0})",
    nn.RsqrtOp: "torch.rsqrt({0})",
    nn.ReciprocalOp: "torch.reciprocal({0})",
    nn.TanhOp: "torch.tanh({0})",
    nn.SigmoidOp: "torch.sigmoid({0})",
    nn.ReluOp: "torch.relu({0})",
    nn.SiluOp: "torch.nn.functional.silu({0})",
    nn.ErfOp: "torch.erf({0})",
    nn.SinOp: "torch.sin({0})",
    nn.CosOp: "torch.cos({0})",
    nn.AddOp: "torch.add({0}, {1})",
    nn.SubOp: "torch.sub({0}, {1})",
    nn.MulOp: "torch.mul({0}, {1})",
    nn.DivOp: "torch.div({0}, {1})",
    nn.MaxOp: "torch.maximum({0}, {1})",
    nn.MinOp: "torch.minimum({0}, {1})",
    nn.PowOp: "torch.pow({0}, {1})",
    nn.FloorOp: "torch.floor({0})",
    nn.CeilOp: "torch.ceil({0})",
    nn.TruncOp: "torch.trunc({0})",
    nn.FloorDivOp: "torch.div({0}, {1}, rounding_mode='floor')",
    nn.TruncDivOp: "torch.div({0}, {1}, rounding_mode='trunc')",
    nn.RemainderOp: "torch.remainder({0}, {1})",
    nn.FmodOp: "torch.fmod({0}, {1})",
    nn.SelectOp: "torch.where({0}, {1}, {2})",
    nn.MatmulOp: "torch.matmul({0}, {1})",
}
"""nn ops as torch expressions over operand names (others: `_special`)."""

REDUCTIONS = {
    nn.SumOp: "torch.sum",
    nn.MeanOp: "torch.mean",
    nn.ReduceMaxOp: "torch.amax",
    nn.ReduceMinOp: "torch.amin",
}
COMPARE = {"eq": "torch.eq", "ne": "torch.ne", "lt": "torch.lt", "le": "torch.le",
           "gt": "torch.gt", "ge": "torch.ge"}  # fmt: skip


def _shape(v: SSAValue) -> tuple[int, ...]:
    t = v.type
    assert isinstance(t, TensorType | MemRefType)
    return tuple(t.get_shape())


def _concat(op: nn.ConcatOp, args: list[str], out: str | None = None) -> str:
    """`torch.cat` of `args` along the op's axis (into `out` when given)."""
    into = f", out={out}" if out is not None else ""
    return f"torch.cat([{', '.join(args)}], dim={op.axis.value.data}{into})"


def _special(op: Operation, args: list[str]) -> str | None:
    """Torch expressions for nn ops with attributes."""
    if isinstance(op, nn.TransposeOp):
        return f"{args[0]}.permute{tuple(op.perm)!r}"
    if isinstance(op, nn.SliceOp):
        index = ", ".join(f"{a}:{b}:{c}" for a, b, c in op.bounds)
        return f"{args[0]}[{index}]"
    if isinstance(op, nn.ConcatOp):
        return _concat(op, args)
    if isinstance(op, nn.ReshapeOp):
        return f"{args[0]}.reshape({_shape(op.results[0])!r})"
    if isinstance(op, nn.BroadcastOp):
        return f"{args[0]}.expand({_shape(op.results[0])!r})"
    if isinstance(op, nn.CastOp):
        return f"{args[0]}.to({op_table.torch_dtype(op_table.element_type(op.results[0]))})"
    if isinstance(op, nn.CompareOp):
        return f"{COMPARE[op.predicate.data]}({args[0]}, {args[1]})"
    if isinstance(op, nn.CumsumOp):
        return f"torch.cumsum({args[0]}, dim={op.axis_value})"
    if isinstance(op, nn.GeluOp):
        approximate = {"none": '"none"', "tanh": '"tanh"'}[op.approximation]  # never raw
        return f"torch.nn.functional.gelu({args[0]}, approximate={approximate})"
    if isinstance(op, nn.MatmulOp):
        a = f"{args[0]}.mT" if op.transpose_a is not None else args[0]
        b = f"{args[1]}.mT" if op.transpose_b is not None else args[1]
        return f"torch.matmul({a}, {b})"
    reduction = REDUCTIONS.get(type(op))  # type: ignore[arg-type]
    if reduction is not None:
        assert isinstance(op, nn.ReductionOp)
        keep = op.keepdim is not None
        return f"{reduction}({args[0]}, dim={tuple(op.axis_list)!r}, keepdim={keep})"
    return None


def _computed_in_place(kernel: tile.KernelOp) -> dict[Operation, tile.StoreOp]:
    """Concatenations whose only use is a store of the whole result: `torch.cat`
    writes them into the stored buffer (`out=`), with no copy after it."""
    found: dict[Operation, tile.StoreOp] = {}
    for op in kernel.body.block.ops:
        if isinstance(op, tile.StoreOp):
            owner = op.value.owner
            uses = list(op.value.uses)
            if isinstance(owner, nn.ConcatOp) and len(uses) == 1:
                found[owner] = op
    return found


def print_torch_kernel(kernel: tile.KernelOp, py_name: str, module_names: set[str]) -> str:
    """A Python function `py_name(buf0, ...)` computing `kernel` with torch calls."""
    names = NameTable(module_names)
    params = [names.fresh(f"buf{i}") for i in range(len(kernel.body.block.args))]
    expr: dict[SSAValue, str] = dict(zip(kernel.body.block.args, params, strict=True))
    lines: list[str] = []

    def bind(v: SSAValue, hint: str, text: str) -> None:
        """Print `name = text` for `v`."""
        name = names.fresh(v.name_hint or hint)
        lines.append(f"{name} = {text}")
        expr[v] = name

    into = _computed_in_place(kernel)
    for op in kernel.body.block.ops:
        if isinstance(op, tile.ReturnOp | arith.ConstantOp) or op in into.values():
            continue
        if op in into:
            store = into[op]
            _check_origin(store, list(store.offsets))
            out = f"{expr[store.buffer]}.view({_shape(store.value)!r})"
            lines.append(_concat(op, [expr[x] for x in op.operands], out))
            continue
        if isinstance(op, tile.LoadOp):
            _check_origin(op, list(op.offsets))
            bind(op.result, "x", f"{expr[op.buffer]}.view({_shape(op.result)!r})")
        elif isinstance(op, tile.StoreOp):
            _check_origin(op, list(op.offsets))
            lines.append(f"{expr[op.buffer]}.view({_shape(op.value)!r}).copy_({expr[op.value]})")
        elif isinstance(op, nn.ConstantOp):
            bind(op.result, "c", _constant(op, params[0] if params else None))
        elif op.dialect_name() == "nn":
            args = [expr[x] for x in op.operands]
            text = _special(op, args)
            if text is None and type(op) in UNARY:
                text = UNARY[type(op)].format(*args)
            if text is None:
                raise error_at(
                    op, f"the triton target cannot print {op.name} in a whole-tensor kernel"
                )
            bind(op.results[0], op.name.split(".")[-1], text)
        else:
            raise error_at(op, f"the triton target cannot print {op.name} in a whole-tensor kernel")
    head = [
        f"def {py_name}({', '.join(params)}):",
        '    """Whole-tensor fallback, run by PyTorch (tiles would not be powers of two)."""',
    ]
    return "\n".join(head + ["    " + line for line in lines]) + "\n"


MAX_DENSE = 4096
"""Most elements of a dense constant printed as a literal list."""


def _constant(op: nn.ConstantOp, buffer: str | None) -> str:
    """A torch expression for an nn.constant (splat, or a small dense list)."""
    element = op_table.element_type(op.result)
    dtype = op_table.torch_dtype(element)
    where = f", device={buffer}.device" if buffer else ""
    shape = _shape(op.result)
    if op.splat_value is not None:
        value = op_table.literal(op.splat_value, element)
        return f"torch.full({shape!r}, {value}, dtype={dtype}{where})"
    values = op.value.get_values()  # type: ignore[union-attr]
    step = values[1] - values[0] if len(values) > 1 else 0
    if len(values) > 1 and all(b - a == step for a, b in zip(values, values[1:], strict=False)):
        # an iota (positions, say): made on the device, no host copy (CUDA-graph safe)
        start, n = op_table.literal(values[0], element), len(values)
        ramp = f"torch.arange({n}{where}, dtype=torch.float64)"
        scaled = f"({ramp} * {op_table.literal(step, element)} + {start})"
        return f"{scaled}.to({dtype}).view({shape!r})"
    if len(values) > MAX_DENSE:
        raise error_at(
            op, f"the triton target prints dense constants of at most {MAX_DENSE} elements"
        )
    items = ", ".join(op_table.literal(v, element) for v in values)
    return f"torch.tensor([{items}], dtype={dtype}{where}).view({shape!r})"


def _check_origin(op: Operation, offsets: list[SSAValue]) -> None:
    for o in offsets:
        owner = o.owner
        if not (
            isinstance(owner, arith.ConstantOp)
            and getattr(owner.value, "value", None) is not None
            and owner.value.value.data == 0  # type: ignore[union-attr]
        ):
            raise error_at(op, "a whole-tensor kernel must access its buffers at offset 0")


def is_whole_tensor(kernel: tile.KernelOp) -> bool:
    """Is `kernel` a whole-tensor fallback (printed with torch)?"""
    return kernel.require_schedule() == tile.Schedule.WHOLE_TENSOR


__all__ = ["is_whole_tensor", "print_torch_kernel"]
