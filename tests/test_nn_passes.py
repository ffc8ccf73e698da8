"""nn-decompose, canonicalize and cse keep results: interpret the IR before and after."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import fuseopt
from fuseopt.dialects import nn

# Programs exercising every composite and every canonicalization pattern.
PROGRAMS = {
    "composites_f32": """
func.func @f(%x: tensor<3x16xf32>, %w: tensor<16xf32>, %lw: tensor<8x16xf32>, %lb: tensor<8xf32>)
    -> (tensor<3x16xf32>, tensor<3x16xf32>, tensor<3x16xf32>, tensor<3x16xf32>, tensor<3x8xf32>) {
  %0 = nn.softmax %x axis 1 : tensor<3x16xf32>
  %1 = nn.log_softmax %x axis 0 : tensor<3x16xf32>
  %2 = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<3x16xf32>, tensor<16xf32> -> tensor<3x16xf32>
  %3 = nn.layer_norm %x weight %w bias %w {eps = 1.0e-05 : f64} : tensor<3x16xf32>, tensor<16xf32>, tensor<16xf32> -> tensor<3x16xf32>
  %4 = nn.linear %x, %lw, %lb : tensor<3x16xf32>, tensor<8x16xf32>, tensor<8xf32> -> tensor<3x8xf32>
  func.return %0, %1, %2, %3, %4 : tensor<3x16xf32>, tensor<3x16xf32>, tensor<3x16xf32>, tensor<3x16xf32>, tensor<3x8xf32>
}
""",
    "composites_bf16": """
func.func @f(%x: tensor<2x3x32xbf16>, %w: tensor<32xbf16>, %w2: tensor<3x32xbf16>)
    -> (tensor<2x3x32xbf16>, tensor<2x3x32xbf16>, tensor<2x3x32xbf16>, tensor<2x3x32xbf16>) {
  %0 = nn.softmax %x axis 2 : tensor<2x3x32xbf16>
  %1 = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<2x3x32xbf16>, tensor<32xbf16> -> tensor<2x3x32xbf16>
  %2 = nn.layer_norm %x weight %w2 {eps = 1.0e-05 : f64, normalized_rank = 2 : i64} : tensor<2x3x32xbf16>, tensor<3x32xbf16> -> tensor<2x3x32xbf16>
  %3 = nn.log_softmax %x axis 1 : tensor<2x3x32xbf16>
  func.return %0, %1, %2, %3 : tensor<2x3x32xbf16>, tensor<2x3x32xbf16>, tensor<2x3x32xbf16>, tensor<2x3x32xbf16>
}
""",
    "canonicalizations": """
