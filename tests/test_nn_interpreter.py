"""Every nn op in the reference interpreter against PyTorch eager, on random inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from nn_cases import assert_close, run, single_op_program, tensor_type

import fuseopt
from fuseopt.interpreter import InterpretError

DTYPES = [torch.float32, torch.bfloat16]


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


def randn(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=gen).to(dtype)


def positive(gen: torch.Generator, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (torch.rand(*shape, generator=gen) * 3 + 0.1).to(dtype)


UNARY = {
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "reciprocal": torch.reciprocal,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "gelu": F.gelu,
    "silu": F.silu,
    "erf": torch.erf,
    "sin": torch.sin,
    "cos": torch.cos,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "trunc": torch.trunc,
}
NEEDS_POSITIVE = {"log", "sqrt", "rsqrt", "reciprocal"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name: str, dtype: torch.dtype, gen: torch.Generator) -> None:
    x = (positive if name in NEEDS_POSITIVE else randn)(gen, 3, 17, dtype=dtype)
    t = tensor_type(x)
    (out,) = run(single_op_program(f"nn.{name} %a0 : {t}", [x], t), x)
    assert_close(out, UNARY[name](x))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_tanh(dtype: torch.dtype, gen: torch.Generator) -> None:
    x = randn(gen, 5, 9, dtype=dtype) * 3
    t = tensor_type(x)
    (out,) = run(single_op_program(f'nn.gelu %a0 {{approximate = "tanh"}} : {t}', [x], t), x)
    assert_close(out, F.gelu(x, approximate="tanh"))


@pytest.mark.parametrize("name", ["neg", "abs", "relu"])
def test_unary_int(name: str, gen: torch.Generator) -> None:
    x = torch.randint(-50, 50, (4, 6), generator=gen)
    t = tensor_type(x)
    (out,) = run(single_op_program(f"nn.{name} %a0 : {t}", [x], t), x)
    assert torch.equal(out, UNARY[name](x))


BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "max": torch.maximum,
    "min": torch.minimum,
    "pow": torch.pow,
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name: str, dtype: torch.dtype, gen: torch.Generator) -> None:
    a = (positive if name == "pow" else randn)(gen, 4, 13, dtype=dtype)
    b = randn(gen, 4, 13, dtype=dtype)
    if name == "div":  # keep the divisor away from zero
        b = torch.where(b.abs() < 0.2, torch.full_like(b, 0.5), b)
    t = tensor_type(a)
    (out,) = run(single_op_program(f"nn.{name} %a0, %a1 : {t}", [a, b], t), a, b)
    assert_close(out, BINARY[name](a, b))


@pytest.mark.parametrize("name", ["add", "sub", "mul", "max", "min"])
def test_binary_int(name: str, gen: torch.Generator) -> None:
    a = torch.randint(-100, 100, (3, 7), generator=gen)
    b = torch.randint(-100, 100, (3, 7), generator=gen)
    t = tensor_type(a)
    (out,) = run(single_op_program(f"nn.{name} %a0, %a1 : {t}", [a, b], t), a, b)
    assert torch.equal(out, BINARY[name](a, b))


def test_max_min_propagate_nan() -> None:
    a = torch.tensor([1.0, float("nan"), 3.0])
    b = torch.tensor([float("nan"), 2.0, 1.0])
    t = tensor_type(a)
    for name in ("max", "min"):
        (out,) = run(single_op_program(f"nn.{name} %a0, %a1 : {t}", [a, b], t), a, b)
        assert_close(out, BINARY[name](a, b))


@pytest.mark.parametrize("predicate", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare_and_select(predicate: str, gen: torch.Generator) -> None:
    # values on a coarse grid, so equal pairs occur
    a = torch.round(randn(gen, 6, 8) * 2) / 2
    b = torch.round(randn(gen, 6, 8) * 2) / 2
    t = tensor_type(a)
    text = (
        f"func.func @f(%a: {t}, %b: {t}) -> ({t.replace('f32', 'i1')}, {t}) {{\n"
        f"  %m = nn.compare {predicate}, %a, %b : {t}\n"
        f"  %s = nn.select %m, %a, %b : {t}\n"
        f"  func.return %m, %s : {t.replace('f32', 'i1')}, {t}\n"
        "}\n"
    )
    mask, selected = run(text, a, b)
    expected = getattr(torch, predicate)(a, b)
    assert torch.equal(mask, expected)
    assert torch.equal(selected, torch.where(expected, a, b))


CASTS = [
    (torch.float32, torch.bfloat16),
    (torch.bfloat16, torch.float32),
    (torch.float32, torch.float16),
    (torch.float32, torch.int64),
    (torch.float32, torch.bool),
    (torch.bool, torch.float32),
    (torch.int64, torch.float32),
    (torch.int64, torch.bfloat16),
]


@pytest.mark.parametrize(("src", "dst"), CASTS, ids=[f"{a}->{b}" for a, b in CASTS])
def test_cast(src: torch.dtype, dst: torch.dtype, gen: torch.Generator) -> None:
    x = (randn(gen, 5, 7) * 300).to(src)
    if src == torch.float32 and dst == torch.bool:
        x[0, :3] = 0.0
    src_t = tensor_type(x)
    dst_t = tensor_type(x.to(dst))
    (out,) = run(single_op_program(f"nn.cast %a0 : {src_t} -> {dst_t}", [x], dst_t), x)
    expected = x.to(dst)
    if dst == torch.bfloat16:  # bf16 results come back as bf16-exact float32 values
        assert torch.equal(out, expected.float())
    else:
        assert torch.equal(out, expected)


REDUCTIONS = {
    "sum": torch.sum,
    "mean": torch.mean,
    "reduce_max": torch.amax,
    "reduce_min": torch.amin,
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize(("axes", "keepdim"), [([1], True), ([0, 2], False), ([2], False)])
def test_reductions(
    name: str, dtype: torch.dtype, axes: list[int], keepdim: bool, gen: torch.Generator
) -> None:
    x = randn(gen, 3, 5, 33, dtype=dtype)
    expected = REDUCTIONS[name](x, dim=axes, keepdim=keepdim)
    kd = " keepdim" if keepdim else ""
    rt = tensor_type(expected)
    op = f"nn.{name} %a0 {axes}{kd} : {tensor_type(x)} -> {rt}"
    (out,) = run(single_op_program(op, [x], rt), x)
    # the reference sums exactly then rounds once; eager bf16 may differ by an ulp
    assert_close(out, expected)


def test_sum_int(gen: torch.Generator) -> None:
    x = torch.randint(-1000, 1000, (4, 9), generator=gen)
    op = f"nn.sum %a0 [1] : {tensor_type(x)} -> tensor<4xi64>"
    (out,) = run(single_op_program(op, [x], "tensor<4xi64>"), x)
    assert torch.equal(out, x.sum(dim=1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("a_shape", "b_shape", "ta", "tb"),
    [
        ((5, 7), (7, 3), False, False),
        ((2, 5, 7), (2, 7, 3), False, False),
        ((2, 5, 7), (3, 7), False, True),
        ((2, 7, 5), (7, 3), True, False),
        ((7, 5), (3, 7), True, True),
    ],
)
def test_matmul(
    a_shape, b_shape, ta: bool, tb: bool, dtype: torch.dtype, gen: torch.Generator
) -> None:  # noqa: ANN001,E501
    a = randn(gen, *a_shape, dtype=dtype)
    b = randn(gen, *b_shape, dtype=dtype)
    expected = torch.matmul(a.transpose(-1, -2) if ta else a, b.transpose(-1, -2) if tb else b)
    flags = (" transpose_a" if ta else "") + (" transpose_b" if tb else "")
    rt = tensor_type(expected)
    op = f"nn.matmul %a0, %a1{flags} : {tensor_type(a)}, {tensor_type(b)} -> {rt}"
    (out,) = run(single_op_program(op, [a, b], rt), a, b)
    assert_close(out, expected)


def test_shape_ops(gen: torch.Generator) -> None:
    x = randn(gen, 4, 6)
    y = randn(gen, 4, 2)
    b = randn(gen, 6)
    text = """
