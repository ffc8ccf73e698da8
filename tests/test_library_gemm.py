"""Library GEMMs run with N padded to whole 16-byte vectors (backends/library_gemm.py):
the rule, the padded product on both weight layouts, and both backends' host code."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import fuseopt
from fuseopt.backends.library_gemm import (
    MIN_PADDED_WEIGHT,
    mm_padded,
    padded_columns,
    padded_depth,
    padded_output,
)


def test_padded_columns_rounds_unaligned_large_weights_only() -> None:
    assert padded_columns(50257, 1024, 2) == 50264
    assert padded_columns(30522, 1024, 2) == 30528
    assert padded_columns(32001, 4096, 4) == 32004
    assert padded_columns(50264, 1024, 2) == 50264  # aligned already
    assert padded_columns(3, 1024, 2) == 3  # a classifier: padding costs more than it saves
    assert 3 * 1024 < MIN_PADDED_WEIGHT


def test_padded_depth_rounds_unaligned_large_operands_only() -> None:
    assert padded_depth(1023, 4097, 4095, 2) == 1024  # linear_irregular of the breadth suite
    assert padded_depth(1023, 4097, 4095, 4) == 1024
    assert padded_depth(1021, 4097, 4095, 4) == 1024
    assert padded_depth(1024, 4097, 4095, 2) == 1024  # aligned already
    assert padded_depth(769, 77, 3001, 2) == 769  # a 77-row input: not worth two copies
    assert padded_depth(1000, 1000, 1000, 2) == 1000  # 2000 bytes: whole vectors


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("transposed", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mm_padded_depth_matches_mm(transposed: bool, dtype: torch.dtype, bias: bool) -> None:
    """K padded with zeros (columns of a, rows of b), alone or with N padded."""
    g = torch.Generator().manual_seed(3)
    a = torch.randn(6, 21, generator=g).to(dtype)
    weight = torch.randn(37, 21, generator=g).to(dtype)
    b = weight.mT if transposed else weight.mT.contiguous()
    c = torch.randn(37, generator=g).to(dtype) if bias else None
    want = torch.mm(a, b) if c is None else torch.addmm(c, a, b)
    for columns in (37, 40):
        out = torch.full((6, 37), float("nan"), dtype=dtype)
        mm_padded(a, b, out, columns, c, depth=24)
        torch.testing.assert_close(out, want)


@pytest.mark.parametrize("transposed", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mm_padded_matches_mm(transposed: bool, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(5, 24, generator=g).to(dtype)
    weight = torch.randn(37, 24, generator=g).to(dtype)
    b = weight.mT if transposed else weight.mT.contiguous()
    out = torch.full((5, 37), float("nan"), dtype=dtype)
    mm_padded(a, b, out, padded_columns(37, 10**6, a.element_size()))
    torch.testing.assert_close(out, torch.mm(a, b))


class _OpLog(TorchDispatchMode):
    """The ATen ops run under it, by name (`aten.mm`, `aten.copy_`, ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        self.ops.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("features", [37, 41, 43])
@pytest.mark.parametrize("padded_out", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_mm_padded_splits_a_transposed_weight_without_copying_it(
    features: int, padded_out: bool, dtype: torch.dtype
) -> None:
    """A transposed [N, K] weight (an LM head's) is never copied: the aligned columns
    and the narrow rest (1 or 3 columns here) are two GEMMs into the padded buffer;
    into a padded output (in place) or a plain one (through a buffer)."""
    g = torch.Generator().manual_seed(features)
    a = torch.randn(7, 24, generator=g).to(dtype)
    b = torch.randn(features, 24, generator=g).to(dtype).mT
    columns = padded_columns(features, 10**6, a.element_size())
    assert columns > features
    if padded_out:
        out = torch.full((7, columns), float("nan"), dtype=dtype)[:, :features]
    else:
        out = torch.full((7, features), float("nan"), dtype=dtype)
    with _OpLog() as log:
        mm_padded(a, b, out, columns)
    assert log.ops.count("aten.mm") == 2 and "aten.zero_" not in log.ops, log.ops
    assert log.ops.count("aten.copy_") == (0 if padded_out else 1), log.ops  # out only
    torch.testing.assert_close(out, torch.mm(a, b))


def test_mm_padded_with_a_bias_copies_the_weight() -> None:
    """With a bias the product is one `torch.addmm` over the zero-padded weight (its
    epilogue adds the bias before rounding, as eager's does)."""
    g = torch.Generator().manual_seed(4)
    a = torch.randn(7, 24, generator=g).to(torch.bfloat16)
    b = torch.randn(37, 24, generator=g).to(torch.bfloat16).mT
    c = torch.randn(37, generator=g).to(torch.bfloat16)
    out = torch.empty((7, 37), dtype=torch.bfloat16)
    with _OpLog() as log:
        mm_padded(a, b, out, 40, c)
    assert log.ops.count("aten.addmm") == 1 and "aten.mm" not in log.ops, log.ops
    torch.testing.assert_close(out, torch.addmm(c, a, b))


def test_mm_padded_copies_a_weight_narrower_than_a_vector() -> None:
    """Fewer columns than one 16-byte vector leave no aligned part: the copy path."""
    g = torch.Generator().manual_seed(5)
    a = torch.randn(3, 16, generator=g).to(torch.bfloat16)
    b = torch.randn(5, 16, generator=g).to(torch.bfloat16).mT
    out = torch.empty((3, 5), dtype=torch.bfloat16)
    with _OpLog() as log:
        mm_padded(a, b, out, 8)
    assert log.ops.count("aten.mm") == 1 and "aten.copy_" in log.ops, log.ops
    torch.testing.assert_close(out, torch.mm(a, b))


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_backends_pad_an_lm_head(backend: str) -> None:
    """A linear layer of 64 -> 16411 outputs (weight over a million elements, N odd)
    compiles with the padded GEMM and matches eager."""
    if backend == "cuda" and not torch.cuda.is_available():
        pytest.skip("the CUDA backend runs on a GPU")
    head = torch.nn.Linear(64, 16411, bias=False)
    x = torch.randn(3, 64)
    if backend == "cuda":
        head, x = head.cuda(), x.cuda()
    compiled = fuseopt.compile(head, x, backend=backend)
    assert [k.schedule for k in compiled.kernels] == ["library_gemm"] or not compiled.kernels
    if backend == "triton":
        assert "fuseopt_mm_padded(" in compiled.regions[0].compiled.source  # type: ignore[attr-defined]
    with torch.no_grad():
        got = compiled(x)
        torch.testing.assert_close(got, head(x), rtol=1e-4, atol=1e-4)
    if compiled.kernels:  # written in place with the padded row pitch (as torch.compile)
        assert got.stride() == (16412, 1), got.stride()


@pytest.mark.parametrize("shape", [(5, 37), (2, 3, 37)])
def test_mm_padded_writes_a_padded_output_in_place(shape: tuple[int, ...]) -> None:
    """An output allocated with the padded row pitch is the product's buffer: the
    GEMM writes it whole and no column is copied; values and shape are `a @ b`'s."""
    g = torch.Generator().manual_seed(2)
    rows = 1
    for n in shape[:-1]:
        rows *= n
    a = torch.randn(rows, 24, generator=g)
    b = torch.randn(37, 24, generator=g).mT

    def empty(size: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.full(size, float("nan"), dtype=dtype).as_strided(size, stride)

    out = padded_output(empty, shape, 40, torch.float32)
    assert out.shape == shape and out.stride()[-2:] == (40, 1)
    mm_padded(a, b, out.view(rows, 37), 40)
    torch.testing.assert_close(out, (a @ b).view(shape))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mm_padded_adds_a_bias(dtype: torch.dtype) -> None:
    """With a bias, the padded product is `torch.addmm`'s: the bias zero-padded too."""
    g = torch.Generator().manual_seed(1)
    a = torch.randn(5, 24, generator=g).to(dtype)
    b = torch.randn(37, 24, generator=g).to(dtype).mT
    bias = torch.randn(37, generator=g).to(dtype)
    out = torch.full((5, 37), float("nan"), dtype=dtype)
    mm_padded(a, b, out, padded_columns(37, 10**6, a.element_size()), bias)
    torch.testing.assert_close(out, torch.addmm(bias, a, b))


@pytest.mark.parametrize("features", [16411, 16384], ids=["padded", "aligned"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_linear_bias_joins_the_library_gemm(
    backend: str, dtype: torch.dtype, features: int
) -> None:
    """A linear layer with a bias, large enough for the library GEMM: the bias is added
    in the GEMM's epilogue (torch.addmm, padded or not), so no kernel runs after it,
    and the result matches eager's F.linear (which runs addmm too)."""
    if backend == "cuda" and not torch.cuda.is_available():
        pytest.skip("the CUDA backend runs on a GPU")
    torch.manual_seed(0)
    layer = torch.nn.Linear(64, features).to(dtype)
    with torch.no_grad():
        layer.bias.uniform_(-4, 4)  # a bias as large as the products: a dropped one shows
    x = torch.randn(2, 3, 64).to(dtype)
    if backend == "cuda":
        layer, x = layer.cuda(), x.cuda()
    with torch.no_grad():
        compiled = fuseopt.compile(layer, x, backend=backend)
        assert [k.schedule for k in compiled.kernels] == ["library_gemm"]
        if backend == "triton":
            source = compiled.regions[0].compiled.source  # type: ignore[attr-defined]
            host = source[source.rindex("\ndef ") :]  # the host function, printed last
            calls = ("fuseopt_mm_padded(", "torch.addmm(", "torch.mm(")
            (line,) = [x.strip() for x in host.splitlines() if x.strip().startswith(calls)]
            if features == 16411:  # the bias (input 2) given to the padded GEMM
                assert line.startswith("fuseopt_mm_padded(") and line.endswith(", in2)"), host
            else:
                assert line.startswith("torch.addmm(in2, "), host
        tolerance = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}
        torch.testing.assert_close(compiled(x), layer(x), **tolerance)


def _padded_weight(columns: int = 16411) -> torch.Tensor:
    return torch.randn(64, columns, generator=torch.Generator().manual_seed(7))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, w: (x @ w).flatten(),  # the output is not rows of N: not padded
        lambda x, w: (x @ w).t(),  # traced transposed: restrided over the padded rows
        lambda x, w: (x @ w)[:, :5] * 2,  # read by a kernel: not padded
    ],
    ids=["flattened", "transposed", "read-again"],
)
def test_padded_gemm_outputs_in_every_layout(fn) -> None:  # noqa: ANN001
    """Outputs of a padded GEMM that are reshaped, traced transposed or read again
    compile and match eager (found by review: a flattened one crashed, a transposed
    one read rows at the unpadded pitch)."""
    x, w = torch.randn(6, 64), _padded_weight()
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, (x, w), backend="triton", strict=True)
        torch.testing.assert_close(compiled(x, w), fn(x, w), rtol=1e-4, atol=1e-4)


def test_a_computed_bias_is_not_overwritten() -> None:
    """A bias computed in the region (a reduction) and a GEMM temporary (its epilogue
    is a relu): the workspace plan counts the bias as read by the GEMM, so the GEMM's
    output never takes the bias's bytes (found by review)."""

    def fn(x: torch.Tensor, w: torch.Tensor, stack: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.nn.functional.linear(x, w, stack.sum(0)))

    g = torch.Generator().manual_seed(8)
    x, w, stack = torch.randn(6, 64, generator=g), torch.randn(16384, 64, generator=g), None
    stack = torch.randn(3, 16384, generator=g)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, (x, w, stack), backend="triton", strict=True)
        torch.testing.assert_close(compiled(x, w, stack), fn(x, w, stack), rtol=1e-4, atol=1e-4)


