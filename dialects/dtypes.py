"""Element types and their PyTorch dtypes: the one table both directions read.

nn has f32, f16, bf16, i1 and i64; any other dtype (f64, i32, complex, ...) is outside
the table.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IntegerType,
    bf16,
    f16,
    f32,
    i1,
    i64,
)
from xdsl.ir import Attribute

DTYPE_TABLE: dict[torch.dtype, Callable[[], Attribute]] = {
    torch.float32: lambda: f32,
    torch.float16: lambda: f16,
    torch.bfloat16: lambda: bf16,
    torch.int64: lambda: i64,
    torch.bool: lambda: i1,
}
"""PyTorch dtype -> nn element type."""


class UnsupportedTypeError(TypeError):
    """A dtype or shape nn cannot represent (the message says which and why)."""


def element_type(dtype: torch.dtype) -> Attribute:
    """The nn element type of `dtype`, or UnsupportedTypeError."""
    if dtype not in DTYPE_TABLE:
        names = ", ".join(str(d).removeprefix("torch.") for d in DTYPE_TABLE)
        raise UnsupportedTypeError(f"dtype {dtype} is not supported (nn has {names})")
    return DTYPE_TABLE[dtype]()


def torch_dtype(element: Attribute) -> torch.dtype:
    """The PyTorch dtype of an nn element type."""
    if isinstance(element, Float32Type):
        return torch.float32
    if isinstance(element, Float16Type):
        return torch.float16
    if isinstance(element, BFloat16Type):
        return torch.bfloat16
    if isinstance(element, IntegerType):
        return torch.bool if element.width.data == 1 else torch.int64
    raise UnsupportedTypeError(f"no PyTorch dtype for element type {element}")
