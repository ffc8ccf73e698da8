"""Every supported ATen op, alone, through `fuseopt.compile(..., backend="interpret")`
against eager PyTorch, in f32 and bf16 with seeded random inputs."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from test_frontend_common import check, positive, randn

import fuseopt

A = (4, 8)


def _x(dtype: torch.dtype, seed: int = 0, shape: tuple[int, ...] = A) -> torch.Tensor:
    return randn(*shape, dtype=dtype, seed=seed)


def _p(dtype: torch.dtype, seed: int = 0, shape: tuple[int, ...] = A) -> torch.Tensor:
    return positive(*shape, dtype=dtype, seed=seed)


# name -> (function, input builder taking a dtype)
CASES: dict[str, tuple[Callable, Callable[[torch.dtype], list[torch.Tensor]]]] = {
    # binary arithmetic (tensor, broadcast, scalar, alpha)
    "add": (lambda a, b: a + b, lambda d: [_x(d), _x(d, 1, (8,))]),
    "add_scalar_alpha": (lambda a: torch.add(a, 0.3, alpha=2), lambda d: [_x(d)]),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=-1.5), lambda d: [_x(d), _x(d, 1)]),
    "sub": (lambda a, b: a - b, lambda d: [_x(d), _x(d, 1, (4, 1))]),
    "sub_scalar": (lambda a: a - 0.1, lambda d: [_x(d)]),
    "rsub": (lambda a: 1.0 - a, lambda d: [_x(d)]),
    "mul": (lambda a, b: a * b, lambda d: [_x(d), _x(d, 1)]),
    "mul_scalar": (lambda a: a * 0.044715, lambda d: [_x(d)]),
    "div": (lambda a, b: a / b, lambda d: [_x(d), _p(d, 1)]),
    "div_scalar": (lambda a: a / 3.0, lambda d: [_x(d)]),
    "maximum": (torch.maximum, lambda d: [_x(d), _x(d, 1)]),
    "minimum": (torch.minimum, lambda d: [_x(d), _x(d, 1, (8,))]),
    "pow_scalar": (lambda a: a**1.5, lambda d: [_p(d)]),
    "pow_square": (lambda a: a**2, lambda d: [_x(d)]),
    "square": (torch.square, lambda d: [_x(d)]),
    # boolean ops (masks as models build them) and triangles
    "bitwise_and": (lambda a: torch.where((a > 0) & (a < 1), a, -a), lambda d: [_x(d)]),
    "bitwise_or_not": (lambda a: torch.where((a > 0.5) | ~(a > -0.5), a, 0.0), lambda d: [_x(d)]),
    "bitwise_xor": (lambda a, b: (a > 0) ^ (b > 0), lambda d: [_x(d), _x(d, 1)]),
    "logical_and_or": (
        lambda a, b: torch.logical_and(a, b > 0) | torch.logical_or(a > 1, b),
        lambda d: [_x(d), _x(d, 1)],
    ),
    "tril": (torch.tril, lambda d: [_x(d)]),
    "triu_diagonal": (lambda a: torch.triu(a, 2) + torch.tril(a, -3), lambda d: [_x(d)]),
    "causal_mask_fill": (
        lambda a: a.masked_fill(~torch.ones(8, 8, dtype=torch.bool).tril()[:4], -1.0),
        lambda d: [_x(d)],
    ),
    "pow_tensor": (torch.pow, lambda d: [_p(d), _x(d, 1)]),
    "pow_base_scalar": (lambda a: 2.0**a, lambda d: [_x(d)]),
    # unary math and activations
    "neg": (torch.neg, lambda d: [_x(d)]),
    "abs": (torch.abs, lambda d: [_x(d)]),
    "exp": (torch.exp, lambda d: [_x(d)]),
    "log": (torch.log, lambda d: [_p(d)]),
    "log1p": (lambda a: torch.log1p(a - 0.9), lambda d: [_p(d)]),
    "sqrt": (torch.sqrt, lambda d: [_p(d)]),
    "rsqrt": (torch.rsqrt, lambda d: [_p(d)]),
    "reciprocal": (torch.reciprocal, lambda d: [_p(d)]),
    "tanh": (torch.tanh, lambda d: [_x(d)]),
    "sigmoid": (torch.sigmoid, lambda d: [_x(d)]),
    "relu": (torch.relu, lambda d: [_x(d)]),
    "gelu": (F.gelu, lambda d: [_x(d)]),
    "gelu_tanh": (lambda a: F.gelu(a, approximate="tanh"), lambda d: [_x(d)]),
    "silu": (F.silu, lambda d: [_x(d)]),
    "erf": (torch.erf, lambda d: [_x(d)]),
    "sin": (torch.sin, lambda d: [_x(d)]),
    "cos": (torch.cos, lambda d: [_x(d)]),
    "leaky_relu": (lambda a: F.leaky_relu(a, 0.2), lambda d: [_x(d)]),
    "hardtanh": (lambda a: F.hardtanh(a, -0.5, 0.75), lambda d: [_x(d)]),
    "relu6": (F.relu6, lambda d: [_x(d) * 4]),
    "clamp": (lambda a: torch.clamp(a, -0.3, 0.6), lambda d: [_x(d)]),
    "clamp_min": (lambda a: torch.clamp(a, min=0.1), lambda d: [_x(d)]),
    "clamp_max": (lambda a: torch.clamp(a, max=0.1), lambda d: [_x(d)]),
    "softplus": (F.softplus, lambda d: [_x(d) * 3]),
    "softplus_beta": (lambda a: F.softplus(a, beta=2.0, threshold=3.0), lambda d: [_x(d) * 3]),
    "mish": (F.mish, lambda d: [_x(d) * 3]),
    "elu": (lambda a: F.elu(a, alpha=0.7), lambda d: [_x(d)]),
    # comparisons and selection
    "eq": (lambda a, b: a == b, lambda d: [_x(d), torch.where(_x(d, 1) > 0, _x(d), _x(d, 2))]),
    "ne": (lambda a: a != 0.0, lambda d: [torch.relu(_x(d))]),
    "lt": (lambda a, b: a < b, lambda d: [_x(d), _x(d, 1)]),
    "le": (lambda a: a <= 0.25, lambda d: [_x(d)]),
    "gt": (lambda a, b: a > b, lambda d: [_x(d), _x(d, 1, (8,))]),
    "ge": (lambda a: a >= -0.25, lambda d: [_x(d)]),
    "logical_not": (lambda a: torch.logical_not(a > 0), lambda d: [_x(d)]),
    "where": (lambda c, a, b: torch.where(c > 0, a, b), lambda d: [_x(d), _x(d, 1), _x(d, 2)]),
    "where_scalar": (lambda a: torch.where(a > 0, a, 0.5), lambda d: [_x(d)]),
    "masked_fill": (lambda a, m: a.masked_fill(m > 0, -1e4), lambda d: [_x(d), _x(d, 1, (8,))]),
    # dtype conversion and copies
    "to_f32": (lambda a: a.to(torch.float32) * 2, lambda d: [_x(d)]),
    "to_bf16": (lambda a: (a * 3).to(torch.bfloat16), lambda d: [_x(d)]),
    "to_int64": (lambda a: (a * 4).to(torch.int64), lambda d: [_x(d)]),
    "bool_to_float": (lambda a: (a > 0).to(a.dtype) * a, lambda d: [_x(d)]),
    "clone": (lambda a: a.clone() + 1, lambda d: [_x(d)]),
    "detach": (lambda a: a.detach() * 2, lambda d: [_x(d)]),
    "dropout_eval": (lambda a: F.dropout(a, 0.5, training=False) + 1, lambda d: [_x(d)]),
    # reductions
    "sum_dim": (lambda a: a.sum(-1), lambda d: [_x(d)]),
    "sum_all": (lambda a: a.sum(), lambda d: [_x(d)]),
    "sum_keepdim": (lambda a: a.sum((0, 1), keepdim=True), lambda d: [_x(d, shape=(2, 3, 4))]),
    "mean_dim": (lambda a: a.mean(1, keepdim=True), lambda d: [_x(d)]),
    "mean_all": (lambda a: a.mean(), lambda d: [_x(d)]),
    "amax": (lambda a: a.amax(-1), lambda d: [_x(d)]),
    "amin": (lambda a: a.amin(0, keepdim=True), lambda d: [_x(d)]),
    "max_all": (lambda a: a.max(), lambda d: [_x(d)]),
    "min_all": (lambda a: a.min(), lambda d: [_x(d)]),
    "var": (lambda a: a.var(-1), lambda d: [_x(d)]),
    "var_biased": (lambda a: a.var(0, correction=0, keepdim=True), lambda d: [_x(d)]),
    "std": (lambda a: a.std(-1), lambda d: [_x(d)]),
    "var_mean": (lambda a: torch.var_mean(a, -1, keepdim=True), lambda d: [_x(d)]),
    "softmax": (lambda a: torch.softmax(a, -1), lambda d: [_x(d) * 3]),
    "softmax_dim0": (lambda a: torch.softmax(a, 0), lambda d: [_x(d)]),
    "softmax_f32": (lambda a: torch.softmax(a, -1, dtype=torch.float32), lambda d: [_x(d)]),
    "log_softmax": (lambda a: F.log_softmax(a, -1), lambda d: [_x(d) * 3]),
    "layer_norm": (
        lambda a, w, b: F.layer_norm(a, (8,), w, b, 1e-5),
        lambda d: [_x(d), _x(d, 1, (8,)), _x(d, 2, (8,))],
    ),
    "layer_norm_2d": (lambda a: F.layer_norm(a, (3, 8)), lambda d: [_x(d, shape=(2, 3, 8))]),
    "rms_norm": (lambda a, w: F.rms_norm(a, (8,), w, 1e-6), lambda d: [_x(d), _x(d, 1, (8,))]),
    # matrix products
    "mm": (torch.mm, lambda d: [_x(d), _x(d, 1, (8, 6))]),
    "mm_t": (lambda a, b: a @ b.t(), lambda d: [_x(d), _x(d, 1, (6, 8))]),
    "addmm": (
        lambda c, a, b: torch.addmm(c, a, b),
        lambda d: [_x(d, 2, (6,)), _x(d), _x(d, 1, (8, 6))],
    ),
    "addmm_scaled": (
        lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0),
        lambda d: [_x(d, 2, (4, 6)), _x(d), _x(d, 1, (8, 6))],
    ),
    "bmm": (torch.bmm, lambda d: [_x(d, shape=(2, 4, 8)), _x(d, 1, (2, 8, 3))]),
    "matmul_2d": (torch.matmul, lambda d: [_x(d), _x(d, 1, (8, 5))]),
    "matmul_3d_2d": (torch.matmul, lambda d: [_x(d, shape=(2, 4, 8)), _x(d, 1, (8, 3))]),
    "matmul_4d": (torch.matmul, lambda d: [_x(d, shape=(2, 2, 4, 8)), _x(d, 1, (2, 2, 8, 3))]),
    "matmul_vec": (torch.matmul, lambda d: [_x(d), _x(d, 1, (8,))]),
    "matmul_vec_mat": (torch.matmul, lambda d: [_x(d, 1, (4,)), _x(d)]),
    "dot": (torch.dot, lambda d: [_x(d, shape=(8,)), _x(d, 1, (8,))]),
    "linear": (F.linear, lambda d: [_x(d, shape=(2, 4, 8)), _x(d, 1, (6, 8)), _x(d, 2, (6,))]),
    "linear_nobias": (F.linear, lambda d: [_x(d), _x(d, 1, (6, 8))]),
    # attention (SDPA's fused kernels, converted to nn primitives with attention="nn")
    "sdpa_causal": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda d: [_x(d, s, (2, 2, 4, 8)) for s in range(3)],
    ),
    "sdpa_bool_mask": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m > -1.2),
        lambda d: [*(_x(d, s, (2, 2, 4, 8)) for s in range(3)), _x(d, 3, (4, 4))],
    ),
    "sdpa_float_mask_scale": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3),
        lambda d: [*(_x(d, s, (2, 2, 4, 8)) for s in range(3)), _x(d, 3, (2, 1, 4, 4))],
    ),
    "sdpa_gqa": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
        lambda d: [_x(d, 0, (2, 4, 5, 8)), _x(d, 1, (2, 2, 6, 8)), _x(d, 2, (2, 2, 6, 8))],
    ),
    # shape ops
    "t": (lambda a: a.t() * 2, lambda d: [_x(d)]),
    "transpose": (lambda a: a.transpose(0, 2) + 1, lambda d: [_x(d, shape=(2, 3, 4))]),
    "permute": (lambda a: a.permute(2, 0, 1) + 1, lambda d: [_x(d, shape=(2, 3, 4))]),
    "view": (lambda a: a.view(2, 16) + 1, lambda d: [_x(d)]),
    "reshape": (lambda a: a.reshape(8, -1) * 2, lambda d: [_x(d)]),
    "reshape_t": (lambda a: a.t().reshape(-1) + 1, lambda d: [_x(d)]),
    "expand": (lambda a: a.expand(3, 4, 8) + 1, lambda d: [_x(d, shape=(4, 1))]),
    "unsqueeze": (lambda a: a.unsqueeze(1) * 2, lambda d: [_x(d)]),
    "squeeze": (lambda a: a.squeeze(1) * 2, lambda d: [_x(d, shape=(4, 1, 8))]),
    "flatten": (lambda a: a.flatten(1) * 2, lambda d: [_x(d, shape=(2, 3, 4))]),
    "slice": (lambda a: a[:, 1:7:2] * 2, lambda d: [_x(d)]),
    "slice_neg": (lambda a: a[-3:, :-2] * 2, lambda d: [_x(d)]),
    "select": (lambda a: a[:, 2] * 2, lambda d: [_x(d)]),
    "cat": (lambda a, b: torch.cat([a, b * 2], 1), lambda d: [_x(d), _x(d, 1, (4, 3))]),
    "pad_last": (lambda a: F.pad(a, (1, 2)) * 2, lambda d: [_x(d)]),
    "pad_two_dims_value": (lambda a: F.pad(a, (0, 3, 2, 0), value=-1.5) + 1, lambda d: [_x(d)]),
    "pad_crop": (lambda a: F.pad(a, (-1, 1, 0, -2)) * 2, lambda d: [_x(d)]),
    "pad_3d": (lambda a: F.pad(a.exp(), (1, 1, 1, 1, 1, 1)), lambda d: [_x(d, 0, (2, 3, 5))]),
    "pad_crop_all": (lambda a: F.pad(a, (-8, 2)) + 1, lambda d: [_x(d)]),  # cropped to empty
    "pad_empty": (lambda a: F.pad(a, (1, 2)) + 1, lambda d: [_x(d, 0, (4, 0))]),
    "split": (lambda a: [t * 2 for t in a.split(3, -1)], lambda d: [_x(d)]),
    "split_sizes": (lambda a: [t + 1 for t in a.split([2, 6], 1)], lambda d: [_x(d)]),
    "chunk": (lambda a: [t * 2 for t in a.chunk(2, 0)], lambda d: [_x(d)]),
    "unbind": (lambda a: [t + 1 for t in a.unbind(0)], lambda d: [_x(d, shape=(3, 4))]),
    # creation
    "full": (lambda a: a + torch.full((4, 8), 2.5, dtype=a.dtype), lambda d: [_x(d)]),
    "zeros": (lambda a: torch.zeros(4, 8, dtype=a.dtype) - a, lambda d: [_x(d)]),
    "ones": (lambda a: torch.ones(8, dtype=a.dtype) * a, lambda d: [_x(d)]),
    "full_like": (lambda a: torch.full_like(a, -0.75) * a, lambda d: [_x(d)]),
    "zeros_like": (lambda a: torch.zeros_like(a) + a, lambda d: [_x(d)]),
    "ones_like": (lambda a: torch.ones_like(a) - a, lambda d: [_x(d)]),
    "new_ones": (lambda a: a.new_ones(8) * a, lambda d: [_x(d)]),
    "arange": (lambda a: torch.arange(8, dtype=a.dtype) * a, lambda d: [_x(d)]),
    "arange_start": (lambda a: torch.arange(1, 17, 2) * a, lambda d: [_x(d)]),
}

DTYPES = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "bf16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_op(name: str, dtype: torch.dtype) -> None:
    """Each op alone (with the casts and broadcasts it needs) matches eager."""
    fn, make_inputs = CASES[name]
    options = {"attention": "nn"} if name.startswith("sdpa") else {}
    check(fn, make_inputs(dtype), **options)


def test_square_exports_without_decomposition() -> None:
    """`fuseopt.export` (no decompositions: aten.square stays) imports square as x * x."""
    text = fuseopt.export(lambda a: torch.square(a), (torch.randn(3, 4),))
    assert "nn.mul %a, %a : tensor<3x4xf32>" in text, text


def test_integer_bitwise_ops_fall_back_with_a_reason() -> None:
    """bitwise_and of integers has no nn lowering: it runs eagerly, logged, and right."""
    x = torch.arange(12).reshape(3, 4)
    compiled = check(lambda a: (a & 6) + 1, [x], allow_fallback=True)
    assert [f.reason for f in compiled.fallbacks] == [
        "bitwise ops are lowered for bool tensors only"
    ]


def test_integer_and_mixed_promotion() -> None:
    """int64 arithmetic, true division of integers, and int + float promotion."""
    i = torch.arange(32).reshape(4, 8) - 7
    x = randn(4, 8)
    check(lambda a: a * 3 + 1, [i])
    check(lambda a: a / 4, [i])
    check(lambda a, b: a + b, [i, x])
    check(lambda a, b: a.to(torch.bfloat16) * b, [x, randn(4, 8, dtype=torch.bfloat16)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_sign_and_stack(dtype: torch.dtype) -> None:
    """sign (NaN and -0.0 give 0, as PyTorch's) and stack along every dim, against
    eager, with nothing left to PyTorch."""

    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.sign(x), torch.stack([y, y * 2]), torch.stack([y, -y, y], dim=-1) * 2

    x = (randn(3, 4, seed=1) * 4).to(dtype)
    if dtype.is_floating_point:
        x[0, 0], x[0, 1], x[1, 1] = float("nan"), -0.0, 0.0
    y = (randn(3, 4, seed=2) * 4).to(dtype)
    check(fn, [x, y])


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "bf16"])
@pytest.mark.parametrize("eps", [1e-5, None])
@pytest.mark.parametrize("fused", [True, False], ids=["fused_rms_norm", "rms_norm"])
def test_rms_norm_ops_as_imported(dtype: torch.dtype, eps: float | None, fused: bool) -> None:
    """`aten._fused_rms_norm` (what nn.RMSNorm runs on a GPU, kept whole there) and
    `aten.rms_norm` (kept whole by torch.export) import as `nn.rms_norm`, the former's
    rstd an f32 statistic; eps None is the f32 epsilon for 16-bit inputs, as PyTorch's
    (small inputs show it). Imported directly: on this CPU, torch.compile decomposes
    both before the importer sees them."""
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    from fuseopt.backends.contract import resolve_backend
    from fuseopt.frontends.fx.importer import import_graph

    aten = torch.ops.aten

    def fused_norm(x: torch.Tensor, w: torch.Tensor) -> tuple:
        y, rstd = aten._fused_rms_norm.default(x, [8], w, eps)
        return aten.mul.Tensor(y, x), rstd

    def norm(x: torch.Tensor, w: torch.Tensor) -> tuple:
        return (aten.rms_norm.default(x, [8], w, eps),)

    fn = fused_norm if fused else norm
    x, w = _x(dtype) * 0.02, _x(dtype, 1, (8,))
    gm = torch.fx.symbolic_trace(fn)
    FakeTensorProp(gm).propagate(x, w)
    module = import_graph(gm, "norm")
    assert "nn.rms_norm" in str(module)
    got = resolve_backend("interpret").compile(module, "norm", {})(x, w)
    for a, e in zip(got, fn(x, w), strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape
        tol = 2e-2 if a.dtype == torch.bfloat16 else 1e-5
        torch.testing.assert_close(a, e, rtol=tol, atol=tol)