func.func @f(%x: tensor<4x6xf32>, %y: tensor<4x2xf32>, %b: tensor<6xf32>)
    -> (tensor<3x8xf32>, tensor<6x4xf32>, tensor<2x2xf32>, tensor<5x4x6xf32>, tensor<4x8xf32>) {
  %0 = nn.reshape %x : tensor<4x6xf32> -> tensor<3x8xf32>
  %1 = nn.transpose %x [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  %2 = nn.slice %x [1:4:2, 0:6:3] : tensor<4x6xf32> -> tensor<2x2xf32>
  %c = nn.reshape %b : tensor<6xf32> -> tensor<1x6xf32>
  %3 = nn.broadcast %c : tensor<1x6xf32> -> tensor<5x4x6xf32>
  %4 = nn.concat %x, %y axis 1 : tensor<4x6xf32>, tensor<4x2xf32> -> tensor<4x8xf32>
  func.return %0, %1, %2, %3, %4 : tensor<3x8xf32>, tensor<6x4xf32>, tensor<2x2xf32>, tensor<5x4x6xf32>, tensor<4x8xf32>
}
"""
    outs = run(text, x, y, b)
    expected = [
        x.reshape(3, 8),
        x.t(),
        x[1:4:2, 0:6:3],
        b.reshape(1, 6).expand(5, 4, 6),
        torch.cat([x, y], dim=1),
    ]
    for out, exp in zip(outs, expected, strict=True):
        assert torch.equal(out, exp)


def test_constants() -> None:
    text = """
func.func @f() -> (tensor<2x3xf32>, tensor<2xbf16>, tensor<3xi64>, tensor<2xi1>) {
  %0 = nn.constant 1.5 : tensor<2x3xf32>
  %1 = nn.constant dense<[1.0, 3.14159]> : tensor<2xbf16>
  %2 = nn.constant dense<[1, -2, 3]> : tensor<3xi64>
  %3 = nn.constant dense<[true, false]> : tensor<2xi1>
  func.return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<2xbf16>, tensor<3xi64>, tensor<2xi1>
}
"""
    a, b, c, d = run(text)
    assert torch.equal(a, torch.full((2, 3), 1.5))
    assert torch.equal(b, torch.tensor([1.0, 3.14159]).to(torch.bfloat16).float())
    assert torch.equal(c, torch.tensor([1, -2, 3]))
    assert torch.equal(d, torch.tensor([True, False]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [0, 1])
def test_softmax(name: str, axis: int, dtype: torch.dtype, gen: torch.Generator) -> None:
    x = randn(gen, 6, 40, dtype=dtype) * 4
    t = tensor_type(x)
    (out,) = run(single_op_program(f"nn.{name} %a0 axis {axis} : {t}", [x], t), x)
    assert_close(out, getattr(torch, name)(x, dim=axis))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_weight", [True, False])
def test_rms_norm(with_weight: bool, dtype: torch.dtype, gen: torch.Generator) -> None:
    x = randn(gen, 3, 4, 32, dtype=dtype)
    w = (1 + 0.5 * randn(gen, 32)).to(dtype)
    t = tensor_type(x)
    if with_weight:
        op = f"nn.rms_norm %a0 weight %a1 {{eps = 1.0e-06 : f64}} : {t}, {tensor_type(w)} -> {t}"
        args = [x, w]
    else:
        op = f"nn.rms_norm %a0 {{eps = 1.0e-06 : f64}} : {t} -> {t}"
        args = [x]
    (out,) = run(single_op_program(op, args, t), *args)
    expected = F.rms_norm(x.float(), (32,), w.float() if with_weight else None, eps=1e-6)
    assert_close(out, expected.to(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm(dtype: torch.dtype, gen: torch.Generator) -> None:
    x = randn(gen, 3, 4, 16, dtype=dtype) * 2 + 1
    w = (1 + 0.5 * randn(gen, 4, 16)).to(dtype)
    b = (0.3 * randn(gen, 4, 16)).to(dtype)
    t, wt = tensor_type(x), tensor_type(w)
    op = (
        f"nn.layer_norm %a0 weight %a1 bias %a2 {{eps = 1.0e-05 : f64, normalized_rank = 2 : i64}}"
        f" : {t}, {wt}, {wt} -> {t}"
    )
    (out,) = run(single_op_program(op, [x, w, b], t), x, w, b)
    assert_close(out, F.layer_norm(x, (4, 16), w, b, eps=1e-5))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
def test_linear(bias: bool, dtype: torch.dtype, gen: torch.Generator) -> None:
    x = randn(gen, 2, 5, 12, dtype=dtype)
    w = (0.3 * randn(gen, 7, 12)).to(dtype)
    b = randn(gen, 7, dtype=dtype)
    args = [x, w, b] if bias else [x, w]
    rt = "tensor<2x5x7x" + ("f32>" if dtype == torch.float32 else "bf16>")
    types = ", ".join(tensor_type(a) for a in args)
    operands = ", ".join(f"%a{i}" for i in range(len(args)))
    (out,) = run(single_op_program(f"nn.linear {operands} : {types} -> {rt}", args, rt), *args)
    assert_close(out, F.linear(x, w, b if bias else None))


def test_fusion_region(gen: torch.Generator) -> None:
    x = randn(gen, 4, 8)
    b = randn(gen, 8)
    text = """
func.func @f(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %y, %r = nn.fusion ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
    %cb = nn.broadcast %c : tensor<8xf32> -> tensor<4x8xf32>
    %s = nn.add %a, %cb : tensor<4x8xf32>
    %g = nn.silu %s : tensor<4x8xf32>
    %t = nn.sum %g [1] : tensor<4x8xf32> -> tensor<4xf32>
    nn.yield %g, %t : tensor<4x8xf32>, tensor<4xf32>
  }
  func.return %y, %r : tensor<4x8xf32>, tensor<4xf32>
}
"""
    y, r = run(text, x, b)
    expected = F.silu(x + b)
    assert_close(y, expected)
    assert_close(r, expected.sum(dim=1))


def test_infinite_and_nan_splats() -> None:
    text = """
