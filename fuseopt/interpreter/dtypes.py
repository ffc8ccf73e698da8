"""How the reference interpreter stores tensors of each nn element type in NumPy.

NumPy has no bfloat16, so bf16 tensors are float32 arrays whose values are exactly
representable in bf16 (rounded to nearest even after every op). f16 uses NumPy's
float16, f32 float32, i64 int64 and i1 bool. Ops compute in float64 (or int64) and
round once into the result type, so each op is correctly rounded: an ideal oracle.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute

from fuseopt.dialects.syntax import shape_text


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float values to the nearest bf16 (ties to even); returns float32."""
    x32 = np.ascontiguousarray(x, dtype=np.float32)
    bits = x32.view(np.uint32)
    rounding = ((bits >> 16) & np.uint32(1)) + np.uint32(0x7FFF)
    rounded = ((bits + rounding) & np.uint32(0xFFFF0000)).view(np.float32)
    # ascontiguousarray makes 0-d arrays 1-d: give the result the input's shape back
    return np.where(np.isnan(x32), x32, rounded).astype(np.float32).reshape(np.shape(x))


def storage_dtype(element_type: Attribute) -> np.dtype:
    """The NumPy dtype that holds tensors of `element_type`."""
    if isinstance(element_type, Float32Type | BFloat16Type):
        return np.dtype(np.float32)
    if isinstance(element_type, Float16Type):
        return np.dtype(np.float16)
    if isinstance(element_type, Float64Type):
        return np.dtype(np.float64)
    if isinstance(element_type, IntegerType):
        return np.dtype(np.bool_) if element_type.width.data == 1 else np.dtype(np.int64)
    raise TypeError(f"the interpreter has no storage for element type {element_type}")


def to_element_type(x: Any, element_type: Attribute) -> np.ndarray:
    """Convert (and round) `x` into the storage of `element_type`.

    Float to integer truncates toward zero, as PyTorch does; anything to i1 is `!= 0`.
    """
    a = np.asarray(x)
    dtype = storage_dtype(element_type)
    if dtype == np.bool_:
        return a != 0
    if dtype == np.int64 and a.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            return np.trunc(a).astype(np.int64)
    if isinstance(element_type, BFloat16Type):
        return round_to_bf16(a.astype(np.float64))
    with np.errstate(over="ignore"):
        return a.astype(dtype)


def to_tensor(x: Any, t: TensorType) -> np.ndarray:
    """Convert an input (NumPy array, Python scalar or torch tensor) to tensor type `t`."""
    if hasattr(x, "detach"):  # a torch.Tensor: go through float32 for bf16
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        # a copy: Tensor.numpy() marks the storage it shares as never resizable again,
        # and the caller's tensors may be resized (FSDP frees unsharded parameters so)
        x = x.clone().numpy()
    a = to_element_type(np.asarray(x), t.element_type)
    expected = tuple(t.get_shape())
    if len(a.shape) != len(expected) or any(
        n >= 0 and n != got for n, got in zip(expected, a.shape, strict=True)
    ):
        raise ValueError(f"expected shape {shape_text(expected)} for {t}, got {a.shape}")
    return a


def compute_dtype(a: np.ndarray) -> np.ndarray:
    """Widen to the type ops compute in: float64 for floats, int64 for ints."""
    if a.dtype.kind == "f":
        return a.astype(np.float64)
    if a.dtype == np.bool_:
        return a
    return a.astype(np.int64)
