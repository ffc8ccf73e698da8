"""convert-nn-to-tile and tile-promote, checked numerically: the tile interpreter runs
the lowered program (kernels program by program) and must agree with the nn reference.

Covers every workload of the workload suite at tiny shapes (f32 and bf16) through the full
pipeline, at one element and at ragged sizes under tiny forced tiles; forced tile sizes
(ragged edges, rows longer than one block, K loops, grouped program order, dual GEMM),
batched matmuls, the library-GEMM route, group splitting, the standard pipeline stage
by stage, and located errors for bad options and unsupported input.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from random_nn_graphs import interpret_both_ways
from test_nn_fuse_workloads import (
    WORKLOADS,
    gated_mlp,
    gelu_bias,
    gqa_keys_values,
    layernorm,
    mlp,
    random_args,
    rmsnorm,
    rmsnorm_rope,
    rmsnorm_silu_gate,
    softmax,
)
from xdsl.dialects import func
from xdsl.printer import Printer

import fuseopt
from fuseopt.dialects import nn, tile
from fuseopt.pipelines import FUSE, STANDARD

PRE_FUSE = FUSE.removesuffix(",nn-fuse")
"""The fuse pipeline up to nn-fuse."""
TILE = STANDARD.removeprefix(FUSE + ",")
"""What the standard pipeline runs after the fuse pipeline (tiling, promotion)."""


def kernels(module) -> list[tile.KernelOp]:  # noqa: ANN001 - a ModuleOp
    """The tile.kernel ops of a module."""
    return [op for op in module.walk() if isinstance(op, tile.KernelOp)]


def schedules(module) -> list[str]:  # noqa: ANN001
    """The `schedule` attribute of every kernel."""
    return [k.attributes["schedule"].data for k in kernels(module)]  # type: ignore[union-attr]


def lower_and_compare(text: str, tile_spec: str = TILE, fuse: bool = True, seed: int = 0):  # noqa: ANN201
    """Decompose, (fuse,) tile `text`; assert the tiled program matches the reference
    (the nn IR before tiling, run by the interpreter).

    Returns the tiled module for structural checks.
    """
    reference = fuseopt.run_pipeline(fuseopt.parse(text), PRE_FUSE)
    args = random_args(reference, seed)
    spec = f"nn-fuse,{tile_spec}" if fuse else tile_spec
    # the nn-level passes of `spec` (fusion, the numerics policy) set what the kernels
    # compute: the reference runs them too, so only tiling is compared here
    nn_level = spec.partition("convert-nn-to-tile")[0].rstrip(",")
    oracle = fuseopt.run_pipeline(reference.clone(), nn_level) if nn_level else reference
    expected = fuseopt.interpret(oracle, "main", *args)
    tiled = fuseopt.run_pipeline(reference.clone(), spec)
    assert not [
        op for op in tiled.walk() if op.dialect_name() == "nn" and tile.enclosing_kernel(op) is None
    ], "nn ops left on the host"
    bf16 = "bf16" in text
    for actual in interpret_both_ways(tiled, "main", *args):
        for e, a in zip(expected, actual, strict=True):
            assert e.shape == a.shape and e.dtype == a.dtype
            tol = 2e-2 if bf16 else 2e-5
            np.testing.assert_allclose(a, e, rtol=tol, atol=tol)
    return tiled


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize(
    "name,tiny", [(w[0], w[2]) for w in WORKLOADS], ids=[w[0] for w in WORKLOADS]
)
def test_workloads_tiled_match_reference(name: str, tiny: str, dtype: str) -> None:
    tiled = lower_and_compare(tiny.replace("bf16", dtype))
    kinds = set(schedules(tiled))
    if name.startswith(("rmsnorm", "softmax", "layernorm")):
        assert "row_reduction" in kinds
    if name.startswith("mlp"):
        assert "matmul" in kinds
    if name == "rmsnorm_rope":  # the rotate-half slices and concat are indexed: one kernel
        assert schedules(tiled) == ["row_reduction"]
    if name == "gated_mlp":  # gate and up share x: one dual-GEMM kernel; down (bypassed
        # by nn-fuse at this size) is the library's GEMM, as eager runs it
        assert schedules(tiled) == ["matmul"]
        assert len([op for op in tiled.walk() if isinstance(op, tile.GemmOp)]) == 1


@pytest.mark.parametrize(
    "text,spec,schedule",
    [
        (softmax(5, 100), "convert-nn-to-tile{max-row-block=32}", "row_reduction_looped"),
        (layernorm(3, 70), "convert-nn-to-tile{block-cols=16}", "row_reduction_looped"),
        (rmsnorm(2, 3, 50), "convert-nn-to-tile{block-cols=8}", "row_reduction_looped"),
        (softmax(7, 37), "convert-nn-to-tile{block-rows=2}", "row_reduction"),
        (gelu_bias(5, 37), "convert-nn-to-tile{block-rows=2 block-cols=16}", "pointwise"),
        (
            mlp(10, 24, 40),
            "convert-nn-to-tile{block-m=16 block-n=16 block-k=16 group-m=2}",
            "matmul",
        ),
        (
            mlp(33, 20, 18),
            "convert-nn-to-tile{block-m=16 block-n=16 block-k=8 group-m=1}",
            "matmul",
        ),
        (gated_mlp(19, 40, 24), "convert-nn-to-tile{block-m=16 block-n=16 block-k=16}", "matmul"),
    ],
    ids=[
        "softmax-long-rows",
        "layernorm-long-rows",
        "rmsnorm-long-rows",
        "softmax-ragged",
        "gelu-bias-2d",
        "mlp-k-loop",
        "mlp-ragged",
        "dual-gemm-ragged",
    ],
)
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_forced_tile_sizes(text: str, spec: str, schedule: str, dtype: str) -> None:
    tiled = lower_and_compare(text.replace("bf16", dtype), f"{spec},tile-promote")
    assert schedule in schedules(tiled)


def test_long_rows_are_cached_in_shared_memory() -> None:
    tiled = lower_and_compare(softmax(3, 100), "convert-nn-to-tile{max-row-block=32},tile-promote")
    (k,) = kernels(tiled)
    assert k.attributes["row_cache"] is not None
    assert any(isinstance(op, tile.CopyOp) for op in k.walk())
    assert any(isinstance(op, tile.BarrierOp) for op in k.walk())
    # a budget too small for one row keeps the kernel reading HBM
    small = lower_and_compare(
        softmax(3, 100), "convert-nn-to-tile{max-row-block=32},tile-promote{shared-bytes=64}"
    )
    assert "row_cache" not in kernels(small)[0].attributes


# every workload at one element per dim (rope needs an even head dim), and at ragged
# sizes under tiny forced tiles: every edge masked, every row longer than its block
# (looped, row-cached), K and M/N split over several ragged blocks, grouped order
SINGLE = {
    "rmsnorm": rmsnorm(1, 1, 1),
    "rmsnorm_silu_gate": rmsnorm_silu_gate(1, 1, 1),
    "softmax": softmax(1, 1),
    "layernorm": layernorm(1, 1),
    "gelu_bias": gelu_bias(1, 1),
    "rmsnorm_rope": rmsnorm_rope(1, 1, 1, 2),
    "mlp": mlp(1, 1, 1),
    "mlp_heavy": mlp(1, 1, 1, heavy=True),
    "gated_mlp": gated_mlp(1, 1, 1),
}
RAGGED = {
    "rmsnorm": rmsnorm(1, 3, 37),
    "rmsnorm_silu_gate": rmsnorm_silu_gate(1, 3, 37),
    "softmax": softmax(5, 37),
    "layernorm": layernorm(5, 37),
    "gelu_bias": gelu_bias(5, 37),
    "rmsnorm_rope": rmsnorm_rope(2, 3, 3, 10),
    "mlp": mlp(7, 9, 13),
    "mlp_heavy": mlp(7, 9, 13, heavy=True),
    "gated_mlp": gated_mlp(7, 9, 13),
}
TINY_TILES = (
    "convert-nn-to-tile{block=8 block-rows=2 block-cols=8 block-m=4 block-n=4 block-k=4 "
    "group-m=2 max-row-block=8},tile-promote"
)


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("name", list(SINGLE))
def test_single_element_tensors(name: str, dtype: str) -> None:
    lower_and_compare(SINGLE[name].replace("bf16", dtype))


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("name", list(RAGGED))
def test_ragged_sizes_under_tiny_tiles(name: str, dtype: str) -> None:
    tiled = lower_and_compare(RAGGED[name].replace("bf16", dtype), TINY_TILES)
    if name in ("rmsnorm", "softmax", "layernorm", "rmsnorm_silu_gate"):
        assert "row_reduction_looped" in schedules(tiled)


BATCHED = """func.func @main(%a: tensor<2x3x{m}x{k}xf32>, %b: tensor<2x3x{bk}x{bn}xf32>,
                     %s: tensor<3x1x{n}xf32>) -> tensor<2x3x{m}x{n}xf32> {{
  %0 = nn.fusion ins(%a, %b, %s : tensor<2x3x{m}x{k}xf32>, tensor<2x3x{bk}x{bn}xf32>, tensor<3x1x{n}xf32>) -> tensor<2x3x{m}x{n}xf32> attributes {{kernel_name = "bmm", kind = "matmul", route = "{route}"}} {{
  ^bb0(%x: tensor<2x3x{m}x{k}xf32>, %y: tensor<2x3x{bk}x{bn}xf32>, %z: tensor<3x1x{n}xf32>):
    %p = nn.matmul %x, %y {flags}: tensor<2x3x{m}x{k}xf32>, tensor<2x3x{bk}x{bn}xf32> -> tensor<2x3x{m}x{n}xf32>
    %zb = nn.broadcast %z : tensor<3x1x{n}xf32> -> tensor<2x3x{m}x{n}xf32>
    %q = nn.mul %p, %zb : tensor<2x3x{m}x{n}xf32>
    %r = nn.tanh %q : tensor<2x3x{m}x{n}xf32>
    nn.yield %r : tensor<2x3x{m}x{n}xf32>
  }}
  func.return %0 : tensor<2x3x{m}x{n}xf32>
}}"""


@pytest.mark.parametrize("route", ["kernel", "library_gemm"])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_batched_matmul_epilogue(route: str, transpose_b: bool) -> None:
    m, k, n = 5, 7, 6
    bk, bn = (n, k) if transpose_b else (k, n)
    text = BATCHED.format(
        m=m, k=k, n=n, bk=bk, bn=bn, route=route, flags="transpose_b " if transpose_b else ""
    )
    spec = "convert-nn-to-tile{block-m=16 block-n=16 block-k=16},tile-promote"
    tiled = lower_and_compare(text, spec, fuse=False)
    gemms = [op for op in tiled.walk() if isinstance(op, tile.GemmOp)]
    assert len(gemms) == (route == "library_gemm")


def test_returned_inputs_and_duplicates_are_copied() -> None:
    text = """func.func @main(%x: tensor<3x5xf32>) -> (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>) {
  %e = nn.exp %x : tensor<3x5xf32>
  func.return %x, %e, %e : tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>
}"""
    tiled = lower_and_compare(text, fuse=False)
    assert len([op for op in tiled.walk() if isinstance(op, tile.LaunchOp)]) == 3


def test_views_and_leftovers_become_whole_tensor_kernels() -> None:
    """A strided slice whose reshape no strides express (rows 24 apart, pairs of them
    merged) is copied by a whole-tensor kernel; one whose reshape strides express is
    read in place."""
    text = """func.func @main(%x: tensor<2x3x8xf32>) -> tensor<4x4xf32> {
  %t = nn.slice %x [0:2, 0:2, 0:8:2] : tensor<2x3x8xf32> -> tensor<2x2x4xf32>
  %r = nn.reshape %t : tensor<2x2x4xf32> -> tensor<4x4xf32>
  %s = nn.sin %r : tensor<4x4xf32>
  func.return %s : tensor<4x4xf32>
}"""
    tiled = lower_and_compare(text, fuse=False)
    assert schedules(tiled) == ["whole_tensor", "pointwise"]
    assert any(isinstance(op, tile.ViewOp) for op in tiled.walk())
    viewed = text.replace("0:2, 0:2, 0:8:2", "0:2, 0:3, 0:8:2").replace("2x2x4", "2x3x4")
    viewed = viewed.replace("4x4xf32", "4x6xf32")
    assert schedules(lower_and_compare(viewed, fuse=False)) == ["pointwise"]


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize(
    "perm,shape", [((1, 0), (37, 70)), ((2, 0, 1), (3, 5, 40)), ((0, 2, 1, 3), (2, 5, 3, 16))]
)
def test_transposes_are_indexed_in_pointwise_kernels(
    perm: tuple[int, ...], shape: tuple[int, ...], dtype: str
) -> None:
    """A transpose inside a pointwise group moves loads (a permuted load, then a tile
    transpose into the iteration order), so the group stays one kernel."""
    text = transposed_chain(perm, shape, dtype)
    for spec in (TILE, TINY_TILES):
        tiled = lower_and_compare(text, spec)
        assert schedules(tiled) == ["pointwise"]


@pytest.mark.parametrize("s,d", [(70, 128), (5, 16), (1, 16)])
def test_grouped_query_keys_and_values_are_two_kernels(s: int, d: int) -> None:
    """Llama's keys and values for a library attention call with grouped-query heads:
    RoPE'd keys repeated per query head are one kernel tiling four dims (a repeated head
    is its own tile dim), values transposed and repeated one copy kernel (not a
    transpose kernel and a broadcast kernel); ragged and one-row shapes too."""
    tiled = lower_and_compare(gqa_keys_values(s, 2, 3, d), fuse=True)
    kernels = [op for op in tiled.walk() if isinstance(op, tile.KernelOp)]
    assert [k.schedule.data for k in kernels] == ["pointwise", "pointwise"]
    # (one row: the value transpose only moves a unit dim, a view; the copy is the repeat)
    copy = "_broadcast" if s == 1 else "_transpose_broadcast"
    assert kernels[1].sym_name.data.endswith(copy)


@pytest.mark.parametrize("spec", ["convert-nn-to-tile{block=3}", "convert-nn-to-tile{block-m=0}"])
def test_bad_options_are_reported(spec: str) -> None:
    module = fuseopt.parse(gelu_bias(4, 8))
    with pytest.raises(fuseopt.CompileError, match="power of two"):
        fuseopt.run_pipeline(module, spec)


def test_empty_tensors_need_no_kernel() -> None:
    text = """func.func @main(%x: tensor<0x4xf32>, %b: tensor<4xf32>) -> tensor<0x4xf32> {
  %bb = nn.broadcast %b : tensor<4xf32> -> tensor<0x4xf32>
  %s = nn.add %x, %bb : tensor<0x4xf32>
  %e = nn.exp %s : tensor<0x4xf32>
  func.return %e : tensor<0x4xf32>
}"""
    tiled = lower_and_compare(text)
    assert kernels(tiled) == []


def test_max_over_an_empty_axis_is_a_located_error() -> None:
    """A max of nothing has no value (torch.amax raises); a sum of nothing folds to 0."""
    text = """func.func @main(%x: tensor<0x4xf32>) -> tensor<4xf32> {
  %s = nn.reduce_max %x [0] : tensor<0x4xf32> -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}"""
    with pytest.raises(fuseopt.CompileError, match=r"e\.mlir:2:3: .*zero-size axis"):
        fuseopt.run_pipeline(fuseopt.parse(text, "e.mlir"), STANDARD)


@pytest.mark.parametrize(
    "spec,message",
    [
        ("convert-nn-to-tile{block-rows=4096 block-cols=4096}", "tile of 16777216 elements"),
        ("convert-nn-to-tile{max-row-block=4194304}", "tile of 4194304 elements"),
    ],
)
def test_forced_tiles_past_the_limit_are_located_errors(spec: str, message: str) -> None:
    # 300 rows: nn-split-reductions leaves them whole (it splits fewer than 264 long rows)
    module = fuseopt.parse(softmax(300, 4194304), "big.mlir")
    with pytest.raises(fuseopt.CompileError, match=rf"big\.mlir:2:.*{message}"):
        fuseopt.run_pipeline(module, f"{PRE_FUSE},nn-fuse,{spec}")


def test_composites_must_be_decomposed_first() -> None:
    module = fuseopt.parse(softmax(4, 8), "sm.mlir")
    with pytest.raises(fuseopt.CompileError, match=r"sm\.mlir:2:.*run nn-decompose first"):
        fuseopt.run_pipeline(module, "convert-nn-to-tile")


def test_fusion_groups_map_to_kernels_one_to_one() -> None:
    fused = fuseopt.run_pipeline(fuseopt.parse(layernorm(4, 16)), f"{PRE_FUSE},nn-fuse")
    groups = [op for op in fused.walk() if isinstance(op, nn.FusionOp)]
    tiled = fuseopt.run_pipeline(fused, TILE)
    names = [k.sym_name.data for k in kernels(tiled)]
    assert names == [g.attributes["kernel_name"].data for g in groups]  # type: ignore[union-attr]
    for k in kernels(tiled):
        for knob in ("num_warps", "num_stages", "vector_width", "candidates"):
            assert knob in k.attributes


def test_matrix_vector_group_splits_into_gemm_and_epilogue() -> None:
    # M = 1: the matmul does not tile; the split must not trip over the constant that
    # only the epilogue ties to the matmul's axes
    text = """func.func @main(%a: tensor<3x1x2xf32>, %b: tensor<3x2x2xf32>) -> tensor<3x1x2xf32> {
  %0 = nn.fusion ins(%a, %b : tensor<3x1x2xf32>, tensor<3x2x2xf32>) -> tensor<3x1x2xf32> attributes {kernel_name = "mv", kind = "matmul", route = "kernel"} {
  ^bb0(%x: tensor<3x1x2xf32>, %y: tensor<3x2x2xf32>):
    %n = nn.neg %x : tensor<3x1x2xf32>
    %p = nn.matmul %x, %y : tensor<3x1x2xf32>, tensor<3x2x2xf32> -> tensor<3x1x2xf32>
    %c = nn.constant 2.0 : tensor<3x1x2xf32>
    %m = nn.mul %p, %c : tensor<3x1x2xf32>
    %s = nn.add %m, %n : tensor<3x1x2xf32>
    nn.yield %s : tensor<3x1x2xf32>
  }
  func.return %0 : tensor<3x1x2xf32>
}"""
    tiled = lower_and_compare(text, fuse=False)
    assert len([op for op in tiled.walk() if isinstance(op, tile.GemmOp)]) == 1


@pytest.mark.parametrize(
    "name,tiny", [(w[0], w[2]) for w in WORKLOADS], ids=[w[0] for w in WORKLOADS]
)
def test_standard_pipeline_stage_by_stage(name: str, tiny: str) -> None:
    # the standard pipeline ends in tile IR; every stage prints, parses back and
    # continues to the same result (custom and generic forms)
    direct = fuseopt.run_pipeline(fuseopt.parse(tiny), "standard")
    assert not [op for op in direct.walk() if isinstance(op, nn.FusionOp)]
    assert kernels(direct) and all("num_warps" in k.attributes for k in kernels(direct))
    text = tiny
    for stage in STANDARD.split(","):
        text = str(fuseopt.run_pipeline(fuseopt.parse(text), stage))
    assert text == str(direct)
    generic = io.StringIO()
    Printer(stream=generic, print_generic_format=True).print_op(direct)
    assert str(fuseopt.parse(generic.getvalue())) == str(direct)


def test_whole_32768_wide_rows_in_registers_when_asked() -> None:
    # the default loops over chunks past 8192 (row-cached); max-row-block=32768 keeps a
    # whole 32768-wide row in one program (one HBM pass without a shared-memory cache)
    spec = "convert-nn-to-tile{max-row-block=32768},tile-promote"
    tiled = lower_and_compare(softmax(2, 32768), spec)
    (k,) = kernels(tiled)
    assert k.attributes["schedule"].data == "row_reduction"  # type: ignore[union-attr]
    assert k.attributes["num_warps"].value.data == 32  # type: ignore[union-attr]
    default = lower_and_compare(softmax(2, 32768))
    assert schedules(default) == ["row_reduction_looped"]


def test_unfused_ops_cost_what_eager_costs() -> None:
    """A bypassed matmul is tile.gemm and an unfused broadcast is indexing in its user's
    kernel: one kernel besides the GEMM, and the results equal the reference."""
    text = """
