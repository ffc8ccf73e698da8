"""Online statistics in looped row reductions (`online`).

A softmax's max and sum, and a normalization's mean and variance, share one loop over
the row's chunks, so a looped kernel makes two passes (statistics, outputs). Checked
against the nn reference: the loop structure, rows that start with -inf (masked
attention scores) or are all -inf, data with a large mean (the variance update must not
cancel), ragged last chunks, and a pattern that must not be merged. The Triton kernels
(CPU interpreter) are checked too. The CUDA backend passes `row-cache-bytes`: rows its
shared-memory cache holds keep one loop per level (the cache already reads HBM once),
longer rows go online; its emulated kernels check both forms.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_nn_fuse_workloads import layernorm, rmsnorm, softmax, t
from test_tile_lowering import PRE_FUSE, lower_and_compare
from xdsl.dialects import scf

import fuseopt
from fuseopt.dialects import tile
from fuseopt.pipelines import STANDARD

LOOPED = "nn-fuse,convert-nn-to-tile{max-row-block=16 block-cols=16},tile-promote"


def loops(module) -> int:  # noqa: ANN001
    """scf.for loops directly in kernel bodies."""
    return len(
        [
            op
            for k in module.walk()
            if isinstance(k, tile.KernelOp)
            for op in k.body.block.ops
            if isinstance(op, scf.ForOp)
        ]
    )


def run(text: str, args: list[np.ndarray], spec: str = LOOPED) -> tuple[list, list, object]:
    """(reference results, tiled results, tiled module) for fixed inputs."""
    reference = fuseopt.run_pipeline(fuseopt.parse(text), PRE_FUSE)
    expected = fuseopt.interpret(reference, "main", *args)
    tiled = fuseopt.run_pipeline(reference.clone(), spec)
    return expected, fuseopt.interpret(tiled, "main", *args), tiled


@pytest.mark.parametrize(
    "text,want",
    [
        (softmax(3, 100), 2),
        (layernorm(3, 100), 2),
        (rmsnorm(1, 3, 100), 2),
    ],
    ids=["softmax", "layernorm", "rmsnorm"],
)
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_looped_statistics_take_one_pass(text: str, want: int, dtype: str) -> None:
    tiled = lower_and_compare(text.replace("bf16", dtype), LOOPED.removeprefix("nn-fuse,"))
    assert loops(tiled) == want


def test_softmax_rows_starting_with_minus_infinity() -> None:
    x = np.random.default_rng(0).standard_normal((4, 100)).astype(np.float32)
    x[0, :40] = -np.inf  # the first chunks hold no finite score
    x[1, :] = -np.inf  # no finite score at all: NaN, as eager
    x[2, 17:] = -np.inf
    expected, actual, _ = run(softmax(4, 100).replace("bf16", "f32"), [x])
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-6, atol=1e-7)
    assert np.isnan(actual[0][1]).all() and np.isfinite(actual[0][[0, 2, 3]]).all()


def test_variance_of_data_with_a_large_mean() -> None:
    rng = np.random.default_rng(1)
    x = (1000.0 + rng.standard_normal((3, 100))).astype(np.float32)
    w = rng.standard_normal(100).astype(np.float32)
    b = rng.standard_normal(100).astype(np.float32)
    expected, actual, tiled = run(layernorm(3, 100).replace("bf16", "f32"), [x, w, b])
    assert loops(tiled) == 2
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-3, atol=1e-3)


def _reduces_in_loops(module) -> int:  # noqa: ANN001
    """tile.reduce ops inside the scf.for loops of kernel bodies."""
    return len(
        [
            r
            for loop in module.walk()
            if isinstance(loop, scf.ForOp)
            for r in loop.walk()
            if isinstance(r, tile.ReduceOp)
        ]
    )


@pytest.mark.parametrize("cols", [100, 96], ids=["ragged", "whole_chunks"])
def test_variance_accumulates_per_lane(cols: int) -> None:
    """A looped variance keeps each lane's mean and M2 (Welford, less a pilot) with a
    step count per row, and combines the lanes once after the loop: no cross-thread reduction per chunk. A constant row
    stays exact (its mean is the value, its variance 0), ragged or not; so does a row
    whose lanes all see the same values (equal lane means that are not the row's only
    value); a NaN makes its row NaN."""
    rng = np.random.default_rng(2)
    x = (5.0 + rng.standard_normal((5, cols))).astype(np.float32)
    x[1] = np.float32(3.7)
    x[2, : cols // 2] = np.float32(-0.1)
    x[3] = (np.arange(cols) // 16).astype(np.float32) * 0.3  # one value per chunk of 16
    x[4, 7] = np.nan
    w = rng.standard_normal(cols).astype(np.float32)
    b = rng.standard_normal(cols).astype(np.float32)
    expected, actual, tiled = run(layernorm(5, cols).replace("bf16", "f32"), [x, w, b])
    assert loops(tiled) == 2 and _reduces_in_loops(tiled) == 0
    np.testing.assert_allclose(actual[0][:4], expected[0][:4], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(actual[0][1], b)
    assert np.isnan(actual[0][4]).all() and np.isnan(expected[0][4]).all()


def _squared_deviations(rows: int, cols: int, axis: int = 0) -> str:
    """The sum of squared deviations from the row mean (exact for constant lines:
    nn-decompose's form) along `axis` of an f32 [rows, cols]."""
    kept = (1, cols) if axis == 0 else (rows, 1)
    x, r, o = t((rows, cols), "f32"), t(kept, "f32"), t((kept[1 - axis],), "f32")
    return f"""func.func @main(%x: {x}) -> {o} {{
  %mean = nn.mean %x [{axis}] keepdim : {x} -> {r}
  %lo = nn.reduce_min %x [{axis}] keepdim : {x} -> {r}
  %hi = nn.reduce_max %x [{axis}] keepdim : {x} -> {r}
  %c = nn.compare eq, %lo, %hi : {r}
  %m = nn.select %c, %lo, %mean : {r}
  %mb = nn.broadcast %m : {r} -> {x}
  %d = nn.sub %x, %mb : {x}
  %q = nn.mul %d, %d : {x}
  %s = nn.sum %q [{axis}] : {x} -> {o}
  func.return %s : {o}
}}"""


@pytest.mark.parametrize("rows", [100, 96], ids=["ragged", "whole_steps"])
def test_column_variance_takes_one_pass_per_lane(rows: int) -> None:
    """A variance over a non-innermost dim (a column reduction) joins its mean's loop
    per lane: one read of the input instead of two (mean, then squared deviations),
    still no cross-thread reduction in the loop; constant columns exact, ragged steps
    and a ragged column block."""
    rng = np.random.default_rng(4)
    x = (3.0 + rng.standard_normal((rows, 70))).astype(np.float32)
    x[:, 5] = np.float32(0.7)
    spec = "nn-fuse,convert-nn-to-tile{block-cols=16 block-rows=16},tile-promote"
    expected, actual, tiled = run(_squared_deviations(rows, 70), [x], spec)
    assert loops(tiled) == 1 and _reduces_in_loops(tiled) == 0
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-4)
    assert actual[0][5] == 0.0


