"""Checks shared by the `tile` dialect's verifiers (`dialects/tile.py`).

Each raises a `VerifyException` that says what is wrong; the op whose verifier calls
it is where `fuse-opt` locates the diagnostic.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DenseArrayBase,
    DictionaryAttr,
    FileLineColLoc,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    f64,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from fuseopt.dialects import nn
from fuseopt.dialects.syntax import DYNAMIC_SIZE, array_values, is_bool, is_float, shape_str

TILE_NN_OPS = nn.ELEMENTWISE_OPS
"""The nn ops a tiled kernel applies to tiles, besides splat `nn.constant`: the
elementwise ones, which mean the same on a tile of any shape."""

WHOLE_TENSOR = "whole_tensor"
"""The schedule of kernels that apply one arbitrary nn op to whole-tensor tiles."""
SCAN = "scan"
"""The schedule of scan kernels, which may also apply `nn.cumsum` along a tile's axis."""


def check_index_operands(values: Sequence[SSAValue], what: str) -> None:
    """Every value in `values` must be an `index`."""
    for v in values:
        if not isinstance(v.type, IndexType):
            raise VerifyException(f"{what} must be of type index, got {v.type}")


def check_mixed_sizes(static: Sequence[int], dynamic: Sequence[SSAValue], what: str) -> None:
    """Mixed sizes (`syntax.MixedSizes`): one index operand per DYNAMIC_SIZE entry, the
    other entries non-negative numbers."""
    check_index_operands(dynamic, what)
    if sum(1 for s in static if s == DYNAMIC_SIZE) != len(dynamic):
        raise VerifyException(
            f"{what} {list(static)} need one operand per dynamic entry, got {len(dynamic)}"
        )
    if any(s < 0 and s != DYNAMIC_SIZE for s in static):
        raise VerifyException(f"{what} must be non-negative, got {list(static)}")


def check_tile_box(tile: Sequence[int], buf: MemRefType, n_offsets: int, what: str) -> None:
    """A box of shape `tile` at `n_offsets` offsets must fit buffer `buf`: one offset per
    buffer dim, and the box covers at most the buffer's trailing dims."""
    rank = len(buf.get_shape())
    if n_offsets != rank:
        raise VerifyException(f"{what} takes {rank} offsets for {buf}, got {n_offsets}")
    if len(tile) > rank:
        raise VerifyException(f"a tile of rank {len(tile)} does not fit {buf}")
    if any(d < 1 for d in tile):
        raise VerifyException(f"tile dims must be positive, got {shape_str(tile)}")


def check_i64(attr: Attribute, what: str) -> None:
    """Integer attributes of tile ops are i64: `attr` must be `N : i64` or
    `array<i64: ...>` (IRDL has already checked which of the two it is)."""
    if isinstance(attr, DenseArrayBase) and attr.elt_type != i64:
        raise VerifyException(f"{what} must be an array<i64: ...>, got {attr}")
    if isinstance(attr, IntegerAttr) and attr.type != i64:
        raise VerifyException(f"{what} must be an i64 integer, got {attr.value.data} : {attr.type}")


# --------------------------------------------------------------------------- load fill


def fill_attr(value: float | int, element: Attribute) -> FloatAttr | IntegerAttr:
    """The `fill` attribute of a load of `element` tiles that reads `value` out of bounds.

    Float tiles take an f64 float (any value, inf and NaN included; rounded to the
    element type when read). Integer tiles take an integer of the element type itself:
    0 or 1 for i1, a value of the signed or unsigned range for iN (stored, like every
    MLIR integer attribute, as its signed two's-complement value). ValueError otherwise.
    """
    if is_float(element):
        try:
            return FloatAttr(float(value), f64)
        except OverflowError:
            raise ValueError(f"fill {value} does not fit f64") from None
    if not isinstance(element, IntegerType):
        raise ValueError(f"a fill needs integer or floating-point tiles, got {element}")
    if not isinstance(value, int):
        raise ValueError(f"fill for {element} tiles must be an integer, got {value}")
    low, end = (0, 2) if is_bool(element) else element.value_range()
    if not low <= value < end:
        raise ValueError(f"fill {value} is out of range for {element} ([{low}, {end - 1}])")
    return IntegerAttr(value, element)


def check_fill(attr: Attribute, element: Attribute) -> None:
    """`attr` must be the `fill` attribute kind that `fill_attr` makes for `element`."""
    if is_float(element):
        if not (isinstance(attr, FloatAttr) and attr.type == f64):
            raise VerifyException(f"fill for {element} tiles must be an f64 float, got {attr}")
    elif isinstance(element, IntegerType):
        if not (isinstance(attr, IntegerAttr) and attr.type == element):
            raise VerifyException(
                f"fill for {element} tiles must be an {element} integer, got {attr}"
            )
    else:
        raise VerifyException(f"a fill needs integer or floating-point tiles, got {element}")


def fill_value(attr: Attribute | None) -> float | int:
    """The Python value of a `fill` attribute (0 when there is none; i1 reads 0 or 1)."""
    if isinstance(attr, IntegerAttr):
        value = attr.value.data
        return int(value != 0) if is_bool(attr.type) else value
    if isinstance(attr, FloatAttr):
        return float(attr.value.data)
    return 0


# --------------------------------------------------------------------------- kernels

