"""The element-type table (dialects/dtypes.py) is right and is the one every layer reads."""

from __future__ import annotations

import pytest
import torch
from xdsl.dialects.builtin import IntegerType, bf16, f16, f32, f64, i1, i64

from fuseopt.backends.cuda import op_table as cuda_table
from fuseopt.backends.triton import op_table as triton_table
from fuseopt.dialects.dtypes import (
    ELEMENTS,
    NN_ELEMENT_TYPES,
    UnsupportedTypeError,
    element_bytes,
    element_type,
    torch_dtype,
)
from fuseopt.passes.nn_fuse import cost_model

C_SIZES = {"double": 8, "float": 4, "__half": 2, "__nv_bfloat16": 2, "bool": 1,
           "signed char": 1, "short": 2, "int": 4, "long long": 8}  # fmt: skip
"""sizeof of each C++ type on CUDA (LP64)."""

TYPES = {"f64": f64, "f32": f32, "f16": f16, "bf16": bf16, "i1": i1, "i8": IntegerType(8),
         "i16": IntegerType(16), "i32": IntegerType(32), "i64": i64}  # fmt: skip


@pytest.mark.parametrize("name", list(TYPES))
def test_each_entry_agrees_with_torch_and_c(name: str) -> None:
    t, info = TYPES[name], ELEMENTS[name]
    assert torch.empty((), dtype=info.torch).element_size() == info.bytes == element_bytes(t)
    assert C_SIZES[info.c_type] == info.bytes
    assert torch_dtype(t) == info.torch
    assert cuda_table.c_type(t) == info.c_type
    assert triton_table.triton_dtype(t) == info.triton
    assert triton_table.torch_dtype(t) == str(info.torch)
    assert triton_table.element_bits(t) == 8 * info.bytes


def test_the_frontend_takes_exactly_the_nn_types() -> None:
    for name in NN_ELEMENT_TYPES:
        assert element_type(ELEMENTS[name].torch) == TYPES[name]
    for dtype in (torch.float64, torch.int32, torch.complex64):
        with pytest.raises(UnsupportedTypeError, match="nn has float32, float16, bfloat16"):
            element_type(dtype)


def test_cost_model_and_printers_share_the_table() -> None:
    assert cost_model.element_bytes is element_bytes
    assert cuda_table.element_bytes is element_bytes
