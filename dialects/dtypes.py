"""Element types: the one table of their facts (bytes, PyTorch dtype, CUDA C type,
Triton type), read by the frontend, the passes' cost models and both printers.

The nn dialect (and so the FX frontend) takes f32, f16, bf16, i1 and i64 (NN_ELEMENT_TYPES);
tile IR and the printers know every width in ELEMENTS (a hand-written `memref<16xi32>`
prints 4-byte `int` elements, not 8-byte ones). A dtype outside the table is an
UnsupportedTypeError naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
)
from xdsl.ir import Attribute

if TYPE_CHECKING:
    import torch


class UnsupportedTypeError(TypeError):
    """A dtype or shape nn cannot represent (the message says which and why)."""


@dataclass(frozen=True)
class ElementInfo:
    """The facts about one element type: its name in IR, bytes per stored element (i1
    is a byte), PyTorch dtype (by name: `torch` is imported only when a dtype is asked
    for, so `fuse-opt` pass pipelines start without it), CUDA C++ storage type and
    Triton `tl` dtype."""

    name: str
    bytes: int
    torch_name: str
    c_type: str
    triton: str

    @property
    def torch(self) -> torch.dtype:
        """The PyTorch dtype (`torch.float32` for f32)."""
        import torch

        return getattr(torch, self.torch_name)


ELEMENTS: dict[str, ElementInfo] = {
    info.name: info
    for info in (
        ElementInfo("f64", 8, "float64", "double", "tl.float64"),
        ElementInfo("f32", 4, "float32", "float", "tl.float32"),
        ElementInfo("f16", 2, "float16", "__half", "tl.float16"),
        ElementInfo("bf16", 2, "bfloat16", "__nv_bfloat16", "tl.bfloat16"),
        ElementInfo("i1", 1, "bool", "bool", "tl.int1"),
        ElementInfo("i8", 1, "int8", "signed char", "tl.int8"),
        ElementInfo("i16", 2, "int16", "short", "tl.int16"),
        ElementInfo("i32", 4, "int32", "int", "tl.int32"),
        ElementInfo("i64", 8, "int64", "long long", "tl.int64"),
        ElementInfo("index", 8, "int64", "long long", "tl.int64"),
    )
}
"""Every element type the compiler knows, by its IR name."""

NN_ELEMENT_TYPES = ("f32", "f16", "bf16", "i1", "i64")
"""The element types of nn tensors (what the frontend imports; others run eagerly)."""


def element_name(t: Attribute) -> str:
    """The IR name of element type `t` (`f32`, `i32`, `index`...)."""
    if isinstance(t, Float32Type):
        return "f32"
    if isinstance(t, Float16Type):
        return "f16"
    if isinstance(t, BFloat16Type):
        return "bf16"
    if isinstance(t, Float64Type):
        return "f64"
    if isinstance(t, IndexType):
        return "index"
    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    return str(t)


def element_info(t: Attribute) -> ElementInfo:
    """The table's entry for element type `t`, or UnsupportedTypeError."""
    info = ELEMENTS.get(element_name(t))
    if info is None:
        raise UnsupportedTypeError(f"element type {t} is not supported")
    return info


def element_bytes(t: Attribute) -> int:
    """Bytes per stored element of `t` (i1 is one byte)."""
    return element_info(t).bytes


def _ir_type(name: str) -> Attribute:
    from xdsl.dialects.builtin import bf16, f16, f32, f64

    floats = {"f64": f64, "f32": f32, "f16": f16, "bf16": bf16}
    return floats[name] if name in floats else IntegerType(int(name[1:]))


NN_DTYPES: dict[str, str] = {ELEMENTS[n].torch_name: n for n in NN_ELEMENT_TYPES}
"""PyTorch dtype name (`float32`) -> the name of its nn element type."""


def element_type(dtype: torch.dtype) -> Attribute:
    """The nn element type of `dtype`, or UnsupportedTypeError."""
    name = str(dtype).removeprefix("torch.")
    if name not in NN_DTYPES:
        raise UnsupportedTypeError(
            f"dtype {dtype} is not supported (nn has {', '.join(NN_DTYPES)})"
        )
    return _ir_type(NN_DTYPES[name])


def torch_dtype(element: Attribute) -> torch.dtype:
    """The PyTorch dtype of an element type."""
    try:
        return element_info(element).torch
    except UnsupportedTypeError:
        raise UnsupportedTypeError(f"no PyTorch dtype for element type {element}") from None