def _per_lane_variance_error(x: np.ndarray, axis: int) -> float:
    """The largest relative error, against float64, of the squared deviations' sum of
    `x` along `axis` tiled in 16 x 16 blocks (per lane: no reduce in the loop)."""
    text = _squared_deviations(*x.shape, axis)
    spec = "nn-fuse,convert-nn-to-tile{block-cols=16 block-rows=16},tile-promote"
    _, actual, tiled = run(text, [x], spec)
    assert _reduces_in_loops(tiled) == 0
    xd = x.astype(np.float64)
    truth = ((xd - xd.mean(axis, keepdims=True)) ** 2).sum(axis)
    return float(np.max(np.abs(actual[0] - truth) / truth))


@pytest.mark.parametrize("shape", [(100, 70), (2, 3000)], ids=["column", "row"])
def test_per_lane_variance_keeps_precision_under_a_large_mean(shape: tuple) -> None:
    """Each lane accumulates its elements less its first one (a pilot), so a mean 10^4
    times the deviation costs no precision: the squared deviations' sum is within 10^-5
    of float64's (unshifted lane means around 10^4 gave 3e-4)."""
    axis = 0 if shape[0] == 100 else 1
    x = (1e4 + np.random.default_rng(5).standard_normal(shape)).astype(np.float32)
    assert _per_lane_variance_error(x, axis) < 1e-5


@pytest.mark.parametrize("shape", [(100, 70), (2, 3000)], ids=["column", "row"])
def test_per_lane_variance_with_outlying_pilots(shape: tuple) -> None:
    """A lane's pilot far from its other elements (the first chunk 10^3 deviations out,
    then data around 0): Welford's update of the shifted elements cancels nothing, so
    the squared deviations' sum stays within 10^-6 of float64's (2e-7 measured; sums of
    the shifted elements and their squares, `s2 - s1^2 / n`, gave 1e-5 over rows)."""
    axis = 0 if shape[0] == 100 else 1
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    if axis == 0:
        x[:16] += 1e3  # the first chunk of every column (16 rows a block)
    else:
        x[:, :16] += 1e3
    assert _per_lane_variance_error(x, axis) < 1e-6


