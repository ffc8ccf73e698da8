"""PyTorch tensors to nn tensor types (the element types are `fuseopt.dialects.dtypes`).

A dtype outside that table (f64, i32, complex, ...) makes its nodes fall back to eager.
Shapes must be static: a symbolic size (`dynamic=True`) also falls back, so dynamic
shapes never give wrong results.
"""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import TensorType

from fuseopt.dialects.dtypes import UnsupportedTypeError, element_type


def static_shape(shape: torch.Size | tuple) -> tuple[int, ...]:
    """`shape` as plain ints, or UnsupportedTypeError when a size is symbolic."""
    dims = []
    for d in shape:
        if not isinstance(d, int):
            raise UnsupportedTypeError(f"symbolic size {d} (dynamic shapes run eagerly)")
        dims.append(d)
    return tuple(dims)


def tensor_type(value: torch.Tensor) -> TensorType:
    """The nn tensor type of a (real or fake) tensor: static shape, supported dtype."""
    if not isinstance(value, torch.Tensor):
        raise UnsupportedTypeError(f"expected a tensor, got {type(value).__name__}")
    if value.layout != torch.strided or value.is_sparse or value.is_quantized:
        raise UnsupportedTypeError(f"tensor layout {value.layout} is not supported")
    return TensorType(element_type(value.dtype), static_shape(value.shape))


def is_floating(dtype: torch.dtype) -> bool:
    """True for floating dtypes."""
    return dtype.is_floating_point