func.func @main(%x: tensor<8x32xbf16>, %w: tensor<16x32xbf16>, %b: tensor<16xbf16>) -> (tensor<8x16xbf16>, tensor<8x16xbf16>) {
  %m = nn.matmul %x, %w transpose_b : tensor<8x32xbf16>, tensor<16x32xbf16> -> tensor<8x16xbf16>
  %bb = nn.broadcast %b : tensor<16xbf16> -> tensor<8x16xbf16>
  %r = nn.add %m, %bb : tensor<8x16xbf16>
  %s = nn.mul %bb, %r : tensor<8x16xbf16>
  func.return %r, %s : tensor<8x16xbf16>, tensor<8x16xbf16>
}
"""
    tiled = lower_and_compare(text, fuse=False)
    assert schedules(tiled) == ["pointwise", "pointwise"]
    assert len([op for op in tiled.walk() if isinstance(op, tile.GemmOp)]) == 1
    kernels = [op.sym_name.data for op in tiled.walk() if isinstance(op, tile.KernelOp)]
    assert kernels == ["main_add", "main_mul"]


FILECHECK_CASES = (
    Path(__file__).resolve().parent.parent / "filecheck/passes/convert-nn-to-tile.mlir"
)
CASE_SPECS = {
    "heuristic": "convert-nn-to-tile",
    "forced": "convert-nn-to-tile{block=32 block-rows=2 block-cols=16 block-m=16 block-n=32 "
    "block-k=16 group-m=2}",
    "looped": "convert-nn-to-tile{max-row-block=32}",
    "per-level": "convert-nn-to-tile{max-row-block=32 online-stats=false}",
    "cols": "convert-nn-to-tile{block-cols=32}",
}
"""The RUN lines of the FileCheck file that produce IR (the others are errors)."""


def filecheck_chunks() -> dict[str, str]:
    """The cases of filecheck/passes/convert-nn-to-tile.mlir by function name."""
    out = {}
    for chunk in FILECHECK_CASES.read_text().split("// -----"):
        names = re.findall(r"^func\.func @(\w+)", chunk, re.MULTILINE)
        if names:
            out[names[0]] = chunk
    return out


@pytest.mark.parametrize("spec", list(CASE_SPECS.values()), ids=list(CASE_SPECS))
@pytest.mark.parametrize("case", sorted(filecheck_chunks()))
def test_filecheck_cases_compute_what_the_reference_computes(case: str, spec: str) -> None:
    """Each case of the FileCheck file, under each of its RUN lines, interpreted before
    (nn reference, fusions included) and after tiling on random inputs."""
    text = filecheck_chunks()[case]
    before = fuseopt.parse(text)
    for fn in [op for op in before.ops if isinstance(op, func.FuncOp)]:
        name = fn.sym_name.data
        args = [
            np.random.default_rng(7).uniform(-1.5, 1.5, tuple(t.get_shape())).astype(np.float32)
            for t in fn.function_type.inputs.data
        ]
        expected = fuseopt.interpret(before, name, *args)
        after = fuseopt.run_pipeline(fuseopt.parse(text), spec)
        bf16 = "bf16" in text
        for actual in interpret_both_ways(after, name, *args):
            for e, a in zip(expected, actual, strict=True):
                tol = 2e-2 if bf16 else 2e-5
                np.testing.assert_allclose(a, e, rtol=tol, atol=tol)


def test_unwritten_outputs_hold_the_chosen_value() -> None:
    text = """func.func @f(%x: memref<4xf32>, %o: memref<4xf32> {tile.output}, %i: memref<2xi32> {tile.output}) {
  func.return
}"""
    module = fuseopt.parse(text)
    out, ints = fuseopt.interpret(module, "f", np.zeros(4, np.float32))
    assert np.isnan(out).all() and (ints == 0).all()
    out, ints = fuseopt.interpret(module, "f", np.zeros(4, np.float32), unwritten=(5.0, 3))
    assert (out == 5.0).all() and (ints == 3).all()


TRANSPOSED = {
    "2d": ((1, 0), (37, 70)),
    "heads": ((0, 2, 1, 3), (2, 5, 3, 16)),
}
"""Transposes in pointwise groups: across the last two dims (square tiles turned in
registers), and of outer dims only (1-D tiles, permuted offsets)."""


def transposed_chain(perm: tuple[int, ...], shape: tuple[int, ...], dtype: str) -> str:
    """exp(x), transposed, times z: one pointwise kernel."""
    out = tuple(shape[p] for p in perm)
    x = f"tensor<{'x'.join(map(str, shape))}x{dtype}>"
    y = f"tensor<{'x'.join(map(str, out))}x{dtype}>"
    return f"""func.func @main(%x: {x}, %z: {y}) -> {y} {{
  %e = nn.exp %x : {x}
  %t = nn.transpose %e {list(perm)} : {x} -> {y}
  %s = nn.mul %t, %z : {y}
  func.return %s : {y}
}}"""


@pytest.mark.parametrize("case", list(TRANSPOSED))
def test_transposed_kernels_in_triton_and_cuda(case: str, tmp_path: Path) -> None:
    """The printed Triton kernel (CPU interpreter) and CUDA kernel (g++ emulation) of a
    fused transpose agree with the tile interpreter / the nn reference."""
    from test_cuda_emulated import emulator_available, run_emulated
    from test_triton_kernels import check_each_kernel

    perm, shape = TRANSPOSED[case]
    text = transposed_chain(perm, shape, "bf16")
    check_each_kernel(fuseopt.run_pipeline(fuseopt.parse(text), STANDARD), tmp_path)
    if emulator_available():
        run_emulated(text, tmp_path, "bf16")


@pytest.mark.parametrize(
    ("fn", "shape", "vector"),
    [
        (lambda x: x.argmax(1), (300, 32000), 8),  # an i64 per row, rows cached: 2 before
        (lambda x: x.sum(1), (4095, 4096), 8),  # the results' length 4095 made it 1
        (lambda x: x.amax(1), (64, 4004), 4),  # 8 would leave odd rows misaligned
    ],
    ids=["argmax", "odd_rows", "rows_of_4004"],
)
def test_row_results_do_not_narrow_the_vector(
    fn: object, shape: tuple[int, int], vector: int
) -> None:
    """tile-promote's vector width comes from the buffers moved more than one element per
    row (and a row cache's source): a row reduction's results, one per row, narrowed it."""
    import torch

    from fuseopt.backends.cuda.backend import tile_pipeline

    torch._dynamo.reset()
    x = torch.zeros(shape, dtype=torch.bfloat16)
    (region,) = fuseopt.compile(fn, (x,), backend="interpret", strict=True).regions
    lowered = fuseopt.run_pipeline(region.imported.clone(), tile_pipeline())
    assert [k.vector_width.value.data for k in kernels(lowered)] == [vector]
