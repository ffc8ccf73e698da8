"""Memory layouts at the edges of a compiled region: the strides PyTorch traced.

A compiled region computes into contiguous buffers, but the ops around it (eager
fallbacks, the next graph after a graph break or a DDP bucket split, the user's own code)
were traced with the strides PyTorch's own ops would have produced: a transposed
attention output, a slice of a fused projection. Handing them a contiguous tensor of the
same shape breaks every op that depends on strides (`view` fails: "view size is not
compatible with input tensor's size and stride"). So the region keeps each edge's
*dimension order*, the order of its dimensions from the largest stride to the smallest:

- an output traced in another order is computed in that order into a contiguous buffer
  (an `nn.transpose` before the return, which usually cancels the transpose that made
  it) and returned re-described in the logical dims (sizes and strides over the same
  buffer, no copy): its strides have the traced order, dense;
- an input traced as a permutation of a dense layout is passed as that dense view
  (`Tensor.permute`, contiguous when the runtime strides are the traced ones, no copy)
  and transposed back inside the region, where the transpose fuses into the loads.

A view valid on the traced strides is valid on the dense strides of the same order.
Size-1 and broadcast dimensions keep their place (their strides say nothing about the
layout). Edges whose traced
order is the logical one (the common case) cost nothing at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.fx import GraphModule, Node
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType
from xdsl.ir import Block, Operation, SSAValue

from fuseopt.backends.host_memory import reinterpret
from fuseopt.dialects import nn
from fuseopt.dialects.syntax import int_array
from fuseopt.frontends.fx.ops_shape import contiguous_strides

Order = tuple[int, ...]
"""A permutation of a tensor's dims: ``order[k]`` is the dim with the k-th largest stride."""


def dimension_order(t: torch.Tensor) -> Order:
    """The dims of `t` from the largest stride to the smallest (ties in logical order).
    Size-1 and broadcast (stride-0) dims keep their logical positions: their stride says
    nothing about where they lie, and a broadcast dim moved innermost would take the unit
    stride from the dim that had it (kernels such as PyTorch's CPU flash attention read
    the last dim as unit-stride and go wrong otherwise)."""
    dims = range(t.dim())

    def fixed(d: int) -> bool:
        return t.shape[d] == 1 or t.stride(d) == 0

    ranked = sorted((d for d in dims if not fixed(d)), key=lambda d: -t.stride(d))
    slots = iter(ranked)  # the stable sort keeps ties in logical order
    return tuple(d if fixed(d) else next(slots) for d in dims)


def is_dense(t: torch.Tensor, order: Order) -> bool:
    """Whether `t`'s strides are exactly those of a contiguous tensor permuted by `order`
    (no gaps, no overlap), ignoring size-1 dims."""
    expected = 1
    for d in reversed(order):
        if t.shape[d] == 1:
            continue
        if t.stride(d) != expected:
            return False
        expected *= t.shape[d]
    return True


def inverse(order: Order) -> Order:
    """The permutation undoing `order`."""
    back = [0] * len(order)
    for k, d in enumerate(order):
        back[d] = k
    return tuple(back)


def _identity(order: Order) -> bool:
    return order == tuple(range(len(order)))


@dataclass(frozen=True)
class RegionLayouts:
    """The non-logical dimension orders of a region's inputs and outputs (None where an
    edge is passed in logical order); for each reordered output, the traced shape and the
    dense strides of its order it is re-described with (`restrides`)."""

    inputs: tuple[Order | None, ...]
    outputs: tuple[Order | None, ...]
    restrides: tuple[tuple[tuple[int, ...], tuple[int, ...]] | None, ...]

    @property
    def trivial(self) -> bool:
        """Whether every edge is in logical order (nothing to do at run time)."""
        return all(o is None for o in (*self.inputs, *self.outputs))


def _example(node: object) -> torch.Tensor | None:
    """The traced value of `node` when it is a tensor of rank 2 or more with static
    sizes and strides (a symbolic one keeps the logical order: regions are static)."""
    val = node.meta.get("val") if isinstance(node, Node) else None
    if not isinstance(val, torch.Tensor) or val.dim() < 2:
        return None
    static = all(isinstance(n, int) for n in (*val.shape, *val.stride()))
    return val if static else None


def region_layouts(gm: GraphModule) -> RegionLayouts:
    """The traced dimension orders of `gm`'s placeholders and outputs: an input counts
    only when dense in its order (a gapped input is copied contiguous by the runtime, as
    before); an output whenever its order is not the logical one."""
    inputs: list[Order | None] = []
    outputs: list[Order | None] = []
    restrides: list[tuple[tuple[int, ...], tuple[int, ...]] | None] = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            t = _example(node)
            order = dimension_order(t) if t is not None else None
            dense = order is not None and not _identity(order) and is_dense(t, order)
            inputs.append(order if dense else None)
        elif node.op == "output":
            items = node.args[0] if isinstance(node.args[0], list | tuple) else [node.args[0]]
            for item in items:
                t = _example(item)
                order = dimension_order(t) if t is not None else None
                if t is None or order is None or _identity(order):
                    outputs.append(None)
                    restrides.append(None)
                else:
                    outputs.append(order)
                    restrides.append((tuple(t.shape), _strides_of(tuple(t.shape), order)))
    return RegionLayouts(tuple(inputs), tuple(outputs), tuple(restrides))


