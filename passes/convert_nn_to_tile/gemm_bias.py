"""The bias add a library GEMM can take into its epilogue (`tile.gemm ... bias`).

`nn.linear` and `addmm` reach nn as `matmul` then `add(broadcast(bias))`, and the f32
numerics policy (nn-widen-intermediates) may have put casts around the add:
`cast(add(cast(mm), cast(broadcast(b))))`. cuBLAS adds a bias vector in its epilogue
before the single rounding (`torch.addmm`, what eager's `F.linear` runs), so a library
GEMM group whose epilogue starts with that add need not launch a kernel for it: a
projection whose only epilogue is its bias launches none.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from xdsl.dialects.builtin import AnyFloat, TensorType
from xdsl.ir import Operation, SSAValue

from fuseopt.dialects import nn


@dataclass(frozen=True)
class GemmBias:
    """A matched bias epilogue: the bias vector (a group input), the value the GEMM
    with that bias computes (`mm + bias`, in the matmul's type) and the ops it
    replaces."""

    bias: SSAValue
    value: SSAValue
    ops: tuple[Operation, ...]


def _only_use(v: SSAValue) -> Operation | None:
    uses = list(v.uses)
    return uses[0].operation if len(uses) == 1 else None


def _widening(cast: Operation, element: object) -> bool:
    """Whether `cast` is the f32 policy's widening of a value of type `element` (to a
    float at least as wide: exact, so the bias epilogue's one rounding is the same)."""
    if not isinstance(cast, nn.CastOp):
        return False
    wide = cast.result.type.element_type  # type: ignore[attr-defined]
    return (
        isinstance(wide, AnyFloat)
        and isinstance(element, AnyFloat)
        and wide.bitwidth >= element.bitwidth
    )


def _through_cast(v: SSAValue, element: object) -> tuple[SSAValue, list[Operation]]:
    """`v`, or the result of its only use when that is a cast to `element`."""
    user = _only_use(v)
    if isinstance(user, nn.CastOp) and user.result.type.element_type == element:  # type: ignore[attr-defined]
        return user.result, [user]
    return v, []


def match_gemm_bias(
    mm: nn.MatmulOp, group_inputs: Collection[SSAValue], group_outputs: Collection[SSAValue]
) -> GemmBias | None:
    """The bias epilogue of `mm` in its group, or None.

    Matches `add(mm, broadcast(b))` (either operand order), each side optionally through
    a cast to the add's type, and the add's result optionally cast back to the matmul's
    type, where `b` is a group input vector of the result's last dim in the matmul's
    type, the rhs is rank 2 and lhs is not transposed (`torch.addmm`'s form), and no
    value inside the pattern is used elsewhere or leaves the group."""
    result_type = mm.result.type
    assert isinstance(result_type, TensorType)
    element, dims = result_type.element_type, result_type.get_shape()
    if mm.transpose_a is not None or len(mm.rhs.type.get_shape()) != 2:  # type: ignore[attr-defined]
        return None
    add = _only_use(mm.result)
    ops: list[Operation] = []
    if isinstance(add, nn.CastOp):
        if not _widening(add, element):
            return None
        ops.append(add)
        add = _only_use(add.result)
    if not isinstance(add, nn.AddOp):
        return None
    mm_side = ops[-1].result if ops else mm.result
    other = add.rhs if add.lhs is mm_side else add.lhs
    if other is mm_side:
        return None
    producer, consumer = other.owner, add
    if isinstance(producer, nn.CastOp):
        if _only_use(producer.result) is not add or not _widening(producer, element):
            return None
        ops.append(producer)
        producer, consumer = producer.input.owner, producer
    if not isinstance(producer, nn.BroadcastOp) or _only_use(producer.result) is not consumer:
        return None
    bias = producer.input
    bias_type = bias.type
    if (
        bias not in group_inputs
        or not isinstance(bias_type, TensorType)
        or bias_type.element_type != element
        or tuple(bias_type.get_shape()) != tuple(dims[-1:])
    ):
        return None
    ops += [producer, add]
    value, cast_back = _through_cast(add.result, element)
    if value.type != result_type:  # type: ignore[comparison-overlap]
        return None
    ops += cast_back
    inner = [mm.result, *(r for op in ops for r in op.results if r is not value)]
    if any(v in group_outputs for v in inner):
        return None
    return GemmBias(bias, value, tuple(ops))
