"""`nn.torch_call` and `tile.torch_call` in the reference interpreter: the PyTorch op
run on CPU tensors made from the interpreter's arrays (bf16 arrays are float32 arrays
of bf16 values: `fuseopt.interpreter.dtypes`), its results converted back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.ir import Attribute

from fuseopt.dialects import torch_call
from fuseopt.dialects.dtypes import torch_dtype
from fuseopt.interpreter.dtypes import to_element_type


def run_torch_call(
    target: str,
    call: str,
    arrays: Sequence[Any],
    in_elements: Sequence[Attribute],
    out_elements: Sequence[Attribute],
) -> list[np.ndarray]:
    """The results of PyTorch's `target` on `arrays` (of element types `in_elements`),
    as arrays of `out_elements`."""
    import torch

    tensors = [
        torch.from_numpy(np.array(a, copy=True)).to(torch_dtype(e))
        for a, e in zip(arrays, in_elements, strict=True)
    ]
    results = torch_call.invoke(target, call, tensors, torch.device("cpu"))
    if len(results) != len(out_elements):
        raise ValueError(
            f"{target} returned {len(results)} results, the op has {len(out_elements)}"
        )
    converted = []
    for r, e in zip(results, out_elements, strict=True):
        r = r.detach()
        r = r.float() if r.dtype == torch.bfloat16 else r
        converted.append(to_element_type(r.numpy(), e))
    return converted