def test_row_mean_bounds_read_elsewhere_stay_the_rows() -> None:
    """A row mean's `min == max` test that another op also reads keeps meaning "the row
    is constant": the bounds are not taken from the lanes' means (equal here for a row
    whose lanes all see the same values)."""
    x_t, r = t((3, 96), "f32"), t((3, 1), "f32")
    text = f"""func.func @main(%x: {x_t}) -> ({r}, {r}) {{
  %mean = nn.mean %x [1] keepdim : {x_t} -> {r}
  %lo = nn.reduce_min %x [1] keepdim : {x_t} -> {r}
  %hi = nn.reduce_max %x [1] keepdim : {x_t} -> {r}
  %c = nn.compare eq, %lo, %hi : {r}
  %m = nn.select %c, %lo, %mean : {r}
  %mb = nn.broadcast %m : {r} -> {x_t}
  %d = nn.sub %x, %mb : {x_t}
  %q = nn.mul %d, %d : {x_t}
  %s = nn.mean %q [1] keepdim : {x_t} -> {r}
  %one = nn.constant 1.0 : {r}
  %zero = nn.constant 0.0 : {r}
  %flag = nn.select %c, %one, %zero : {r}
  func.return %s, %flag : {r}, {r}
}}"""
    x = np.random.default_rng(0).standard_normal((3, 96)).astype(np.float32)
    x[1] = (np.arange(96) // 16).astype(np.float32) * 0.3  # equal lane means
    x[2] = np.float32(3.7)
    expected, actual, _ = run(text, [x])
    np.testing.assert_array_equal(actual[1].ravel(), [0.0, 0.0, 1.0])
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-5)


def test_one_chunk_loop_keeps_constant_rows_exact() -> None:
    """A looped row of one ragged chunk (a chunk wider than the row): lanes outside the
    row never see an element, so the row mean's bounds are not taken from the lanes'
    means, and a constant row still normalizes to exactly its bias."""
    x = np.random.default_rng(6).standard_normal((3, 20)).astype(np.float32)
    x[1] = np.float32(-53.56694)
    w = np.random.default_rng(7).standard_normal(20).astype(np.float32)
    b = np.random.default_rng(8).standard_normal(20).astype(np.float32)
    spec = "nn-fuse,convert-nn-to-tile{max-row-block=16 block-cols=32},tile-promote"
    expected, actual, tiled = run(layernorm(3, 20).replace("bf16", "f32"), [x, w, b], spec)
    assert loops(tiled) == 2
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(actual[0][1], b)


def test_variance_of_wide_chunks_combines_per_chunk() -> None:
    """A chunk tile too large to accumulate per lane (`_defers`: more than 8192
    elements) keeps the per-chunk combination (Chan et al.) with its block reductions."""
    x = np.random.default_rng(3).standard_normal((2, 40000)).astype(np.float32)
    w, b = np.ones(40000, np.float32), np.zeros(40000, np.float32)
    spec = "nn-fuse,convert-nn-to-tile{max-row-block=16384 block-cols=16384},tile-promote"
    expected, actual, tiled = run(layernorm(2, 40000).replace("bf16", "f32"), [x, w, b], spec)
    assert loops(tiled) == 2 and _reduces_in_loops(tiled) > 0
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-4, atol=1e-4)


def test_a_sum_of_exp_around_a_mean_is_not_merged() -> None:
    x = t((3, 100), "f32")
    r = t((3, 1), "f32")
    text = f"""func.func @main(%x: {x}) -> {r} {{
  %m = nn.mean %x [1] keepdim : {x} -> {r}
  %mb = nn.broadcast %m : {r} -> {x}
  %d = nn.sub %x, %mb : {x}
  %e = nn.exp %d : {x}
  %s = nn.sum %e [1] keepdim : {x} -> {r}
  func.return %s : {r}
}}"""
    tiled = lower_and_compare(text, LOOPED.removeprefix("nn-fuse,"))
    assert loops(tiled) == 2  # mean, then sum: no online form, and no store loop


