"""Rematerialization for nn-fuse: widening casts of function arguments, one per user.

A model in bf16 that normalizes in f32 casts its input up once and reads the f32 value
from several places: GroupNorm's statistics read it through a reshape to (N, G, -1),
its affine epilogue reads it in the input's shape. Grouping puts every op in one group,
so such a cast either joins one consumer and is written out for the others, or becomes
a kernel of its own that writes the f32 copy (twice the bytes of its input) for every
consumer to read back: three times the traffic of the norm itself (GroupNorm over
32x256x56x56 bf16 ran 227 us of kernels against torch.compile's 55).

Before grouping, each use of a widening cast of a function argument by an op that can
absorb it (an nn op other than a matmul, linear or PyTorch call) gets its own copy of
the cast, placed before the user; the original stays with the other users (or with the
first user when all absorb it). Each consumer group then reads the
narrow argument and widens it in registers; no group writes the wide copy unless the
function returns it. Only widening (or same-width) casts of arguments are copied: the
copies read no more bytes than the wide value would, and computing a cast again costs
one instruction. A cast whose only user is a reshape is moved below it
(`reshape(cast(x))` becomes `cast(reshape(x))`): the reshape of an argument is a view
the host takes, and the cast joins the reshape's consumer (GroupNorm's statistics).
"""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, BlockArgument, Operation

from fuseopt.dialects import nn
from fuseopt.dialects.dtypes import element_bytes


def _widening(cast: nn.CastOp) -> bool:
    source, result = cast.input.type, cast.result.type
    assert isinstance(source, TensorType) and isinstance(result, TensorType)
    return element_bytes(result.element_type) >= element_bytes(source.element_type)


def rematerialize_argument_casts(block: Block) -> int:
    """Give the absorbing uses of each widening cast of a block argument in `block` their
    own copies of the cast (see the module docstring); returns how many copies."""
    copies = 0
    for op in list(block.ops):
        if not (
            isinstance(op, nn.CastOp) and isinstance(op.input, BlockArgument) and _widening(op)
        ):
            continue
        uses = list(op.result.uses)
        absorbing = [u for u in uses if _absorbs(u.operation, block)]
        if len(absorbing) == len(uses):
            absorbing = absorbing[1:]  # the first keeps the original
        casts = [op]
        for use in absorbing:
            user = use.operation
            copy = op.clone()
            block.insert_op_before(copy, user)
            user.operands[use.index] = copy.result
            casts.append(copy)
            copies += 1
        for cast in casts:
            _sink_below_reshape(block, cast)
    return copies


def _absorbs(user: Operation, block: Block) -> bool:
    """Whether a copy of a cast can join `user`'s group: a top-level nn op that fuses
    elementwise prologues (not a matmul, linear or PyTorch call, whose copies would
    each be a kernel writing the wide tensor; not the return)."""
    return (
        user.parent_block() is block
        and user.name.startswith("nn.")
        and not isinstance(user, nn.MatmulOp | nn.LinearOp | nn.TorchCallOp)
    )


def _sink_below_reshape(block: Block, cast: nn.CastOp) -> None:
    """`reshape(cast(x))` -> `cast(reshape(x))` when the reshape is the cast's only user."""
    uses = list(cast.result.uses)
    if len(uses) != 1 or not isinstance(reshape := uses[0].operation, nn.ReshapeOp):
        return
    if reshape.parent_block() is not block:
        return
    source, wide = cast.input.type, reshape.result.type
    assert isinstance(source, TensorType) and isinstance(wide, TensorType)
    narrow = nn.ReshapeOp(cast.input, TensorType(source.element_type, wide.get_shape()))
    widened = nn.CastOp(narrow.result, wide)
    block.insert_ops_before([narrow, widened], reshape)
    reshape.result.replace_all_uses_with(widened.result)
    block.erase_op(reshape)
    block.erase_op(cast)
