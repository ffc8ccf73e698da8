"""Embedding, index_select, gather, take and advanced indexing compile (issue 20 item 4):
each becomes one `nn.take` under index arithmetic, and the take a `tile.gather` fused
into its consumers. Checked against eager on the interpreter and the Triton backend
(f32, bf16 and integer tables, every axis, negative indices where PyTorch wraps them,
broadcast and non-adjacent advanced indices, one element, rows past one program's
block); the op's reference semantics and verifier; fusion (an embedding, its add and
its layer norm are one kernel; a table computed in the graph is read from memory).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from test_frontend_common import assert_close, randn

import fuseopt
from fuseopt.interpreter import IndexOutOfRangeError
from fuseopt.pipelines import STANDARD


def _ids(high: int, *shape: int, seed: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, shape, generator=g)


CASES: dict[str, tuple[Callable[..., torch.Tensor], Callable[[torch.dtype], tuple]]] = {
    "embedding": (
        lambda w, i: torch.nn.functional.embedding(i, w),
        lambda dt: (randn(50, 24, dtype=dt), _ids(50, 3, 7)),
    ),
    "embedding_long_rows": (  # rows past one program's block on the interpreter
        lambda w, i: torch.nn.functional.embedding(i, w) * 2,
        lambda dt: (randn(9, 5000, dtype=dt), _ids(9, 4)),
    ),
    "embedding_one_row": (
        lambda w, i: torch.nn.functional.embedding(i, w),
        lambda dt: (randn(1, 1, dtype=dt), torch.zeros(1, 1, dtype=torch.long)),
    ),
    "index_select_middle": (
        lambda x, i: x.index_select(1, i) + 1,
        lambda dt: (randn(4, 5, 6, dtype=dt), torch.tensor([3, 0, 4, 4])),
    ),
    "index_select_first": (
        lambda x, i: x.index_select(0, i),
        lambda dt: (randn(7, 3, dtype=dt), torch.tensor([6, 1])),
    ),
    "index_select_of_0d": (  # found by review: a 0-d result, not the index's shape
        lambda x, i: x.index_select(0, i) * 2,
        lambda dt: (randn(1, dtype=dt).reshape(()), torch.tensor([0])),
    ),
    "gather_last": (
        lambda x, i: torch.gather(x, 2, i),
        lambda dt: (randn(4, 5, 6, dtype=dt), _ids(6, 4, 5, 3)),
    ),
    "gather_first_smaller_index": (  # the index smaller than the input off `dim`
        lambda x, i: torch.gather(x, 0, i),
        lambda dt: (randn(6, 5, dtype=dt), _ids(6, 3, 2)),
    ),
    "take_negative": (
        lambda x, i: torch.take(x, i),
        lambda dt: (randn(3, 4, dtype=dt), torch.tensor([[0, -1], [11, -12]])),
    ),
    "advanced_adjacent_negative": (
        lambda x, i: x[:, i],
        lambda dt: (randn(4, 5, 6, dtype=dt), torch.tensor([4, -1, 0])),
    ),
    "advanced_broadcast_pair": (  # HF's padding-mask lookup: x[batch[:, None], kv[None]]
        lambda x, b, k: x[b[:, None, None, None], k[None, None, None, :]],
        lambda dt: (randn(2, 9, dtype=dt), torch.arange(2), torch.arange(9)),
    ),
    "advanced_non_adjacent": (  # indexed dims apart: the broadcast dims go first
        lambda x, i, j: x[i[:, None], :, j[None, :]],
        lambda dt: (randn(4, 5, 6, dtype=dt), torch.tensor([3, 0, -1]), torch.tensor([5, 1])),
    ),
    "advanced_trailing_kept": (
        lambda x, i: x[i] * x[i],
        lambda dt: (randn(5, 3, dtype=dt), _ids(5, 2, 2)),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_indexing_matches_eager(name: str, dtype: torch.dtype) -> None:
    fn, make = CASES[name]
    inputs = make(torch.float32)
    table = inputs[0] if dtype is torch.float32 else (inputs[0] * 10).to(dtype)
    inputs = (table, *inputs[1:])
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="interpret", strict=True)
        got, expected = compiled(*inputs), fn(*inputs)
    assert_close(got, expected)
    assert compiled.regions and not compiled.fallbacks


@pytest.mark.parametrize(
    "name", ["embedding", "gather_last", "advanced_non_adjacent", "take_negative"]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_indexing_on_triton(name: str, dtype: torch.dtype) -> None:
    fn, make = CASES[name]
    inputs = make(dtype)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="triton", strict=True)
        got, expected = compiled(*inputs), fn(*inputs)
    assert_close(got, expected)
    assert not compiled.fallbacks


class _Embeddings(torch.nn.Module):
    """BERT's input block: word, position and token-type embeddings, summed, then a
    layer norm."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.word = torch.nn.Parameter(torch.randn(60, 96, generator=g))
        self.pos = torch.nn.Parameter(torch.randn(16, 96, generator=g))
        self.kind = torch.nn.Parameter(torch.randn(2, 96, generator=g))
        self.norm = torch.nn.LayerNorm(96)
        with torch.no_grad():
            self.norm.weight.copy_(torch.randn(96, generator=g) * 0.1 + 1)
            self.norm.bias.copy_(torch.randn(96, generator=g) * 0.1)

    def forward(self, ids: torch.Tensor, kinds: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1])[None]
        x = self.word[ids] + self.pos[positions] + self.kind[kinds]
        return self.norm(x)