@pytest.mark.parametrize("text", [softmax(3, 100), layernorm(2, 70)], ids=["softmax", "layernorm"])
def test_triton_online_loops_match_the_tile_interpreter(text: str, tmp_path: Path) -> None:
    from test_triton_kernels import check_each_kernel

    spec = STANDARD.replace("convert-nn-to-tile", "convert-nn-to-tile{max-row-block=16}")
    check_each_kernel(fuseopt.run_pipeline(fuseopt.parse(text), spec), tmp_path)


def test_column_statistics_off_keeps_a_loop_per_level() -> None:
    """`column-statistics=false` keeps the column variance in two loops, mean then
    squared deviations, with the same result."""
    x = np.random.default_rng(9).standard_normal((100, 70)).astype(np.float32)
    spec = "nn-fuse,convert-nn-to-tile{block-cols=16 block-rows=16 column-statistics=false}"
    expected, actual, tiled = run(_squared_deviations(100, 70), [x], spec + ",tile-promote")
    assert loops(tiled) == 2
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-5)


def test_triton_column_variance_matches_the_tile_interpreter(tmp_path: Path) -> None:
    from test_triton_kernels import check_each_kernel

    forced = "convert-nn-to-tile{block-cols=16 block-rows=16}"
    spec = STANDARD.replace("convert-nn-to-tile", forced)
    check_each_kernel(
        fuseopt.run_pipeline(fuseopt.parse(_squared_deviations(50, 40)), spec), tmp_path
    )


def cuda_kernel_loops(text: str) -> int:
    """Loops directly in the looped kernel's body under the CUDA backend's pipeline
    (before tile-promote adds the row-prefetch loop)."""
    from fuseopt.backends.cuda.backend import tile_pipeline

    spec = tile_pipeline().rsplit(",tile-promote", 1)[0]
    return loops(fuseopt.run_pipeline(fuseopt.parse(text), spec))


def test_cuda_keeps_per_level_loops_only_for_rows_its_cache_holds() -> None:
    # bf16 rows: 9000 * 2 bytes fit tile-promote's 96 KB row cache; 50000 * 2 do not
    assert cuda_kernel_loops(softmax(2, 9000)) == 3  # max, sum, store
    assert cuda_kernel_loops(layernorm(2, 9000)) == 3  # mean, variance, store
    assert cuda_kernel_loops(softmax(2, 50000)) == 2  # online max and sum, store
    assert cuda_kernel_loops(layernorm(2, 50000)) == 2


@pytest.mark.parametrize("rows", [3000, 4096], ids=["ragged", "whole_steps"])
def test_cuda_column_variance_takes_one_pass_per_lane(rows: int, tmp_path: Path) -> None:
    """The CUDA target keeps a column variance's statistics per lane in one loop (one read
    of the input), and the emulated kernel matches the reference interpreter, a ragged
    last step included."""
    from test_cuda_emulated import emulator_available, run_emulated

    text = _squared_deviations(rows, 24)
    assert cuda_kernel_loops(text) == 1
    if not emulator_available():
        pytest.skip("g++ is not installed")
    run_emulated(text, tmp_path, "f32")


@pytest.mark.parametrize(
    "text",
    [softmax(2, 9000), layernorm(2, 9000), softmax(2, 50000), layernorm(1, 50000)],
    ids=["softmax-cached", "layernorm-cached", "softmax-online", "layernorm-online"],
)
def test_cuda_looped_kernels_match_the_reference(text: str, tmp_path: Path) -> None:
    from test_cuda_emulated import emulator_available, run_emulated

    if not emulator_available():
        pytest.skip("g++ is not installed")
    run_emulated(text, tmp_path, "bf16")


def _log_sum_exp(rows: int, cols: int) -> str:
    """Each row's log-sum-exp of an f32 [rows, cols] (a loss's statistics), stored
    alone: per-row results only."""
    x, r, o = t((rows, cols), "f32"), t((rows, 1), "f32"), t((rows,), "f32")
    return f"""func.func @main(%x: {x}) -> {o} {{
  %m = nn.reduce_max %x [1] keepdim : {x} -> {r}
  %mb = nn.broadcast %m : {r} -> {x}
  %d = nn.sub %x, %mb : {x}
  %e = nn.exp %d : {x}
  %s = nn.sum %e [1] : {x} -> {o}
  %l = nn.log %s : {o}
  %mr = nn.reshape %m : {r} -> {o}
  %y = nn.add %l, %mr : {o}
  func.return %y : {o}
}}"""