func.func @f() -> (tensor<2xf32>, tensor<2xbf16>) {
  %0 = nn.constant 0xFFF0000000000000 : tensor<2xf32>
  %1 = nn.constant 0x7FF8000000000000 : tensor<2xbf16>
  func.return %0, %1 : tensor<2xf32>, tensor<2xbf16>
}
"""
    neg_inf, nan = run(text)
    assert torch.equal(neg_inf, torch.full((2,), -torch.inf))
    assert torch.isnan(nan).all()


def test_interpret_rejects_bad_arguments() -> None:
    module = fuseopt.parse(
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = nn.exp %x : tensor<4xf32>\n  func.return %0 : tensor<4xf32>\n}\n"
    )
    with pytest.raises(InterpretError, match="no function @g"):
        fuseopt.interpret(module, "g", np.zeros(4))
    with pytest.raises(InterpretError, match="takes 1 arguments, 2 were given"):
        fuseopt.interpret(module, "f", np.zeros(4), np.zeros(4))
    with pytest.raises(InterpretError, match=r"expected shape \(4,\)"):
        fuseopt.interpret(module, "f", np.zeros(5))


def test_bf16_inputs_are_rounded() -> None:
    module = fuseopt.parse(
        "func.func @f(%x: tensor<3xbf16>) -> tensor<3xbf16> {\n"
        "  %0 = nn.neg %x : tensor<3xbf16>\n  func.return %0 : tensor<3xbf16>\n}\n"
    )
    x = np.array([1.0 + 2**-10, 3.0, -1e-3], dtype=np.float32)
    (out,) = fuseopt.interpret(module, "f", x)
    expected = -torch.from_numpy(x).to(torch.bfloat16).float()
    assert torch.equal(torch.from_numpy(out), expected)