@pytest.mark.parametrize(
    ("backend", "dtype"),
    [("interpret", torch.float32), ("triton", torch.float32), ("triton", torch.bfloat16)],
    ids=str,
)
def test_embeddings_add_and_norm_are_one_kernel(backend: str, dtype: torch.dtype) -> None:
    """In bf16 too: the f32 policy widens the gathered values, never the tables (a
    kernel gathers only from its inputs; a widened table split the group into one
    kernel per op)."""
    model = _Embeddings().to(dtype).eval()
    ids, kinds = _ids(60, 3, 16), _ids(2, 3, 16, seed=4)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(model, backend=backend, strict=True)
        got, expected = compiled(ids, kinds), model(ids, kinds)
    assert_close(got, expected)
    assert not compiled.fallbacks
    assert len(compiled.kernels) == 1, [(k.name, k.schedule) for k in compiled.kernels]
    assert "reduction" in compiled.kernels[0].schedule


def test_a_table_computed_in_the_graph_is_read_from_memory() -> None:
    """A kernel gathers only from its inputs: exp(table) is a kernel of its own."""
    fn = lambda w, i: torch.nn.functional.embedding(i, w.exp()) + 1  # noqa: E731
    w, i = randn(10, 8), _ids(10, 5)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="interpret", strict=True)
        assert_close(compiled(w, i), fn(w, i))
    assert len(compiled.kernels) == 2


def test_boolean_indices_run_eagerly_with_a_reason() -> None:
    """A boolean mask selects a data-dependent number of elements: left to PyTorch."""
    fn = lambda x, m: x[m] * 2  # noqa: E731
    x = randn(4, 5)
    m = x > 0
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="interpret")
        assert_close(compiled(x, m), fn(x, m))


def _take_module(index: list[int]) -> tuple[object, np.ndarray, np.ndarray]:
    text = f"""
func.func @main(%x: tensor<3x4xf32>, %p: tensor<{len(index)}xi64>) -> tensor<{len(index)}xf32> {{
  %r = nn.take %x, %p : tensor<3x4xf32>, tensor<{len(index)}xi64> -> tensor<{len(index)}xf32>
  func.return %r : tensor<{len(index)}xf32>
}}
"""
    x = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5
    return fuseopt.parse(text), x, np.array(index, dtype=np.int64)


def test_take_reference_semantics() -> None:
    module, x, p = _take_module([11, 0, 5, 5])
    (got,) = fuseopt.interpret(module, "main", x, p)
    np.testing.assert_array_equal(got, x.reshape(-1)[p])


@pytest.mark.parametrize("bad", [12, -1])
def test_take_out_of_range_raises_in_the_reference(bad: int) -> None:
    module, x, p = _take_module([0, bad])
    with pytest.raises(IndexOutOfRangeError, match=f"flat position {bad} of an input of 12"):
        fuseopt.interpret(module, "main", x, p)


