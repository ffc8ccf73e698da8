"""Slices and concats inside fused kernels (split iteration dims, `analysis`).

A unit-step slice or a concat cuts an axis into parts; convert-nn-to-tile unrolls the
parts (part p of a buffer is the box at `p * part size`), so a group such as RMSNorm +
rotary embedding is one kernel. Every case runs through the tile interpreter against
the nn reference under the heuristic sizes and under forced sizes that loop, cover
several rows, or do not divide the part size; the kernel count is checked, and cases
the tiler cannot index (strided slices, cuts on two axes, too many parts) must still
be correct through smaller kernels. The Triton kernels (CPU interpreter) and the CUDA
kernels (g++ emulation) of the main cases are checked against the tile interpreter.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_nn_fuse_workloads import rmsnorm_rope, t
from test_tile_lowering import TILE, lower_and_compare, schedules

import fuseopt
from fuseopt.dialects import nn, tile
from fuseopt.passes.convert_nn_to_tile.analysis import Group, Untileable, analyze
from fuseopt.pipelines import STANDARD


def qkv_mix(m: int, d: int) -> str:
    """Split a [m, 3d] row into q, k, v; write (2k, v + q, q) back in one row."""
    x, h = t((m, 3 * d)), t((m, d))
    return f"""func.func @main(%x: {x}) -> {x} {{
  %q = nn.slice %x [0:{m}, 0:{d}] : {x} -> {h}
  %k = nn.slice %x [0:{m}, {d}:{2 * d}] : {x} -> {h}
  %v = nn.slice %x [0:{m}, {2 * d}:{3 * d}] : {x} -> {h}
  %two = nn.constant 2.0 : {h}
  %k2 = nn.mul %k, %two : {h}
  %vq = nn.add %v, %q : {h}
  %o = nn.concat %k2, %vq, %q axis 1 : {h}, {h}, {h} -> {x}
  func.return %o : {x}
}}"""


def concat_rows_softmax(a: int, b: int, c: int) -> str:
    """Rows of two inputs stacked, then softmax along the columns (split rows)."""
    x, y, o = t((a, c)), t((b, c)), t((a + b, c))
    return f"""func.func @main(%x: {x}, %y: {y}) -> {o} {{
  %e = nn.exp %y : {y}
  %s = nn.concat %x, %e axis 0 : {x}, {y} -> {o}
  %r = nn.softmax %s axis 1 : {o}
  func.return %r : {o}
}}"""


def uneven_concat(m: int, a: int, b: int) -> str:
    """Concat pieces of different sizes (1 and 2 parts), then an add and a silu."""
    x, y, o = t((m, a)), t((m, b)), t((m, a + b))
    return f"""func.func @main(%x: {x}, %y: {y}, %z: {o}) -> {o} {{
  %c = nn.concat %x, %y axis 1 : {x}, {y} -> {o}
  %s = nn.add %c, %z : {o}
  %r = nn.silu %s : {o}
  func.return %r : {o}
}}"""


def sliced_sum(m: int, n: int) -> str:
    """A reduction over the middle half of each row, and a scaled first quarter."""
    x, q, h, r = t((m, n)), t((m, n // 4)), t((m, n // 2)), t((m,))
    return f"""func.func @main(%x: {x}) -> ({r}, {q}) {{
  %mid = nn.slice %x [0:{m}, {n // 4}:{3 * n // 4}] : {x} -> {h}
  %sq = nn.mul %mid, %mid : {h}
  %s = nn.sum %sq [1] : {h} -> {r}
  %a = nn.slice %x [0:{m}, 0:{n // 4}] : {x} -> {q}
  %k = nn.constant 3.0 : {q}
  %b = nn.mul %a, %k : {q}
  func.return %s, %b : {r}, {q}
}}"""


def strided(m: int, n: int) -> str:
    """Even columns only: a strided slice (not indexed; its own kernel)."""
    x, h = t((m, n)), t((m, n // 2))
    return f"""func.func @main(%x: {x}) -> {h} {{
  %e = nn.exp %x : {x}
  %s = nn.slice %e [0:{m}, 0:{n}:2] : {x} -> {h}
  %r = nn.neg %s : {h}
  func.return %r : {h}
}}"""


def two_axes(m: int, n: int) -> str:
    """A slice cutting rows and columns (two split axes: not indexed)."""
    x, h = t((m, n)), t((m // 2, n // 2))
    return f"""func.func @main(%x: {x}) -> {h} {{
  %e = nn.exp %x : {x}
  %s = nn.slice %e [0:{m // 2}, {n // 2}:{n}] : {x} -> {h}
  %r = nn.neg %s : {h}
  func.return %r : {h}
}}"""


def many_parts(m: int) -> str:
    """Pieces of 3 and 61 columns: 64 parts of one column, past MAX_PARTS."""
    x, y, o = t((m, 3)), t((m, 61)), t((m, 64))
    return f"""func.func @main(%x: {x}, %y: {y}) -> {o} {{
  %c = nn.concat %x, %y axis 1 : {x}, {y} -> {o}
  %r = nn.exp %c : {o}
  func.return %r : {o}
}}"""


ONE_KERNEL = {
    "rope_head128": (rmsnorm_rope(1, 2, 4, 128), "row_reduction"),
    "rope_head10": (rmsnorm_rope(2, 3, 3, 10), "row_reduction_looped"),
    "rope_head48": (rmsnorm_rope(1, 3, 5, 48), "row_reduction_looped"),
    "qkv_mix": (qkv_mix(5, 8), "pointwise"),
    "qkv_mix_ragged": (qkv_mix(7, 6), "pointwise"),
    "concat_rows_softmax": (concat_rows_softmax(2, 6, 40), "row_reduction"),
    "uneven_concat": (uneven_concat(3, 4, 8), "pointwise"),
    "sliced_sum": (sliced_sum(5, 32), "row_reduction"),
}
"""Cases that must become one kernel, with its schedule."""

FORCED = [
    "convert-nn-to-tile{block-cols=4},tile-promote",
    "convert-nn-to-tile{block-rows=2 block-cols=2},tile-promote",
    "convert-nn-to-tile{block=4 max-row-block=8},tile-promote",
    "convert-nn-to-tile{block-cols=32 block-rows=1},tile-promote",
]
"""Forced sizes: looped reductions over parts, several rows per program, blocks that
do not divide the part size (shrunk to a divisor), wide blocks."""

FALLBACK = {
    "strided": strided(4, 16),
    "two_axes": two_axes(4, 16),
    "many_parts": many_parts(5),
}
"""Cases split into several kernels (each correct)."""


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("name", list(ONE_KERNEL))
def test_sliced_groups_are_one_kernel(name: str, dtype: str) -> None:
    text, schedule = ONE_KERNEL[name]
    tiled = lower_and_compare(text.replace("bf16", dtype))
    assert schedules(tiled) == [schedule]


@pytest.mark.parametrize("spec", FORCED)
@pytest.mark.parametrize("name", list(ONE_KERNEL))
def test_forced_sizes_keep_parts_apart(name: str, spec: str) -> None:
    lower_and_compare(ONE_KERNEL[name][0].replace("bf16", "f32"), spec, seed=3)


@pytest.mark.parametrize("name", list(FALLBACK))
def test_cuts_that_are_not_indexed_still_lower_correctly(name: str) -> None:
    tiled = lower_and_compare(FALLBACK[name].replace("bf16", "f32"), TILE)
    assert len(schedules(tiled)) > 1 or "whole_tensor" in schedules(tiled)


def _group(text: str) -> Group:
    func_op = next(iter(fuseopt.parse(text).ops))
    ops = [op for op in func_op.body.block.ops if op.dialect_name() == "nn"]
    made = {r for op in ops for r in op.results}
    inputs = list(dict.fromkeys(x for op in ops for x in op.operands if x not in made))
    return Group(ops, inputs, [ops[-1].results[0]])


def test_analysis_reports_the_split_dim_and_parts() -> None:
    group = _group(qkv_mix(5, 8))
    space = analyze(group)
    assert space.sizes == [5, 8] and space.split_dim == 1
    x = group.inputs[0]
    concat = next(op for op in group.ops if isinstance(op, nn.ConcatOp))
    assert space.parts_of(x) == 3 and space.parts_of(concat.results[0]) == 3
    q = group.ops[0].results[0]
    assert space.parts_of(q) == 1 and space.extent(x, 1) == 24


@pytest.mark.parametrize(
    "text,reason",
    [
        (strided(4, 16), "strided"),
        (two_axes(4, 16), "more than one"),
        (many_parts(5), "64 parts"),
    ],
)
def test_analysis_refuses_cuts_it_cannot_index(text: str, reason: str) -> None:
    with pytest.raises(Untileable, match=reason):
        analyze(_group(text))


@pytest.mark.parametrize("name", ["rope_head128", "rope_head10", "qkv_mix_ragged", "sliced_sum"])
def test_triton_kernels_match_the_tile_interpreter(name: str, tmp_path: Path) -> None:
    from test_triton_kernels import check_each_kernel

    tiled = fuseopt.run_pipeline(fuseopt.parse(ONE_KERNEL[name][0]), STANDARD)
    check_each_kernel(tiled, tmp_path)


@pytest.mark.parametrize("name", ["rope_head128", "rope_head10", "concat_rows_softmax"])
def test_cuda_kernels_match_the_reference(name: str, tmp_path: Path) -> None:
    from test_cuda_emulated import emulator_available, run_emulated

    if not emulator_available():
        pytest.skip("g++ is not installed")
    run_emulated(ONE_KERNEL[name][0], tmp_path, "bf16")


def contiguous_slices(n: int) -> str:
    """Slices that are runs of their operand's buffer, read by kernels nn-fuse cannot
    give them to (Hugging Face's packed-sequence test on position ids: a diff of a
    concat, then cumsum; the concat and cumsum are kernels of their own), and the first
    rows of a matrix read by a library GEMM."""
    x, one, cat = t((1, n), "i64"), t((1, 1), "i64"), t((1, n + 1), "i64")
    m, rows, w, y = t((6, n)), t((3, n)), t((n, 4)), t((2, 4))
    return f"""func.func @main(%pos: {x}, %m: {m}, %w: {w}) -> ({x}, {rows}, {y}) {{
  %first = nn.slice %pos [0:1, 0:1] : {x} -> {one}
  %c1 = nn.constant 1 : {one}
  %dummy = nn.sub %first, %c1 : {one}
  %cat = nn.concat %dummy, %pos axis 1 : {one}, {x} -> {cat}
  %lo = nn.slice %cat [0:1, 0:{n}] : {cat} -> {x}
  %hi = nn.slice %cat [0:1, 1:{n + 1}] : {cat} -> {x}
  %diff = nn.sub %hi, %lo : {x}
  %ones = nn.constant 1 : {x}
  %ne = nn.compare ne, %diff, %ones : {x}
  %flag = nn.cast %ne : {t((1, n), "i1")} -> {x}
  %packed = nn.cumsum %flag axis 1 : {x} -> {x}
  %mid = nn.slice %m [2:5, 0:{n}] : {m} -> {rows}
  %e = nn.exp %mid : {rows}
  %head = nn.slice %m [0:2, 0:{n}] : {m} -> {t((2, n))}
  %y = nn.matmul %head, %w : {t((2, n))}, {w} -> {y}
  func.return %packed, %e, %y : {x}, {rows}, {y}
}}"""


def test_contiguous_slices_are_host_views(tmp_path: Path) -> None:
    """A slice between kernels that is one run of its operand's buffer launches nothing
    (a `tile.view` at an element offset); the program stays correct through the tile
    interpreter, the Triton backend (kernels in the CPU interpreter, host views by
    PyTorch) and the CUDA kernels (emulated)."""
    import torch
    from test_nn_fuse_workloads import random_args

    from fuseopt.backends.kernel_cache import KernelCache
    from fuseopt.backends.triton.backend import compile_module
    from fuseopt.dialects.dtypes import torch_dtype

    text = contiguous_slices(37)
    tiled = lower_and_compare(text, TILE)
    views = [op for op in tiled.walk() if isinstance(op, tile.ViewOp) and op.offset is not None]
    # pos[:, :1], cat[:, :n] and m[:2] (the GEMM's); cat[:, 1:] starts misaligned: its
    # kernel reads it in place (a strided parameter at offset 1), and %mid fuses into the exp
    assert sorted(v.element_offset for v in views) == [0, 0, 0]
    kernels = [op for op in tiled.walk() if isinstance(op, tile.KernelOp)]
    assert not [k for k in kernels if "slice" in k.sym_name.data], kernels
    offsets = [tile.buffer_offset(t) for k in kernels for t in k.param_types]
    assert 1 in offsets

    module = fuseopt.parse(text)
    args = random_args(fuseopt.run_pipeline(module.clone(), "canonicalize"), seed=5)
    expected = fuseopt.interpret(module, "main", *args)
    types = next(iter(module.ops)).function_type.inputs.data  # type: ignore[attr-defined]
    fn = compile_module(module, "main", {}, KernelCache(str(tmp_path / "cache")))
    inputs = [torch.from_numpy(a) for a in args]
    got = fn(*(x.to(torch_dtype(t.element_type)) for x, t in zip(inputs, types, strict=True)))
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g.float().numpy(), np.asarray(e, np.float32), rtol=2e-2)

    from test_cuda_emulated import emulator_available, run_emulated

    if emulator_available():
        run_emulated(text, tmp_path, "f32")


def test_empty_slice_view_runs_in_the_tile_interpreter() -> None:
    """A zero-element run (`x[:, 4:4]`) is a view the interpreter can take."""
    x, e = t((2, 8), "f32"), t((1, 0), "f32")
    text = f"""func.func @main(%x: {x}) -> ({e}, {x}) {{
  %s = nn.slice %x [1:2, 4:4] : {x} -> {e}
  %r = nn.exp %s : {e}
  %y = nn.exp %x : {x}
  func.return %r, %y : {e}, {x}
}}"""
    lower_and_compare(text, TILE)