def _kernel_ops(module) -> list[str]:  # noqa: ANN001
    """Names of the ops of the module's kernels that make tiles of rows (rank 2: the
    per-row rescaling of an online sum is rank 1)."""
    return [
        op.name
        for k in module.walk()
        if isinstance(k, tile.KernelOp)
        for op in k.walk()
        if op.results and len(getattr(op.results[0].type, "shape", ())) == 2
    ]


@pytest.mark.parametrize("shape", [(3, 100), (1, 1), (5, 17), (2, 64)], ids=str)
def test_log_sum_exp_rows_loop_once_in_base_2(shape: tuple) -> None:
    """A kernel that stores only a softmax's per-row statistics loops past the
    statistics' row block (one pass: online max and sum) where other rows stay whole,
    and its exponentials, only summed, are exp2 of the deviation times log2(e). Ragged,
    one-element and whole-chunk rows, rows with -inf entries, a row all -inf (as
    the reference: NaN, every term exp(-inf - -inf) being NaN) and a large spread
    (terms down to exp(-100)) against the reference."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(shape) * 20).astype(np.float32)
    if shape[1] > 1:
        x[0, : shape[1] // 2] = -np.inf
    if shape[0] > 1:
        x[1] = -np.inf
    spec = "nn-fuse,convert-nn-to-tile{statistics-row-block=16},tile-promote"  # chunks of 16
    expected, actual, tiled = run(_log_sum_exp(*shape), [x], spec)
    ops = _kernel_ops(tiled)
    assert loops(tiled) == (1 if shape[1] > 16 else 0)
    if shape[1] > 1:  # a row of one is no reduction at all
        assert "nn.exp2" in ops and "nn.exp" not in ops
    np.testing.assert_allclose(actual[0], expected[0], rtol=2e-6, atol=0)


def _two_sums_of_one_max(rows: int, cols: int) -> str:
    """Two sums of the same exponentials (one keepdim: cse keeps both), stored per row."""
    x, r, o = t((rows, cols), "f32"), t((rows, 1), "f32"), t((rows,), "f32")
    return f"""func.func @main(%x: {x}) -> ({o}, {r}) {{
  %m = nn.reduce_max %x [1] keepdim : {x} -> {r}
  %mb = nn.broadcast %m : {r} -> {x}
  %d = nn.sub %x, %mb : {x}
  %e = nn.exp %d : {x}
  %s = nn.sum %e [1] : {x} -> {o}
  %k = nn.sum %e [1] keepdim : {x} -> {r}
  func.return %s, %k : {o}, {r}
}}"""


@pytest.mark.parametrize(
    "text,options",
    [
        (_log_sum_exp(3, 100), "online-stats=false"),
        (_log_sum_exp(3, 100), "row-cache-bytes=98304"),
        (_two_sums_of_one_max(3, 100), ""),
    ],
    ids=["per_level_loops", "row_cache", "one_max_two_sums"],
)
def test_statistics_rows_stay_whole_unless_one_pass(text: str, options: str) -> None:
    """Per-row softmax statistics loop past the statistics row block only where the
    loop takes one pass: not with a loop per level (online-stats=false, or a row cache
    that makes re-reads cheap), nor when one max has two sums (the online form pairs a
    max with one); those keep whole rows, and the results are the reference's."""
    x = np.random.default_rng(9).standard_normal((3, 100)).astype(np.float32) * 5
    spec = f"nn-fuse,convert-nn-to-tile{{statistics-row-block=16 {options}}},tile-promote"
    expected, actual, tiled = run(text, [x], spec)
    assert loops(tiled) == 0
    for got, want in zip(actual, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_stored_softmax_keeps_exp() -> None:
    """A softmax that stores its probabilities keeps `exp` for them, whole rows (the
    exponentials are also the outputs) or looped (only the statistics' loop sums in
    base 2), and keeps its rows whole under a small statistics row block."""
    text = softmax(3, 100).replace("bf16", "f32")
    spec = "nn-fuse,convert-nn-to-tile{statistics-row-block=16},tile-promote"
    _, _, whole = run(text, [np.zeros((3, 100), np.float32)], spec)
    assert loops(whole) == 0
    assert "nn.exp" in _kernel_ops(whole) and "nn.exp2" not in _kernel_ops(whole)
    x = np.random.default_rng(8).standard_normal((3, 100)).astype(np.float32) * 10
    expected, actual, looped = run(text, [x])
    assert loops(looped) == 2
    assert {"nn.exp", "nn.exp2"} <= set(_kernel_ops(looped))
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-6, atol=1e-7)