def test_a_kernel_reads_zero_out_of_range() -> None:
    """In a kernel an out-of-range position reads 0 and touches no memory outside the
    input (PyTorch would raise; the tile interpreter shows what the kernel does)."""
    module, x, p = _take_module([11, 12, -3, 2])
    lowered = fuseopt.run_pipeline(module, STANDARD)
    (got,) = fuseopt.interpret(lowered, "main", x, p)
    np.testing.assert_array_equal(got, [5.5, 0.0, 0.0, 1.0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend", ["triton", "cuda"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_indexing_on_the_gpu(backend: str, dtype: torch.dtype) -> None:
    """The printed gathers on the device: BERT's embedding block at a real vocabulary
    (32000 x 1024, rows of 1024 and a ragged 1000) and the other forms, both backends."""
    model = _Embeddings().to("cuda", dtype).eval()
    ids, kinds = _ids(60, 4, 16).cuda(), _ids(2, 4, 16, seed=4).cuda()
    big = randn(32000, 1000, dtype=dtype).cuda()
    rows = _ids(32000, 3, 77, seed=5).cuda()
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(model, backend=backend, strict=True)
        assert_close(compiled(ids, kinds).cpu(), model(ids, kinds).cpu())
        assert not compiled.fallbacks
        for name in ("gather_last", "advanced_non_adjacent", "take_negative"):
            fn, make = CASES[name]
            inputs = tuple(t.cuda() for t in make(dtype))
            torch._dynamo.reset()
            got = fuseopt.compile(fn, backend=backend, strict=True)(*inputs)
            assert_close(got.cpu(), fn(*inputs).cpu())
        lookup = lambda w, i: torch.nn.functional.embedding(i, w) * 3  # noqa: E731
        torch._dynamo.reset()
        got = fuseopt.compile(lookup, backend=backend, strict=True)(big, rows)
        assert_close(got.cpu(), lookup(big, rows).cpu())


def test_a_take_from_a_cloned_constant_is_left_unfused() -> None:
    """Found by the property test: a take from a splat constant (which outlining clones
    into every fusion, so no kernel could read it from memory) made nn-fuse regroup
    forever. The take stays out of groups and still computes the reference's values."""
    text = """
func.func @main(%p: tensor<2xi64>, %x: tensor<2xf32>) -> tensor<2xf32> {
  %c = nn.constant 0.5 : tensor<4x3xf32>
  %t = nn.take %c, %p : tensor<4x3xf32>, tensor<2xi64> -> tensor<2xf32>
  %e = nn.exp %t : tensor<2xf32>
  %r = nn.add %e, %x : tensor<2xf32>
  func.return %r : tensor<2xf32>
}
"""
    p, x = np.array([8, 1], dtype=np.int64), np.array([1.0, -2.0], dtype=np.float32)
    (expected,) = fuseopt.interpret(fuseopt.parse(text), "main", p, x)
    for pipeline in ("nn-fuse,convert-nn-to-tile,tile-promote", STANDARD):
        lowered = fuseopt.run_pipeline(fuseopt.parse(text), pipeline)
        (got,) = fuseopt.interpret(lowered, "main", p, x)
        np.testing.assert_allclose(got, expected, rtol=1e-6)


MATMUL_AND_TAKE = """
func.func @main(%a: tensor<4x16xf32>, %w: tensor<16x8xf32>, %p: tensor<4x8xi64>) -> tensor<4x8xf32> {
  %m = nn.matmul %a, %w : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %t = nn.take %a, %p : tensor<4x16xf32>, tensor<4x8xi64> -> tensor<4x8xf32>
  %u = nn.take %w, %p : tensor<16x8xf32>, tensor<4x8xi64> -> tensor<4x8xf32>
  %s = nn.add %m, %t : tensor<4x8xf32>
  %r = nn.add %s, %u : tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
"""


@pytest.mark.parametrize("route", ["auto", "kernel"])
def test_a_take_from_a_matmul_operand_in_its_epilogue(route: str) -> None:
    """Found by review: a take gathering from A or B of the matmul in its own kernel
    was handed the epilogue's view of the operand (no K dim) and failed to launch. It
    gathers from the operand's own parameter (the same flat order)."""
    pipeline = STANDARD.replace("nn-fuse", f"nn-fuse{{route={route}}}")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 16)).astype(np.float32)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    p = rng.integers(0, 64, (4, 8)).astype(np.int64)
    (expected,) = fuseopt.interpret(fuseopt.parse(MATMUL_AND_TAKE), "main", a, w, p)
    lowered = fuseopt.run_pipeline(fuseopt.parse(MATMUL_AND_TAKE), pipeline)
    (got,) = fuseopt.interpret(lowered, "main", a, w, p)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
