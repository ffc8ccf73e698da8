"""Index vectors computed in kernels (tile.iota): a dense constant that is
start + step * i along its one long axis (what arange, tril/triu and argmax build) is
cloned into the fusions that read it, and each kernel computes its tile of it from the
tile's position, instead of a whole-tensor kernel making it every call and a load
reading it back. Checked: which constants qualify, and results against eager through
the tile interpreter, the Triton backend and the emulated CUDA backend, with the index
vector along a tiled dim, along a per-program dim, with a negative step, in floats, and
along a dim cut into parts by a concat."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from test_frontend_common import randn
from test_tile_random import interpret_both_ways
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType, bf16, f32, i1, i64

import fuseopt
from fuseopt.dialects import nn


def _constant(values: list, element: object, shape: list[int]) -> nn.ConstantOp:
    t = TensorType(element, shape)
    return nn.ConstantOp(DenseIntOrFPElementsAttr.from_list(t, values), t)


@pytest.mark.parametrize(
    ("values", "element", "shape", "expected"),
    [
        ([0, 1, 2, 3], i64, [4], (0, 1)),
        ([10, 7, 4], i64, [1, 3, 1], (10, -3)),
        ([0.0, 2.0, 4.0], f32, [3], (0, 2)),
        ([0.5, 1.5], f32, [2], None),  # not integers
        ([0.0, 300.0], bf16, [2], None),  # 300 is not exact in bf16 (integers to 256)
        ([1, 1, 1], i64, [3], None),  # a splat
        ([0, 1, 3], i64, [3], None),  # not arithmetic
        ([0, 1, 2, 3], i64, [2, 2], None),  # two long axes
        ([True, False], i1, [2], None),
        ([], i64, [0, 5], None),  # empty: no values at all
        ([-0.0, -1.0, -2.0], f32, [3], None),  # -0.0 is not what an iota makes
    ],
)
def test_which_constants_are_index_vectors(
    values: list, element: object, shape: list[int], expected: tuple[int, int] | None
) -> None:
    assert _constant(values, element, shape).arange == expected


CASES: dict[str, tuple[Callable[..., torch.Tensor], tuple[int, ...]]] = {
    # the row and column index vectors of a causal mask (2-D tiles, both dims tiled)
    "tril": (lambda x: torch.tril(x, -1) * 2, (40, 48)),
    # the column index along the reduced dim of a row kernel
    "argmax_rows": (lambda x: x.argmax(1), (3, 500)),
    # the row index along a column reduction: looped over the reduced dim
    "argmin_columns": (lambda x: x.argmin(0), (300, 20)),
    # floats from an arange, a negative step
    "positions": (lambda x: x * torch.arange(64.0, 0.0, -1.0), (20, 64)),
    # per-program rows: one row per program in a long row reduction
    "row_index_per_program": (
        lambda x: (x.softmax(-1) * torch.arange(5.0)[:, None]).sum(-1),
        (5, 4096),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("backend", ["triton", "interpret"])
def test_index_vectors_match_eager(name: str, backend: str) -> None:
    fn, shape = CASES[name]
    x = randn(*shape, seed=11)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend=backend, strict=True)
        got, expected = compiled(x), fn(x)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    if backend == "triton":  # no kernel that only makes a constant
        assert all(k.schedule != "whole_tensor" for k in compiled.kernels), [
            (k.name, k.schedule) for k in compiled.kernels
        ]


def _index_vector_module(n: int, parts: bool) -> str:
    values = ", ".join(str(3 * i - 7) for i in range(n))
    body = f"""
  %c = nn.constant dense<[{values}]> : tensor<{n}xi64>
  %r = nn.reshape %c : tensor<{n}xi64> -> tensor<1x{n}xi64>
  %b = nn.broadcast %r : tensor<1x{n}xi64> -> tensor<37x{n}xi64>
  %f = nn.cast %b : tensor<37x{n}xi64> -> tensor<37x{n}xf32>"""
    if parts:  # the index vector read across a concat's parts
        half = n // 2
        body += f"""
  %lo = nn.slice %x [0:37:1, 0:{half}:1] : tensor<37x{n}xf32> -> tensor<37x{half}xf32>
  %hi = nn.slice %x [0:37:1, {half}:{n}:1] : tensor<37x{n}xf32> -> tensor<37x{half}xf32>
  %y = nn.concat %hi, %lo axis 1 : tensor<37x{half}xf32>, tensor<37x{half}xf32> -> tensor<37x{n}xf32>"""
    else:
        body += """
  %y = nn.exp %x : tensor<37xNxf32>""".replace("N", str(n))
    return f"""
func.func @main(%x: tensor<37x{n}xf32>) -> tensor<37x{n}xf32> {{{body}
  %s = nn.add %y, %f : tensor<37x{n}xf32>
  func.return %s : tensor<37x{n}xf32>
}}
"""


@pytest.mark.parametrize("parts", [False, True])
@pytest.mark.parametrize(
    "pipeline",
    ["nn-fuse,convert-nn-to-tile,tile-promote", "nn-fuse,convert-nn-to-tile{block=16}"],
)
def test_tile_interpreter_and_printers_compute_index_vectors(parts: bool, pipeline: str) -> None:
    text = _index_vector_module(64, parts)
    args = [randn(37, 64, seed=12).numpy()]
    expected = fuseopt.interpret(fuseopt.parse(text), "main", *args)
    lowered = fuseopt.run_pipeline(fuseopt.parse(text), pipeline)
    assert "tile.iota" in str(lowered) and "whole_tensor" not in str(lowered)
    for actual in interpret_both_ways(lowered, "main", *args):
        torch.testing.assert_close(
            torch.as_tensor(actual[0]), torch.as_tensor(expected[0]), rtol=1e-6, atol=1e-6
        )


@pytest.mark.parametrize("backend", ["triton", "interpret"])
def test_negative_zero_and_empty_index_vectors(backend: str) -> None:
    """Regressions: -arange(4.) starts at -0.0 (1 / -0.0 is -inf), an arange broadcast
    over zero rows is an empty constant; both match eager."""
    for fn, x in (
        (lambda a: a / -torch.arange(4.0), torch.ones(3, 4)),
        (lambda a: a + torch.arange(5.0), torch.zeros(0, 5)),
        (lambda a: a.argmax(1), torch.zeros(0, 5)),
    ):
        torch._dynamo.reset()
        with torch.no_grad():
            got, expected = fuseopt.compile(fn, backend=backend, strict=True)(x), fn(x)
        torch.testing.assert_close(got, expected)
        if got.is_floating_point():
            assert torch.equal(got.signbit(), expected.signbit())