LAUNCH_KNOB_RANGES: dict[str, tuple[int, int, bool]] = {
    "num_warps": (1, 32, True),
    "num_stages": (1, 8, False),
    "vector_width": (1, 16, True),
    "shared_bytes": (0, 2**31 - 1, False),
}
"""The kernel attributes a backend launches with, as (least, most, power of two): warps
per program (32 warps are the 1024 threads of a CUDA block), software-pipeline stages of
the matmul K loop, elements per 16-byte access (16 one-byte elements), and bytes of
shared memory (a 32-bit launch parameter)."""


def _i64_value(kernel: Operation, name: str) -> int | None:
    """The value of `kernel`'s attribute `name`, which must be an i64 integer (None when
    it is absent)."""
    attr = kernel.attributes.get(name)
    if attr is None:
        return None
    if not isinstance(attr, IntegerAttr):
        raise VerifyException(f"{name} must be an integer, got {attr}")
    check_i64(attr, name)
    return attr.value.data


def check_launch_knobs(kernel: Operation) -> None:
    """Each attribute of LAUNCH_KNOB_RANGES on `kernel` is an i64 integer in its range."""
    for name, (least, most, power_of_two) in LAUNCH_KNOB_RANGES.items():
        value = _i64_value(kernel, name)
        if value is None:
            continue
        if power_of_two and (value < 1 or value & (value - 1)):
            raise VerifyException(
                f"{name} must be a power of two from {least} to {most}, got {value}"
            )
        if not least <= value <= most:
            kind = "a power of two" if power_of_two else "an integer"
            raise VerifyException(f"{name} must be {kind} from {least} to {most}, got {value}")


def check_tiling_attributes(kernel: Operation, n_params: int) -> None:
    """convert-nn-to-tile's and tile-promote's structured kernel attributes, where
    present: `iteration_sizes` and `block_sizes` are i64 arrays of one positive size per
    iteration dim, `reduce_dim` one of those dims, `block_k`/`group_m` positive i64,
    `candidates` a list of dictionaries of i64 integers, `row_cache` distinct parameter
    indices."""
    sizes, blocks = (kernel.attributes.get(n) for n in ("iteration_sizes", "block_sizes"))
    for name, attr in (("iteration_sizes", sizes), ("block_sizes", blocks)):
        if attr is not None:
            check_i64(attr, name)
            if any(v < 1 for v in array_values(attr)):
                raise VerifyException(f"{name} must be positive, got {list(array_values(attr))}")
    rank = len(array_values(sizes)) if sizes is not None else None
    if blocks is not None and rank is not None and len(array_values(blocks)) != rank:
        raise VerifyException(
            f"block_sizes has {len(array_values(blocks))} entries for {rank} iteration dims"
        )
    for name in ("reduce_dim", "block_k", "group_m"):
        value = _i64_value(kernel, name)
        if value is None:
            continue
        least = 0 if name == "reduce_dim" else 1
        if value < least or (name == "reduce_dim" and rank is not None and value >= rank):
            raise VerifyException(f"{name} is out of range: {value}")
    candidates = kernel.attributes.get("candidates")
    if candidates is not None:
        for c in candidates.data:  # type: ignore[attr-defined]
            if not isinstance(c, DictionaryAttr) or not all(
                isinstance(v, IntegerAttr) for v in c.data.values()
            ):
                raise VerifyException(f"candidates must be dictionaries of integers, got {c}")
    cached = kernel.attributes.get("row_cache")
    if cached is not None:
        indices = [a.value.data if isinstance(a, IntegerAttr) else None for a in cached.data]  # type: ignore[attr-defined]
        if any(i is None or not 0 <= i < n_params for i in indices) or len(set(indices)) != len(
            indices
        ):
            raise VerifyException(
                f"row_cache must list distinct parameter indices below {n_params}, got {cached}"
            )


def check_kernel_nn_ops(kernel: Operation, schedule: str | None) -> None:
    """A kernel whose schedule is not whole_tensor applies only elementwise nn ops and
    splat `nn.constant`s to its tiles: those are what the tiler emits and what both
    backends print on tiles. (A whole_tensor kernel holds one arbitrary nn op; a scan
    kernel also `nn.cumsum` along a tile's axis.)"""
    if schedule == WHOLE_TENSOR:
        return
    for op in kernel.walk():
        if op.dialect_name() != "nn" or isinstance(op, TILE_NN_OPS):
            continue
        if schedule == SCAN and isinstance(op, nn.CumsumOp):
            continue  # a scan kernel scans its tiles
        if isinstance(op, nn.ConstantOp) and op.splat_value is not None:
            continue
        what = "a dense nn.constant" if isinstance(op, nn.ConstantOp) else op.name
        kind = f'schedule "{schedule}"' if schedule is not None else "no schedule"
        raise VerifyException(
            f"{what}{_at(op)} cannot be in a kernel with {kind}: tiles take only elementwise "
            f'nn ops and splat nn.constant (other nn ops need schedule "{WHOLE_TENSOR}")'
        )


def _at(op: Operation) -> str:
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f" (at {loc.line.data}:{loc.column.data})"
    return ""


__all__ = [
    "LAUNCH_KNOB_RANGES",
    "TILE_NN_OPS",
    "WHOLE_TENSOR",
    "check_fill",
    "check_i64",
    "check_index_operands",
    "check_kernel_nn_ops",
    "check_launch_knobs",
    "check_tile_box",
    "fill_attr",
    "fill_value",
]
