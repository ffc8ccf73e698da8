"""Helpers for tests that run small nn programs: MLIR text builders and comparisons."""

from __future__ import annotations

import numpy as np
import torch

import fuseopt

MLIR_DTYPE = {
    torch.float32: "f32",
    torch.bfloat16: "bf16",
    torch.float16: "f16",
    torch.int64: "i64",
    torch.bool: "i1",
}  # noqa: E501


def tensor_type(t: torch.Tensor) -> str:
    """The MLIR tensor type of a torch tensor, e.g. `tensor<4x8xbf16>`."""
    dims = "".join(f"{d}x" for d in t.shape)
    return f"tensor<{dims}{MLIR_DTYPE[t.dtype]}>"


def single_op_program(op_text: str, args: list[torch.Tensor], result_type: str) -> str:
    """A `func.func @f` applying one op line (using %a0, %a1, ...) and returning `%r`."""
    params = ", ".join(f"%a{i}: {tensor_type(a)}" for i, a in enumerate(args))
    return (
        f"func.func @f({params}) -> {result_type} {{\n"
        f"  %r = {op_text}\n"
        f"  func.return %r : {result_type}\n"
        "}\n"
    )


def run(text: str, *args: torch.Tensor) -> list[torch.Tensor]:
    """Parse `text`, interpret `@f` on `args`, and return torch tensors of the result types."""
    module = fuseopt.parse(text)
    outs = fuseopt.interpret(module, "f", *args)
    return [to_torch(o) for o in outs]


def to_torch(a: np.ndarray) -> torch.Tensor:
    """A NumPy result as a torch tensor (bf16 results stay float32: compare with tolerance)."""
    return torch.from_numpy(np.ascontiguousarray(a))


def assert_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Compare with a tolerance that fits the expected dtype (a couple of ulps)."""
    tol = {
        torch.float32: (2e-5, 2e-5),
        torch.bfloat16: (1.6e-2, 1e-2),
        torch.float16: (2e-3, 2e-3),
    }.get(expected.dtype, (0, 0))
    torch.testing.assert_close(
        actual.to(torch.float64) if expected.is_floating_point() else actual,
        expected.to(torch.float64) if expected.is_floating_point() else expected,
        rtol=tol[0],
        atol=tol[1],
        equal_nan=True,
    )
