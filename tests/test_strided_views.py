"""Slices read in place (`strided_views`): an unfused slice whose readers are kernels is
passed to them as a strided view of its operand's buffer, not copied.

Each case runs through the tile interpreter against the nn reference (the strided
parameter is a NumPy strided view there), at shapes the suite does not use: one
element, ragged sizes, steps of 2 and 3, every axis of a 3-D tensor, a slice of a
slice. Cases a kernel cannot read in place (a gather, a reduction over axes that are
not contiguous in the view, a library GEMM) must still be right, through a copy. The
Triton kernels (CPU interpreter) and the CUDA kernels (g++ emulation) are checked
against the same reference.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_nn_fuse_workloads import t
from test_tile_lowering import TILE, lower_and_compare

import fuseopt
from fuseopt.dialects import tile
from fuseopt.pipelines import STANDARD


def unary_of_slice(dims: tuple[int, ...], spec: str, out: tuple[int, ...], op: str = "exp") -> str:
    """`op` of one slice of an input (the slice alone: nn-fuse leaves it unfused when
    the group cannot index it)."""
    x, r = t(dims, "f32"), t(out, "f32")
    return f"""func.func @main(%x: {x}) -> {r} {{
  %s = nn.slice %x [{spec}] : {x} -> {r}
  %y = nn.{op} %s : {r}
  func.return %y : {r}
}}"""


def even_times_odd(m: int, n: int) -> str:
    """x[:, ::2] * x[:, 1::2]: two strided views of one buffer."""
    x, h = t((m, 2 * n), "f32"), t((m, n), "f32")
    return f"""func.func @main(%x: {x}) -> {h} {{
  %e = nn.slice %x [0:{m}, 0:{2 * n}:2] : {x} -> {h}
  %o = nn.slice %x [0:{m}, 1:{2 * n}:2] : {x} -> {h}
  %y = nn.mul %e, %o : {h}
  func.return %y : {h}
}}"""


def slice_of_slice(m: int, n: int) -> str:
    """Rows then columns (x[1:-1][:, 3:-2]): the views compose."""
    x, a, b = t((m, n), "f32"), t((m - 2, n), "f32"), t((m - 2, n - 5), "f32")
    return f"""func.func @main(%x: {x}) -> {b} {{
  %a = nn.slice %x [1:{m - 1}, 0:{n}] : {x} -> {a}
  %b = nn.slice %a [0:{m - 2}, 3:{n - 2}] : {a} -> {b}
  %y = nn.tanh %b : {b}
  func.return %y : {b}
}}"""


def strided_row_sum(m: int, n: int) -> str:
    """A row reduction over every third column, after an exp."""
    k = len(range(0, n, 3))
    x, h, r = t((m, n), "f32"), t((m, k), "f32"), t((m,), "f32")
    return f"""func.func @main(%x: {x}) -> {r} {{
  %s = nn.slice %x [0:{m}, 0:{n}:3] : {x} -> {h}
  %e = nn.exp %s : {h}
  %r = nn.sum %e [1] : {h} -> {r}
  func.return %r : {r}
}}"""


def strided_sum_two_axes(a: int, b: int, c: int) -> str:
    """A sum over the last two axes of x[:, :, :-2:2]: not contiguous in the view (a
    row of the view ends before the next begins), so they cannot merge into one
    reduction dim; the kernel reads a copy."""
    k = len(range(0, c - 2, 2))
    x, h, r = t((a, b, c), "f32"), t((a, b, k), "f32"), t((a,), "f32")
    return f"""func.func @main(%x: {x}) -> {r} {{
  %s = nn.slice %x [0:{a}, 0:{b}, 0:{c - 2}:2] : {x} -> {h}
  %e = nn.exp %s : {h}
  %r = nn.sum %e [1, 2] : {h} -> {r}
  func.return %r : {r}
}}"""


def slice_with_broadcast(m: int, n: int) -> str:
    """A strided column of x broadcast against the rows of y."""
    x, col, cb, y = t((m, n), "f32"), t((m, 1), "f32"), t((m, n), "f32"), t((m, n), "f32")
    return f"""func.func @main(%x: {x}, %y: {y}) -> {y} {{
  %c = nn.slice %x [0:{m}, 1:2] : {x} -> {col}
  %b = nn.broadcast %c : {col} -> {cb}
  %r = nn.mul %b, %y : {y}
  func.return %r : {y}
}}"""


def slice_into_matmul_and_kernel(m: int, n: int) -> str:
    """One strided slice read by a GEMM (needs a copy) and by an add (in place)."""
    x, h, w, o = t((m, 2 * n), "f32"), t((m, n), "f32"), t((n, n), "f32"), t((m, n), "f32")
    return f"""func.func @main(%x: {x}, %w: {w}) -> ({o}, {h}) {{
  %s = nn.slice %x [0:{m}, 0:{2 * n}:2] : {x} -> {h}
  %mm = nn.matmul %s, %w : {h}, {w} -> {o}
  %one = nn.constant 1.0 : {h}
  %a = nn.add %s, %one : {h}
  func.return %mm, %a : {o}, {h}
}}"""


def run_of_a_view(m: int, n: int) -> str:
    """Rows 1 to 2 of x[:, ::2]: one contiguous run of the view (an aligned one, were
    the view a buffer), read in place as a view of x."""
    x, h, r = t((m, 2 * n), "f32"), t((m, n), "f32"), t((2, n), "f32")
    return f"""func.func @main(%x: {x}) -> {r} {{
  %s = nn.slice %x [0:{m}, 0:{2 * n}:2] : {x} -> {h}
  %rows = nn.slice %s [1:3, 0:{n}] : {h} -> {r}
  %y = nn.exp %rows : {r}
  func.return %y : {r}
}}"""


def unread_slice_of_a_view() -> str:
    """A slice of a strided slice that nothing reads (a random graph found it)."""
    x, h = t((2,), "f32"), t((1,), "f32")
    return f"""func.func @main(%x: {x}) -> {x} {{
  %s = nn.slice %x [0:1:2] : {x} -> {h}
  %u = nn.slice %s [0:1] : {h} -> {h}
  %y = nn.neg %x : {x}
  func.return %y : {x}
}}"""


def returned_slice_of_a_view(m: int, n: int) -> str:
    """A slice of a strided slice that is returned (needs a buffer of its own)."""
    x, h, r = t((m, 2 * n), "f32"), t((m, n), "f32"), t((m, n - 1), "f32")
    return f"""func.func @main(%x: {x}) -> ({r}, {h}) {{
  %s = nn.slice %x [0:{m}, 1:{2 * n}:2] : {x} -> {h}
  %c = nn.slice %s [0:{m}, 1:{n}] : {h} -> {r}
  %y = nn.exp %s : {h}
  func.return %c, %y : {r}, {h}
}}"""


def take_and_read(m: int, n: int) -> str:
    """A strided view that one op of the group gathers from (positions 0..k-1 of its
    flat order, as an index vector) and another reads as a tile: gathers index by flat
    position, so the kernel reads a copy."""
    k = len(range(0, n, 2))
    x, h, i, row = t((m, n), "f32"), t((m, k), "f32"), t((m, k), "i64"), t((k,), "i64")
    positions = ", ".join(str(p) for p in range(k))
    return f"""func.func @main(%x: {x}) -> {h} {{
  %s = nn.slice %x [0:{m}, 0:{n}:2] : {x} -> {h}
  %e = nn.exp %s : {h}
  %p = nn.constant dense<[{positions}]> : {row}
  %i = nn.broadcast %p : {row} -> {i}
  %g = nn.take %s, %i : {h}, {i} -> {h}
  %y = nn.add %e, %g : {h}
  func.return %y : {h}
}}"""


def projection_heads(m: int, heads: int, kv: int, d: int) -> str:
    """A GEMM projecting query and key heads at once, the query columns split into
    heads and read by one kernel, each key head's second half by another (nn-fuse puts
    the query's reshape in its kernel: taken out as a view, `peel_input_reshapes`)."""
    n = (heads + kv) * d
    x, w, y = t((m, 16), "f32"), t((n, 16), "f32"), t((m, n), "f32")
    q, k = t((m, heads * d), "f32"), t((m, kv * d), "f32")
    qh, kh, half = t((m, heads, d), "f32"), t((m, kv, d), "f32"), t((m, kv, d // 2), "f32")
    return f"""func.func @main(%x: {x}, %w: {w}) -> ({qh}, {half}) {{
  %y = nn.matmul %x, %w transpose_b : {x}, {w} -> {y}
  %q = nn.slice %y [0:{m}, 0:{heads * d}] : {y} -> {q}
  %k = nn.slice %y [0:{m}, {heads * d}:{n}] : {y} -> {k}
  %qh = nn.reshape %q : {q} -> {qh}
  %kh = nn.reshape %k : {k} -> {kh}
  %e = nn.exp %qh : {qh}
  %h = nn.slice %kh [0:{m}, 0:{kv}, {d // 2}:{d}] : {kh} -> {half}
  %n = nn.neg %h : {half}
  func.return %e, %n : {qh}, {half}
}}"""


def normed_query_heads(m: int, heads: int, kv: int, d: int) -> str:
    """A q-norm's statistics (Qwen3's, OLMo-2's): the sum of squares over each head of
    the query columns of a merged projection, split into heads inside the reduction's
    kernel."""
    n = (heads + kv) * d
    x, w, y = t((m, 16), "f32"), t((n, 16), "f32"), t((m, n), "f32")
    q, qh, r = t((m, heads * d), "f32"), t((m, heads, d), "f32"), t((m, heads), "f32")
    return f"""func.func @main(%x: {x}, %w: {w}) -> {r} {{
  %y = nn.matmul %x, %w transpose_b : {x}, {w} -> {y}
  %q = nn.slice %y [0:{m}, 0:{heads * d}] : {y} -> {q}
  %qh = nn.reshape %q : {q} -> {qh}
  %sq = nn.mul %qh, %qh : {qh}
  %s = nn.sum %sq [2] : {qh} -> {r}
  func.return %s : {r}
}}"""


def reshape_merging_apart_dims(m: int, n: int) -> str:
    """x[:, :, 1:] reshaped to rows of (n - 1) * 3 elements: its dims are not contiguous
    with each other, so no strides express the reshape; the kernel reads a copy."""
    x, s, r = t((m, 3, n), "f32"), t((m, 3, n - 1), "f32"), t((m, 3 * (n - 1)), "f32")
    return f"""func.func @main(%x: {x}) -> {r} {{
  %s = nn.slice %x [0:{m}, 0:3, 1:{n}] : {x} -> {s}
  %r = nn.reshape %s : {s} -> {r}
  %y = nn.exp %r : {r}
  func.return %y : {r}
}}"""


def returned_reshape_of_a_slice(m: int, n: int) -> str:
    """A reshaped column slice that is returned (a buffer of its own) and also read."""
    x, s, r = t((m, 2 * n), "f32"), t((m, n), "f32"), t((m, 2, n // 2), "f32")
    return f"""func.func @main(%x: {x}) -> ({r}, {r}) {{
  %s = nn.slice %x [0:{m}, {n}:{2 * n}] : {x} -> {s}
  %r = nn.reshape %s : {s} -> {r}
  %y = nn.exp %r : {r}
  func.return %r, %y : {r}, {r}
}}"""


def rotated_query_heads(m: int, heads: int, kv: int, d: int) -> str:
    """RoPE's rotation of the query heads of a merged query/key projection: the query
    columns of the GEMM's result split into heads (a reshape nn-fuse leaves outside the
    kernel, which transposes and slices them) and read by one kernel in place."""
    n = (heads + kv) * d
    x, w, y = t((m, 16), "f32"), t((n, 16), "f32"), t((m, n), "f32")
    q, qh, th, half = (
        t((m, heads * d), "f32"),
        t((m, heads, d), "f32"),
        t((heads, m, d), "f32"),
        t((heads, m, d // 2), "f32"),
    )
    return f"""func.func @main(%x: {x}, %w: {w}) -> {th} {{
  %y = nn.matmul %x, %w transpose_b : {x}, {w} -> {y}
  %q = nn.slice %y [0:{m}, 0:{heads * d}] : {y} -> {q}
  %qh = nn.reshape %q : {q} -> {qh}
  %t = nn.transpose %qh [1, 0, 2] : {qh} -> {th}
  %a = nn.slice %t [0:{heads}, 0:{m}, 0:{d // 2}] : {th} -> {half}
  %b = nn.slice %t [0:{heads}, 0:{m}, {d // 2}:{d}] : {th} -> {half}
  %n = nn.neg %b : {half}
  %c = nn.concat %n, %a axis 2 : {half}, {half} -> {th}
  %e = nn.mul %t, %c : {th}
  func.return %e : {th}
}}"""


CASES = {
    "rotated_query_heads": rotated_query_heads(6, 3, 1, 8),
    "rotated_query_heads_ragged": rotated_query_heads(5, 3, 2, 6),
    "rotated_query_heads_one_row": rotated_query_heads(1, 2, 1, 8),
    "projection_heads": projection_heads(6, 3, 1, 8),
    "normed_query_heads": normed_query_heads(5, 4, 2, 8),
    "normed_query_heads_ragged": normed_query_heads(3, 3, 1, 6),
    "projection_heads_one_row": projection_heads(1, 2, 2, 4),
    "reshape_merging_apart_dims": reshape_merging_apart_dims(4, 5),
    "returned_reshape_of_a_slice": returned_reshape_of_a_slice(3, 6),
    "take_and_read": take_and_read(4, 20),
    "run_of_a_view": run_of_a_view(5, 4),
    "unread_slice_of_a_view": unread_slice_of_a_view(),
    "returned_slice_of_a_view": returned_slice_of_a_view(3, 5),
    "narrow_gelu": unary_of_slice((12, 40), "1:11, 4:36", (10, 32), "gelu"),
    "narrow_ragged": unary_of_slice((7, 37), "2:7, 3:34", (5, 31)),
    "one_element": unary_of_slice((3, 5), "1:2, 2:3", (1, 1)),
    "every_third_column": unary_of_slice((5, 10), "0:5, 1:10:3", (5, 3)),
    "every_other_row": unary_of_slice((9, 6), "0:9:2, 0:6", (5, 6)),
    "middle_axis": unary_of_slice((3, 8, 5), "0:3, 2:7:2, 0:5", (3, 3, 5), "neg"),
    "first_axis": unary_of_slice((6, 4, 3), "1:6:2, 0:4, 0:3", (3, 4, 3), "neg"),
    "last_axis_3d": unary_of_slice((2, 3, 20), "0:2, 0:3, 3:19:4", (2, 3, 4), "neg"),
    "even_times_odd": even_times_odd(6, 20),
    "slice_of_slice": slice_of_slice(9, 23),
    "strided_row_sum": strided_row_sum(6, 50),
    "strided_sum_two_axes": strided_sum_two_axes(3, 4, 10),
    "slice_with_broadcast": slice_with_broadcast(5, 12),
    "slice_into_matmul_and_kernel": slice_into_matmul_and_kernel(4, 8),
}

IN_PLACE = [
    "run_of_a_view",
    "narrow_gelu",
    "narrow_ragged",
    "one_element",
    "every_third_column",
    "every_other_row",
    "middle_axis",
    "first_axis",
    "last_axis_3d",
    "even_times_odd",
    "slice_of_slice",
    "strided_row_sum",
]
"""Cases whose slices are all read in place: one kernel, no copy."""

RESHAPED_IN_PLACE = [
    "normed_query_heads",
    "normed_query_heads_ragged",
    "rotated_query_heads",
    "rotated_query_heads_ragged",
    "rotated_query_heads_one_row",
]
"""Cases whose slice is read in place through a reshape: one kernel, no copy."""


def kernels(module: object) -> list[tile.KernelOp]:
    """The kernels of a tiled module."""
    return [op for op in module.walk() if isinstance(op, tile.KernelOp)]  # type: ignore[attr-defined]


def strided_params(module: object) -> list[object]:
    """The strided parameter types of a tiled module's kernels."""
    return [p for k in kernels(module) for p in k.param_types if tile.strided_layout(p)]


@pytest.mark.parametrize("name", list(CASES))
def test_slices_read_in_place_match_the_reference(name: str) -> None:
    tiled = lower_and_compare(CASES[name], TILE)
    if name in IN_PLACE:
        assert len(kernels(tiled)) == 1, [k.sym_name.data for k in kernels(tiled)]
        assert strided_params(tiled)
    if name in RESHAPED_IN_PLACE:
        assert len(kernels(tiled)) == 1, [k.sym_name.data for k in kernels(tiled)]
    if name == "projection_heads":  # a kernel per reader, no copy
        assert len(kernels(tiled)) == 2, [k.sym_name.data for k in kernels(tiled)]
        # one row's columns are a contiguous run: a plain view, not a strided one
        assert bool(strided_params(tiled)) == (name != "rotated_query_heads_one_row")


@pytest.mark.parametrize(
    "spec",
    [
        "convert-nn-to-tile{block-rows=2 block-cols=4},tile-promote",
        "convert-nn-to-tile{block=4 max-row-block=8},tile-promote",
    ],
)
@pytest.mark.parametrize("name", ["narrow_ragged", "middle_axis", "strided_row_sum"])
def test_forced_small_tiles(name: str, spec: str) -> None:
    lower_and_compare(CASES[name], spec, seed=4)


def test_fallbacks_copy_what_a_kernel_cannot_read_in_place() -> None:
    """A reduction over two axes not contiguous in the view, and a GEMM operand, read
    copies (a kernel of their own); the add next to the GEMM still reads in place."""
    two_axes = lower_and_compare(CASES["strided_sum_two_axes"], TILE)
    assert len(kernels(two_axes)) == 2 and not strided_params(two_axes)
    gemm = lower_and_compare(CASES["slice_into_matmul_and_kernel"], TILE)
    assert any(isinstance(op, tile.GemmOp) for op in gemm.walk())
    assert len(kernels(gemm)) == 2  # the copy for the GEMM, the add


def test_reshapes_merging_dims_apart_read_a_copy() -> None:
    tiled = lower_and_compare(CASES["reshape_merging_apart_dims"], TILE)
    assert len(kernels(tiled)) == 2 and not strided_params(tiled)


@pytest.mark.parametrize(
    ("shape", "strides", "new_shape"),
    [
        ((4, 6), (12, 1), (4, 2, 3)),  # split a column slice's row
        ((4, 6), (12, 1), (24,)),  # merge dims apart: not a view
        ((4, 2, 3), (12, 6, 1), (4, 6)),  # merge dims next to each other
        ((4, 2, 3), (12, 6, 1), (8, 3)),  # merge rows apart: not a view
        ((3, 4), (8, 2), (3, 2, 2)),  # a stride of 2
        ((1, 5), (7, 1), (5, 1)),  # unit dims
        ((2, 0, 3), (3, 3, 1), (0, 6)),  # empty
        ((6,), (3,), (2, 3)),
    ],
)
def test_view_strides_agree_with_torch(
    shape: tuple[int, ...], strides: tuple[int, ...], new_shape: tuple[int, ...]
) -> None:
    import torch

    from fuseopt.passes.convert_nn_to_tile.strided_views import view_strides

    size = max(1, 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True)))
    viewed = torch.empty(size).as_strided(shape, strides)
    try:
        expected = viewed.view(new_shape).stride()
    except RuntimeError:
        expected = None
    got = view_strides(shape, strides, new_shape)
    if 0 in shape:
        assert got is not None
    else:
        assert got == expected


def test_merged_axes_keep_the_view_strides() -> None:
    """x[:, ::2] of a 64 x 256 matrix is one flat dim of stride 2 (rows follow on from
    each other in the view); x[1:-1, 16:-16] keeps its rows apart (stride 256)."""
    flat = fuseopt.run_pipeline(fuseopt.parse(even_times_odd(64, 128)), STANDARD)
    assert [str(p) for p in strided_params(flat)] == [
        "memref<8192xf32, strided<[2]>>",
        "memref<8192xf32, strided<[2], offset: 1>>",
    ]
    narrow = unary_of_slice((64, 256), "1:63, 16:240", (62, 224), "gelu")
    tiled = fuseopt.run_pipeline(fuseopt.parse(narrow), STANDARD)
    assert [str(p) for p in strided_params(tiled)] == [
        "memref<62x224xf32, strided<[256, 1], offset: 272>>"
    ]


@pytest.mark.parametrize(
    "name",
    [
        "narrow_ragged",
        "every_third_column",
        "middle_axis",
        "slice_of_slice",
        "strided_row_sum",
        "rotated_query_heads_ragged",
        "normed_query_heads_ragged",
        "projection_heads",
    ],
)
def test_triton_kernels_match_the_tile_interpreter(name: str, tmp_path: Path) -> None:
    from test_triton_kernels import check_each_kernel

    tiled = fuseopt.run_pipeline(fuseopt.parse(CASES[name]), STANDARD)
    check_each_kernel(tiled, tmp_path)


@pytest.mark.parametrize(
    "name",
    [
        "narrow_ragged",
        "every_third_column",
        "first_axis",
        "even_times_odd",
        "strided_row_sum",
        "rotated_query_heads_ragged",
        "normed_query_heads_ragged",
        "projection_heads",
        "reshape_merging_apart_dims",
    ],
)
def test_cuda_kernels_match_the_reference(name: str, tmp_path: Path) -> None:
    from test_cuda_emulated import emulator_available, run_emulated

    if not emulator_available():
        pytest.skip("g++ is not installed")
    run_emulated(CASES[name], tmp_path, "f32")