func.func @f(%x: tensor<4x6xf32>, %h: tensor<4x6xbf16>) -> (tensor<6x4xf32>, tensor<6x4xf32>, tensor<24xf32>, tensor<4x6xbf16>, tensor<4x6xf32>) {
  %one = nn.constant 1.0 : tensor<4x6xf32>
  %zero = nn.constant 0.0 : tensor<4x6xf32>
  %two = nn.constant 2.0 : tensor<f32>
  %0 = nn.mul %x, %one : tensor<4x6xf32>
  %1 = nn.add %zero, %0 : tensor<4x6xf32>
  %2 = nn.div %1, %one : tensor<4x6xf32>
  %3 = nn.sub %2, %zero : tensor<4x6xf32>
  %t1 = nn.transpose %3 [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  %t2 = nn.transpose %t1 [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
  %t3 = nn.transpose %t2 [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  %r1 = nn.reshape %t2 : tensor<4x6xf32> -> tensor<2x12xf32>
  %r2 = nn.reshape %r1 : tensor<2x12xf32> -> tensor<24xf32>
  %c1 = nn.cast %h : tensor<4x6xbf16> -> tensor<4x6xf32>
  %c2 = nn.cast %c1 : tensor<4x6xf32> -> tensor<4x6xbf16>
  %b = nn.broadcast %two : tensor<f32> -> tensor<4x6xf32>
  %s = nn.sqrt %b : tensor<4x6xf32>
  %m = nn.mul %x, %s : tensor<4x6xf32>
  func.return %t3, %t1, %r2, %c2, %m : tensor<6x4xf32>, tensor<6x4xf32>, tensor<24xf32>, tensor<4x6xbf16>, tensor<4x6xf32>
}
""",
    "matmul_transposes": """
func.func @f(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %a: tensor<2x8x4xf32>) -> (tensor<4x16xf32>, tensor<2x4x16xf32>, tensor<8x2x8xf32>) {
  %t = nn.transpose %w [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32>
  %r = nn.matmul %x, %t : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %at = nn.transpose %a [0, 2, 1] : tensor<2x8x4xf32> -> tensor<2x4x8xf32>
  %r2 = nn.matmul %at, %w transpose_b : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %p = nn.transpose %a [1, 0, 2] : tensor<2x8x4xf32> -> tensor<8x2x4xf32>
  %r3 = nn.matmul %p, %x : tensor<8x2x4xf32>, tensor<4x8xf32> -> tensor<8x2x8xf32>
  func.return %r, %r2, %r3 : tensor<4x16xf32>, tensor<2x4x16xf32>, tensor<8x2x8xf32>
}
""",
    "outer_products": """
func.func @f(%f: tensor<1x64x1xf32>, %p: tensor<1x1x7xf32>, %a: tensor<2x1x3xf32>, %b: tensor<5x1xf32>) -> (tensor<1x64x7xf32>, tensor<2x3x5xf32>) {
  %r = nn.matmul %f, %p : tensor<1x64x1xf32>, tensor<1x1x7xf32> -> tensor<1x64x7xf32>
  %r2 = nn.matmul %a, %b transpose_a transpose_b : tensor<2x1x3xf32>, tensor<5x1xf32> -> tensor<2x3x5xf32>
  func.return %r, %r2 : tensor<1x64x7xf32>, tensor<2x3x5xf32>
}
""",
    "folding": """
func.func @f(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<f32>, tensor<3xi1>) {
  %a = nn.constant dense<[0.5, 1.5, -2.0]> : tensor<3xf32>
  %e = nn.exp %a : tensor<3xf32>
  %y = nn.mul %x, %e : tensor<3xf32>
  %s = nn.sum %a [0] : tensor<3xf32> -> tensor<f32>
  %z = nn.constant 0.0 : tensor<3xf32>
  %m = nn.compare gt, %a, %z : tensor<3xf32>
  func.return %y, %s, %m : tensor<3xf32>, tensor<f32>, tensor<3xi1>
}
""",
}

PIPELINES = ["nn-decompose", "canonicalize", "cse", "nn-decompose,canonicalize,cse"]


def random_inputs(module, rng: np.random.Generator) -> list[np.ndarray]:  # noqa: ANN001
    func = next(iter(module.ops))
    return [
        rng.standard_normal(t.get_shape()).astype(np.float32)
        for t in func.function_type.inputs.data
    ]


# decomposition rounds intermediates that the composite kept exact: allow a few ulps
TOLERANCE = {np.dtype(np.float32): 1e-5}
BF16_TOLERANCE = 2e-2


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_pass_preserves_results(name: str, pipeline: str) -> None:
    rng = np.random.default_rng(7)
    before = fuseopt.parse(PROGRAMS[name])
    after = fuseopt.run_pipeline(fuseopt.parse(PROGRAMS[name]), pipeline)
    args = random_inputs(before, rng)
    expected = fuseopt.interpret(before, "f", *args)
    actual = fuseopt.interpret(after, "f", *args)
    bf16 = "bf16" in name or "bf16" in PROGRAMS[name]
    for e, a in zip(expected, actual, strict=True):
        if e.dtype == np.bool_:
            assert np.array_equal(e, a)
        else:
            tol = BF16_TOLERANCE if bf16 else 1e-5
            np.testing.assert_allclose(a, e, rtol=tol, atol=tol)


def test_decompose_leaves_no_composites() -> None:
    module = fuseopt.run_pipeline(fuseopt.parse(PROGRAMS["composites_f32"]), "nn-decompose")
    assert not [op for op in module.walk() if isinstance(op, nn.COMPOSITE_OPS)]


def test_canonicalize_simplifies() -> None:
    module = fuseopt.run_pipeline(fuseopt.parse(PROGRAMS["canonicalizations"]), "canonicalize,cse")
    names = [op.name for op in module.walk() if op.name.startswith("nn.")]
    # everything folds away but one transpose, one reshape, the sqrt(2) constant and its mul
    assert sorted(names) == ["nn.constant", "nn.mul", "nn.reshape", "nn.transpose"]


def test_softmax_is_stable_for_large_inputs() -> None:
    text = """
func.func @f(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = nn.softmax %x axis 1 : tensor<2x4xf32>
  func.return %0 : tensor<2x4xf32>
}
"""
    module = fuseopt.run_pipeline(fuseopt.parse(text), "standard")
    x = np.array([[1000.0, 1001.0, 1002.0, 999.0], [-1000.0, -1000.0, -999.0, -1001.0]], np.float32)
    (y,) = fuseopt.interpret(module, "f", x)
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-6)


HUGE_SPLATS = """
func.func @f() -> (tensor<f32>, tensor<100000xf32>, tensor<f32>, tensor<1x1xf32>, tensor<100000x1xi64>) {
  %c = nn.constant 0.1 : tensor<100000x100000xf32>
  %s = nn.sum %c [0, 1] : tensor<100000x100000xf32> -> tensor<f32>
  %m = nn.mean %c [1] : tensor<100000x100000xf32> -> tensor<100000xf32>
  %x = nn.reduce_max %c [0, 1] : tensor<100000x100000xf32> -> tensor<f32>
  %n = nn.reduce_min %c [0, 1] keepdim : tensor<100000x100000xf32> -> tensor<1x1xf32>
  %i = nn.constant 3 : tensor<100000x100000xi64>
  %is = nn.sum %i [1] keepdim : tensor<100000x100000xi64> -> tensor<100000x1xi64>
  func.return %s, %m, %x, %n, %is : tensor<f32>, tensor<100000xf32>, tensor<f32>, tensor<1x1xf32>, tensor<100000x1xi64>
}
"""


def test_canonicalize_folds_huge_splats_without_materializing() -> None:
    """Reductions of a 10^10-element splat fold symbolically (once: a MemoryError asking
    for 74.5 GiB); an integer sum that would need the elements is left alone."""
    module = fuseopt.parse(HUGE_SPLATS)
    tracemalloc.start()
    try:
        fuseopt.run_pipeline(module, "canonicalize")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
    f32_tenth = float(np.float32(0.1))
    folded = {
        op.result.name_hint: op.splat_value for op in module.walk() if isinstance(op, nn.ConstantOp)
    }
    assert folded["s"] == float(np.float32(f32_tenth * 1e10))
    assert folded["m"] == folded["x"] == folded["n"] == f32_tenth
    assert [op.name for op in module.walk() if isinstance(op, nn.SumOp)] == ["nn.sum"]


def test_canonicalize_reads_dense_splats_from_their_bytes() -> None:
    """A dense splat folds without unpacking its elements into Python floats (once 32
    MiB for this 4 MiB constant)."""
    text = """
func.func @f() -> tensor<1024x1024xf32> {
  %c = nn.constant dense<2.0> : tensor<1024x1024xf32>
  %e = nn.exp %c : tensor<1024x1024xf32>
  func.return %e : tensor<1024x1024xf32>
}
"""
    module = fuseopt.parse(text)
    tracemalloc.start()
    try:
        fuseopt.run_pipeline(module, "canonicalize")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20
    (const,) = [op for op in module.walk() if isinstance(op, nn.ConstantOp)]
    assert const.splat_value == pytest.approx(np.exp(2.0), rel=1e-6)


def _arange_module(n: int, body: str, result: str) -> str:
    values = ", ".join(str(i) for i in range(n))
    return f"""
func.func @f() -> {result} {{
  %pos = nn.constant dense<[{values}]> : tensor<{n}xi64>
{body}
}}
"""


def test_canonicalize_folds_index_vector_chains_past_the_dense_limit() -> None:
    """Hugging Face's packed-sequence test on position ids (`diff(pos, prepend=pos[:1] - 1)
    != 1`, then cumsum) over 2048 positions is a compile-time constant: every step is
    an index vector or a splat, so it folds away whole (it was ten kernels in GPT-2's
    prefill). A dense result that is neither stays computed."""
    n = 2048
    body = f"""  %one = nn.constant 1 : tensor<1x{n}xi64>
  %p = nn.reshape %pos : tensor<{n}xi64> -> tensor<1x{n}xi64>
  %p1 = nn.add %p, %one : tensor<1x{n}xi64>
  %first = nn.slice %p1 [0:1, 0:1] : tensor<1x{n}xi64> -> tensor<1x1xi64>
  %one1 = nn.constant 1 : tensor<1x1xi64>
  %dummy = nn.sub %first, %one1 : tensor<1x1xi64>
  %cat = nn.concat %dummy, %p1 axis 1 : tensor<1x1xi64>, tensor<1x{n}xi64> -> tensor<1x{n + 1}xi64>
  %lo = nn.slice %cat [0:1, 0:{n}] : tensor<1x{n + 1}xi64> -> tensor<1x{n}xi64>
  %hi = nn.slice %cat [0:1, 1:{n + 1}] : tensor<1x{n + 1}xi64> -> tensor<1x{n}xi64>
  %diff = nn.sub %hi, %lo : tensor<1x{n}xi64>
  %ne = nn.compare ne, %diff, %one : tensor<1x{n}xi64>
  %flag = nn.cast %ne : tensor<1x{n}xi1> -> tensor<1x{n}xi64>
  %packed = nn.cumsum %flag axis 1 : tensor<1x{n}xi64> -> tensor<1x{n}xi64>
  %sq = nn.mul %p1, %p1 : tensor<1x{n}xi64>
  func.return %packed, %p1, %sq : tensor<1x{n}xi64>, tensor<1x{n}xi64>, tensor<1x{n}xi64>"""
    result = f"(tensor<1x{n}xi64>, tensor<1x{n}xi64>, tensor<1x{n}xi64>)"
    module = fuseopt.parse(_arange_module(n, body, result))
    fuseopt.run_pipeline(module, "canonicalize")
    ret = next(op for op in module.walk() if op.name == "func.return")
    packed, shifted, squared = (v.owner for v in ret.operands)
    assert isinstance(packed, nn.ConstantOp) and packed.splat_value == 0
    assert isinstance(shifted, nn.ConstantOp) and shifted.arange == (1, 1)
    assert isinstance(squared, nn.MulOp)  # 1, 4, 9, ...: dense data, computed in a kernel


def test_canonicalize_keeps_long_index_vectors_computed() -> None:
    """An index vector longer than MAX_INDEX_FOLD_ELEMENTS is not materialized by folding."""
    from fuseopt.passes.nn_canonicalization_patterns import MAX_INDEX_FOLD_ELEMENTS

    n = MAX_INDEX_FOLD_ELEMENTS + 1
    body = f"""  %one = nn.constant 1 : tensor<{n}xi64>
  %p1 = nn.add %pos, %one : tensor<{n}xi64>
  func.return %p1 : tensor<{n}xi64>"""
    module = fuseopt.parse(_arange_module(n, body, f"tensor<{n}xi64>"))
    fuseopt.run_pipeline(module, "canonicalize")
    assert [op.name for op in module.walk() if isinstance(op, nn.AddOp)] == ["nn.add"]


@pytest.mark.parametrize("result", ["bf16", "f32"])
def test_outer_product_matmul_is_the_matmul_exactly(result: str) -> None:
    """K = 1: the broadcast multiply canonicalize makes of a 16-bit matmul gives the
    matmul's values bit for bit (one product, exact in f32, rounded once)."""
    text = f"""
func.func @f(%a: tensor<3x4x1xbf16>, %b: tensor<1x6xbf16>) -> tensor<3x4x6x{result}> {{
  %r = nn.matmul %a, %b : tensor<3x4x1xbf16>, tensor<1x6xbf16> -> tensor<3x4x6x{result}>
  func.return %r : tensor<3x4x6x{result}>
}}
"""
    after = fuseopt.run_pipeline(fuseopt.parse(text), "canonicalize")
    assert "nn.matmul" not in str(after) and "nn.mul" in str(after)
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((3, 4, 1)) * 100, rng.standard_normal((1, 6)) * 1e-3]
    (want,) = fuseopt.interpret(fuseopt.parse(text), "f", *args)
    (got,) = fuseopt.interpret(after, "f", *args)
    np.testing.assert_array_equal(got, want)