def test_a_narrowing_cast_keeps_its_rounding() -> None:
    """`(x @ w).half() + b.half()` overflows to inf where eager does: a narrowing cast is
    not the widening policy's, so the bias is not moved into the f32 GEMM (found by
    review)."""

    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ((x @ w).half() + b.half()).float()

    g = torch.Generator().manual_seed(9)
    x, w = torch.randn(6, 64, generator=g) * 3000, torch.randn(64, 16384, generator=g)
    b = torch.randn(16384, generator=g)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, (x, w, b), backend="triton")
        got, want = compiled(x, w, b), fn(x, w, b)
    assert torch.isinf(want).any()
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    torch.testing.assert_close(got, want, rtol=2e-2, atol=1e-3)  # a 1-ulp f16 flip


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_backends_pad_an_unaligned_depth(backend: str) -> None:
    """F.linear of 1100 x 1023 by 1030 x 1023 (K odd, both operands over a million
    elements) runs the padded GEMM at K = 1024 and matches eager."""
    if backend == "cuda" and not torch.cuda.is_available():
        pytest.skip("the CUDA backend runs on a GPU")
    layer = torch.nn.Linear(1023, 1030, bias=False)
    x = torch.randn(1100, 1023)
    if backend == "cuda":
        layer, x = layer.cuda(), x.cuda()
    with torch.no_grad():
        compiled = fuseopt.compile(layer, x, backend=backend)
        if backend == "triton":
            source = compiled.regions[0].compiled.source  # type: ignore[attr-defined]
            assert "depth=1024)" in source, source[source.rindex("\ndef ") :]
        torch.testing.assert_close(compiled(x), layer(x), rtol=1e-4, atol=1e-4)