def _transpose(value: SSAValue, perm: Order) -> nn.TransposeOp:
    t = value.type
    assert isinstance(t, TensorType)
    shape = [t.get_shape()[p] for p in perm]
    return nn.TransposeOp(
        value, TensorType(t.element_type, shape), {"permutation": int_array(perm)}
    )


InputEdge = tuple[TensorType, Callable[[SSAValue], Operation]]
"""A rewritten input: the argument's new type, and the op making the old value from it."""


def rewrite_edges(
    module: ModuleOp,
    inputs: Callable[[int, TensorType], InputEdge | None],
    outputs: Callable[[int, SSAValue], Operation | None],
) -> None:
    """Rewrite the edges of the function of `module`: input `i` of type `t` becomes an
    argument of the type `inputs(i, t)` gives, followed by its op (None: unchanged);
    output `i` is returned through the op `outputs(i, value)` gives (None: as it is).
    The function's type follows."""
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    block: Block = fn.body.block
    for i, arg in enumerate(list(block.args)):
        t = arg.type
        assert isinstance(t, TensorType)
        edge = inputs(i, t)
        if edge is None:
            continue
        stored = block.insert_arg(edge[0], arg.index)
        logical = edge[1](stored)
        block.insert_op_before(logical, block.first_op) if block.first_op else block.add_op(logical)
        arg.replace_all_uses_with(logical.results[0])
        block.erase_arg(arg)
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    values = list(ret.arguments)
    for i, value in enumerate(list(values)):
        op = outputs(i, value)
        if op is not None:
            block.insert_op_before(op, ret)
            values[i] = op.results[0]
    block.insert_op_before(func.ReturnOp(*values), ret)
    block.erase_op(ret)
    fn.function_type = FunctionType.from_lists(
        [a.type for a in block.args], [v.type for v in values]
    )


def apply_layouts(module: ModuleOp, layouts: RegionLayouts) -> None:
    """Rewrite the imported region function of `module` to take each permuted input in
    its dense order and return each permuted output in its traced order (see the module
    doc); the types of the function change accordingly."""

    def stored(i: int, t: TensorType) -> InputEdge | None:
        order = layouts.inputs[i]
        if order is None:
            return None
        shape = [t.get_shape()[d] for d in order]
        return TensorType(t.element_type, shape), lambda v: _transpose(v, inverse(order))

    def traced(i: int, value: SSAValue) -> Operation | None:
        order = layouts.outputs[i]
        return None if order is None else _transpose(value, order)

    rewrite_edges(module, stored, traced)


def _strides_of(shape: tuple[int, ...], order: Order) -> tuple[int, ...]:
    """The strides of a `shape` tensor stored densely in dimension order `order`."""
    dense = contiguous_strides([shape[d] for d in order])
    return tuple(dense[k] for k in inverse(order))


def with_layouts(
    fn: Callable[..., Sequence[torch.Tensor]], layouts: RegionLayouts, dynamic: bool = False
) -> Callable[..., Sequence[torch.Tensor]]:
    """`fn` (the compiled, rewritten region) called with permuted inputs in their dense
    order and its outputs re-described in the logical dims (`layouts.restrides`). No
    copies. `fn` itself when every edge is in logical order.

    An output is re-described over its own buffer (`reinterpret`, as Inductor's
    generated code does), not made with `Tensor.permute`: a permute result is a view, and
    autograd refuses in-place updates of a view returned from a custom Function or made
    under no_grad (a residual `h += ...` after a graph break).

    `dynamic`: the region is of a symbolic size, so an output's logical sizes and strides
    are read from the result (its stored dims, permuted back), not the traced ones."""
    if layouts.trivial:
        return fn
    into, back = layouts.inputs, layouts.restrides
    unmoved = [None if o is None else inverse(o) for o in layouts.outputs]

    def restride(r: torch.Tensor, b: tuple, inv: Sequence[int]) -> torch.Tensor:
        if dynamic:
            shape = tuple(r.shape[k] for k in inv)
            return reinterpret(r, shape, tuple(r.stride(k) for k in inv), 0)
        # dense unless a backend padded its rows (a padded GEMM's output): then the
        # logical dim d has the stride of stored dim inv[d]
        strides = b[1] if r.is_contiguous() else tuple(r.stride(k) for k in inv)
        return reinterpret(r, b[0], strides, 0)  # the offset is relative to r's own

    def call(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        moved = [a if o is None else a.permute(o) for a, o in zip(args, into, strict=True)]
        results = fn(*moved)
        return tuple(
            r if b is None else restride(r, b, inv)
            for r, b, inv in zip(results, back, unmoved, strict=True)
        )

    return call
