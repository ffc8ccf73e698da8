"""argmax / argmin and max.dim / min.dim (values and indices) compile (issue 19 item 2,
issue 20 item 4): built from a max (min), a comparison and a min over indices, fused
into one row kernel. Checked bit for bit against eager on the interpreter and the
Triton backend: ties (the first index wins), NaN (the first NaN wins, its value NaN),
infinities, integers and booleans, every axis, keepdim, dim=None, one element, and
rows past one program's block."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from test_frontend_common import randn
from test_tile_lowering import PRE_FUSE

import fuseopt


def _hard_rows(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Random values with ties, NaN and infinities planted along the last two axes."""
    x = randn(*shape, seed=5).to(dtype)
    if dtype.is_floating_point and x.numel() >= 12 and x.dim() >= 2:
        flat = x.view(-1, x.shape[-1])
        flat[0, :] = 1.0  # a constant row: index 0 (all tie)
        flat[1, -1] = float("nan")
        flat[min(2, flat.shape[0] - 1), 0] = float("inf")
        flat[-1, :] = flat[-1].max()  # ties everywhere on the last row
        if flat.shape[1] > 2:
            flat[min(3, flat.shape[0] - 1), 1] = float("-inf")
            flat[1, 0] = float("nan")  # two NaNs: the first one
    return x


CASES: dict[str, Callable[[torch.Tensor], object]] = {
    "argmax_last": lambda x: x.argmax(-1),
    "argmin_last": lambda x: x.argmin(-1),
    "argmax_first": lambda x: x.argmax(0),
    "argmin_first_keepdim": lambda x: x.argmin(0, keepdim=True),
    "argmax_flat": lambda x: x.argmax(),
    "argmin_flat": lambda x: x.argmin(),
    "max_dim": lambda x: x.max(-1),
    "min_dim_keepdim": lambda x: x.min(0, keepdim=True),
    "argmax_of_softmax": lambda x: torch.softmax(x.float(), -1).argmax(-1),
}


def _assert_same(got: object, expected: object) -> None:
    got_t = got if isinstance(got, tuple) else (got,)
    exp_t = expected if isinstance(expected, tuple) else (expected,)
    assert len(got_t) == len(exp_t)
    for g, e in zip(got_t, exp_t, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, e.dtype, g.shape, e.shape)
        same = (g == e) | (g.isnan() & e.isnan()) if e.is_floating_point() else g == e
        assert bool(same.all()), (g, e)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((6, 9), torch.float32),
        ((6, 9), torch.bfloat16),
        ((2, 3, 5), torch.float32),
        ((4, 300), torch.int64),
        ((5, 4), torch.float16),
        ((7, 3), torch.bool),
        ((1, 1), torch.float32),
        ((3, 9000), torch.float32),  # a row past one program's block on the interpreter
    ],
    ids=str,
)
def test_index_reductions_match_eager(
    name: str, shape: tuple[int, ...], dtype: torch.dtype
) -> None:
    fn = CASES[name]
    if name == "argmax_of_softmax" and not dtype.is_floating_point:
        pytest.skip("softmax needs floats")
    x = _hard_rows(shape, dtype) if dtype != torch.bool else randn(*shape, seed=6) > 0
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="interpret", strict=True)
        try:
            expected = fn(x)
        except RuntimeError as e:  # argmax of bool: PyTorch refuses, so must we
            with pytest.raises(RuntimeError, match="bool"):
                compiled(x)
            assert "bool" in str(e)
            return
        got = compiled(x)
    _assert_same(got, expected)
    assert compiled.regions and not compiled.fallbacks


@pytest.mark.parametrize("name", ["argmax_last", "argmin_first_keepdim", "max_dim", "argmax_flat"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_index_reductions_on_triton(name: str, dtype: torch.dtype) -> None:
    x = _hard_rows((5, 37), dtype)
    fn = CASES[name]
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="triton", strict=True)
        got, expected = compiled(x), fn(x)
    _assert_same(got, expected)
    # the max (min) and the min over indices: one row kernel
    rows = [k for k in compiled.kernels if k.schedule.startswith("row_reduction")]
    assert len(rows) == 1, [(k.name, k.schedule) for k in compiled.kernels]


def test_argmax_over_an_empty_axis_is_left_to_pytorch() -> None:
    """PyTorch raises for argmax over a zero-size axis: fuseopt does not compile it and
    PyTorch's own error reaches the user."""
    fn = lambda x: x.argmax(1)  # noqa: E731
    torch._dynamo.reset()
    with pytest.raises((IndexError, RuntimeError)):
        fuseopt.compile(fn, backend="interpret")(torch.zeros(3, 0))


def _nn_text(fn: Callable[[torch.Tensor], object], x: torch.Tensor) -> str:
    """The nn IR the frontend imports for `fn(x)`, its function named @main."""
    torch._dynamo.reset()
    compiled = fuseopt.compile(fn, (x,), backend="interpret", strict=True)
    (region,) = compiled.regions
    func_name = region.imported.body.block.first_op.sym_name.data
    return str(region.imported).replace(f"@{func_name}", "@main")


def _loops_and_reduces(module) -> tuple[int, int]:  # noqa: ANN001
    """(scf.for loops directly in kernel bodies, tile.reduce ops inside those loops)."""
    from xdsl.dialects import scf

    from fuseopt.dialects import tile

    loops = [
        op
        for k in module.walk()
        if isinstance(k, tile.KernelOp)
        for op in k.body.block.ops
        if isinstance(op, scf.ForOp)
    ]
    reduces = [r for loop in loops for r in loop.walk() if isinstance(r, tile.ReduceOp)]
    return len(loops), len(reduces)


LOOPED = "nn-fuse,convert-nn-to-tile{max-row-block=16 block-cols=16 block-rows=16},tile-promote"
"""Rows and columns past one 16-element block: a looped kernel."""


@pytest.mark.parametrize(
    ("name", "shape", "want"),
    [
        ("argmin_first_keepdim", (100, 7), (1, 0)),  # columns, per lane, ragged steps
        ("argmax_first", (96, 70), (1, 0)),  # whole steps, a ragged column block
        ("argmax_last", (6, 100), (2, 0)),  # rows: the max, then the positions
        ("max_dim", (6, 96), (2, 0)),
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_looped_index_reductions(
    name: str, shape: tuple[int, ...], want: tuple[int, int], dtype: torch.dtype
) -> None:
    """A looped argmax across columns keeps each lane's running extreme and first
    position in one loop, no reduction inside it: one read of the input instead of two
    (the extreme, then the positions holding it); rows keep a loop per level (measured
    faster). Checked exactly against the nn reference and eager on the tile
    interpreter: a constant line, NaNs (the first wins), -inf and +inf, a line all
    -inf, ties (the first wins), integers."""
    x = _hard_rows(shape, dtype) if dtype.is_floating_point else _integers(shape)
    if dtype.is_floating_point:
        x.view(-1, shape[-1])[4] = float("-inf")  # a row all -inf: its first position
        x[:, 3] = float("-inf")  # a column all -inf
        x.view(-1)[-1] = float("nan")  # a NaN in the last (ragged) step
    fn = CASES[name]
    reference = fuseopt.run_pipeline(fuseopt.parse(_nn_text(fn, x)), PRE_FUSE)
    expected = fuseopt.interpret(reference, "main", x.numpy())
    tiled = fuseopt.run_pipeline(reference.clone(), LOOPED)
    actual = fuseopt.interpret(tiled, "main", x.numpy())
    assert _loops_and_reduces(tiled) == want
    eager = fn(x)
    eager = eager if isinstance(eager, tuple) else (eager,)
    for a, e, w in zip(actual, expected, eager, strict=True):
        np.testing.assert_array_equal(a, e)
        np.testing.assert_array_equal(np.asarray(a).reshape(w.shape), w.numpy())


def _integers(shape: tuple[int, ...]) -> torch.Tensor:
    """Small random integers (many ties)."""
    return (randn(*shape, seed=4) * 3).round().long()


def _column_argmax(positions: str) -> str:
    """The frontend's argmax over the 40 rows of an f32 [40, 4], its positions `%i`
    (a tensor<40x4xi64>) defined by `positions` (reading `%m`, the max, if it likes)."""
    return f"""func.func @main(%x: tensor<40x4xf32>) -> tensor<1x4xi64> {{
  %m = nn.reduce_max %x [0] keepdim : tensor<40x4xf32> -> tensor<1x4xf32>
  %mb = nn.broadcast %m : tensor<1x4xf32> -> tensor<40x4xf32>
{positions}
  %p = nn.constant 40 : tensor<40x4xi64>
  %hit = nn.compare eq, %x, %mb : tensor<40x4xf32>
  %c = nn.select %hit, %i, %p : tensor<40x4xi64>
  %n = nn.compare ne, %x, %x : tensor<40x4xf32>
  %d = nn.select %n, %i, %c : tensor<40x4xi64>
  %y = nn.reduce_min %d [0] keepdim : tensor<40x4xi64> -> tensor<1x4xi64>
  func.return %y : tensor<1x4xi64>
}}"""


def _looped_like_reference(text: str, x: np.ndarray) -> tuple[int, int]:
    """`_loops_and_reduces` of `text` tiled by LOOPED, after asserting its result
    equals the reference's."""
    reference = fuseopt.run_pipeline(fuseopt.parse(text), PRE_FUSE)
    tiled = fuseopt.run_pipeline(reference.clone(), LOOPED)
    np.testing.assert_array_equal(
        fuseopt.interpret(tiled, "main", x)[0], fuseopt.interpret(reference, "main", x)[0]
    )
    return _loops_and_reduces(tiled)


def test_positions_that_do_not_rise_take_the_general_update() -> None:
    """Positions that are not an arange along the reduced axis (here reversed) are no
    ordered pair: the lanes take the least candidate under the running extreme, still
    one loop and exact (ties and a NaN)."""
    reversed_positions = ", ".join(str(39 - i) for i in range(40))
    text = _column_argmax(f"""  %r = nn.constant dense<[{reversed_positions}]> : tensor<40xi64>
  %rr = nn.reshape %r : tensor<40xi64> -> tensor<40x1xi64>
  %i = nn.broadcast %rr : tensor<40x1xi64> -> tensor<40x4xi64>""")
    x = (randn(40, 4, seed=8) * 2).round().numpy()  # ties
    x[7, 2], x[30, 2] = np.nan, np.nan
    assert _looped_like_reference(text, x) == (1, 0)


def test_an_index_reading_the_extreme_is_not_a_pair() -> None:
    """Positions computed from the extreme itself (not an argmax) are not merged into
    the extreme's loop: two loops, still the reference's result."""
    text = _column_argmax("  %i = nn.cast %mb : tensor<40x4xf32> -> tensor<40x4xi64>")
    assert _looped_like_reference(text, (randn(40, 4, seed=8) * 4).numpy())[0] == 2


@pytest.mark.parametrize("name", ["argmax_last", "argmin_first_keepdim", "max_dim"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_looped_index_reductions_on_triton(name: str, dtype: torch.dtype) -> None:
    """Looped index reductions printed to Triton (CPU interpreter) equal eager on the
    hard rows: rows (a loop per level) and columns (one loop per lane) of 37 in blocks
    of 16."""
    x = (
        _hard_rows((37, 37), dtype)
        if dtype.is_floating_point
        else (randn(37, 37, seed=4) * 3).round().long()
    )
    fn = CASES[name]
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(
            fn, backend="triton", strict=True, max_row_block=16, block_rows=16, block_cols=16
        )
        got, expected = compiled(x), fn(x)
    _assert_same(got, expected)
    assert [k.schedule for k in compiled.kernels] == ["row_reduction_looped"]


def test_ordered_positions_are_recognized() -> None:
    """The frontend's argmax positions (an arange along the reduced axis, plus chunk
    offsets after a split) rise along it and stay below `past`: the cheap update."""
    from fuseopt.dialects import nn
    from fuseopt.passes.reduction_pairs import INDEX, match_pair

    x = randn(8192, 32, seed=1)
    module = fuseopt.run_pipeline(fuseopt.parse(_nn_text(lambda x: x.argmax(0), x)), PRE_FUSE)
    pairs = [match_pair(op) for op in module.walk() if isinstance(op, nn.ReduceMinOp)]
    found = [(p.candidates.past, p.candidates.ordered) for p in pairs if p and p.kind == INDEX]
    assert found == [(8192, True), (8192, False)]  # stage one ordered; stage two by chunk


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("argmax_last", (3, 50000)),
        ("argmin_first_keepdim", (3000, 24)),
        ("argmax_flat", (4, 70000)),
    ],
    ids=str,
)
def test_index_reductions_emulated_on_cuda(
    name: str, shape: tuple[int, ...], tmp_path: object
) -> None:
    """The CUDA backend's kernels (emulated on the CPU) match the reference: long rows,
    columns per lane, a split flat argmax (stage one and two both pairs)."""
    from test_cuda_emulated import emulator_available, run_emulated

    if not emulator_available():
        pytest.skip("g++ is not installed")
    run_emulated(_nn_text(CASES[name], randn(*shape, seed=2)), tmp_path, "f32")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "fn",
    [lambda x: (x.var(0), x.argmax(0)), lambda x: (x.argmax(0), x.std(0), x.argmin(0))],
    ids=["var_argmax", "argmax_std_argmin"],
)
def test_column_variance_beside_argmax(fn: Callable[[torch.Tensor], object]) -> None:
    """A column variance and an argmax over the same columns share the max (the
    variance's exact row mean reads it as a bound, after CSE): both pairs join one
    loop, the argmax's extreme finished first, in either order of the outputs."""
    x = randn(1000, 64, seed=7)
    x[:, 5] = 2.5  # a constant column: variance 0, argmax 0
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="triton", strict=True, block_rows=64, block_cols=16)
        got, expected = compiled(x), fn(x)
    for g, e in zip(got, expected, strict=True):
        if e.is_floating_point():
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)
        else:
            assert torch.equal(g, e)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_unwidened_16_bit_column_argmax(dtype: torch.dtype) -> None:
    """Without nn-widen-intermediates (`precision="eager"`) a 16-bit column argmax
    accumulates in f32 per lane and compares the lanes' f32 maxima with the column's
    (no 16-bit broadcast of an f32 value): equal to the reference and eager on the tile
    interpreter, NaN and ties included."""
    x = _hard_rows((100, 37), dtype)
    fn = CASES["argmax_first"]
    reference = fuseopt.run_pipeline(fuseopt.parse(_nn_text(fn, x)), PRE_FUSE)
    tiled = fuseopt.run_pipeline(reference.clone(), LOOPED)
    assert _loops_and_reduces(tiled) == (1, 0)
    args = x.float().numpy()
    actual = fuseopt.interpret(tiled, "main", args)[0]
    np.testing.assert_array_equal(actual, fuseopt.interpret(reference, "main", args)[0])
    np.testing.assert_array_equal(actual, fn(x).numpy())


def test_positions_defined_after_the_max_are_not_split() -> None:
    """An argmax whose positions are defined after its max (hand-written IR) is not
    split as a pair (the split's ops would read them before their definition); it
    still splits as two reductions and equals the reference."""
    text = """func.func @main(%x: tensor<2x16xf32>, %o: tensor<2x16xi64>) -> (tensor<2x1xi64>, tensor<2x16xi64>) {
  %m = nn.reduce_max %x [1] keepdim : tensor<2x16xf32> -> tensor<2x1xf32>
  %z = nn.constant 0 : tensor<2x16xi64>
  %i = nn.add %o, %z : tensor<2x16xi64>
  %p = nn.constant 16 : tensor<2x16xi64>
  %mb = nn.broadcast %m : tensor<2x1xf32> -> tensor<2x16xf32>
  %hit = nn.compare eq, %x, %mb : tensor<2x16xf32>
  %c = nn.select %hit, %i, %p : tensor<2x16xi64>
  %n = nn.compare ne, %x, %x : tensor<2x16xf32>
  %d = nn.select %n, %i, %c : tensor<2x16xi64>
  %y = nn.reduce_min %d [1] keepdim : tensor<2x16xi64> -> tensor<2x1xi64>
  func.return %y, %i : tensor<2x1xi64>, tensor<2x16xi64>
}"""
    split = "nn-split-reductions{min-length=8 min-chunk=4 max-chunk=4 programs=2}"
    module = fuseopt.run_pipeline(fuseopt.parse(text), split)
    x = (randn(2, 16, seed=3) * 2).round().numpy()
    o = np.arange(32, dtype=np.int64).reshape(2, 16) % 5
    reference = fuseopt.parse(text)
    for got, want in zip(
        fuseopt.interpret(module, "main", x, o),
        fuseopt.interpret(reference, "main", x, o),
        strict=True,
    ):
        np.testing.assert_array_equal(got, want)


def _pair_of(text: str):  # noqa: ANN202 - a StatisticsPair or None
    from fuseopt.dialects import nn
    from fuseopt.passes.reduction_pairs import match_pair

    module = fuseopt.parse(text)
    last = [op for op in module.walk() if isinstance(op, nn.ReduceMinOp)][-1]
    return match_pair(last)


def _positions_along_rows(values: str, name: str = "%i") -> str:
    """Lines defining `name`, a tensor<40x4xi64> of the 40 `values` (a dense list or a
    splat) along the rows."""
    return f"""  %r = nn.constant {values} : tensor<40xi64>
  %rr = nn.reshape %r : tensor<40xi64> -> tensor<40x1xi64>
  {name} = nn.broadcast %rr : tensor<40x1xi64> -> tensor<40x4xi64>"""


def _dense(values: list[int]) -> str:
    return f"dense<[{', '.join(map(str, values))}]>"


@pytest.mark.parametrize(
    ("values", "ordered"),
    [
        (_dense(list(range(40))), True),
        (_dense(list(range(39, -1, -1))), False),  # falling
        (_dense([1, 0, *range(2, 40)]), False),  # no arange
        (_dense(list(range(0, 80, 2))), False),  # up to 78: not below past (40)
        ("1", False),  # constant along the axis
    ],
    ids=["arange", "falling", "shuffled", "past_too_small", "flat"],
)
def test_which_positions_rise(values: str, ordered: bool) -> None:
    """`ordered` holds only for positions that rise strictly along the reduced axis and
    stay below `past`; any of these is still a pair (exact by the general update)."""
    pair = _pair_of(_column_argmax(_positions_along_rows(values)))
    assert pair is not None and pair.candidates is not None
    assert pair.candidates.ordered == ordered


def test_positions_whose_sum_may_wrap_are_not_ordered() -> None:
    """Positions that add an offset near the i64 limit may wrap: not ordered (the
    general update stays exact under wrapping)."""
    low = "  %low = nn.constant -9223372036854775808 : tensor<40x4xi64>"
    add = "  %i = nn.add %a, %low : tensor<40x4xi64>"
    rising = _positions_along_rows(_dense(list(range(-5, 35))), "%a")
    pair = _pair_of(_column_argmax(f"{rising}\n{low}\n{add}"))
    assert pair is not None and pair.candidates is not None and not pair.candidates.ordered


INT64_MIN = -(2**63)

LINES_OF_INT64_MIN = {
    "amax_rows": lambda x: x.amax(1),
    "amax_columns": lambda x: x.amax(0),
    "argmax_rows": lambda x: x.argmax(1),
    "argmax_columns": lambda x: x.argmax(0),
}
"""Reductions over integer lines all INT64_MIN: a max's identity above INT64_MIN
(it was INT64_MIN + 1) made the max come out above every element and the argmax out
of range (the length of the line)."""


def _int64_min_lines(shape: tuple[int, ...]) -> torch.Tensor:
    x = torch.full(shape, INT64_MIN, dtype=torch.int64)
    x[-1, -1] = INT64_MIN + 5  # one line that is not all INT64_MIN
    return x


@pytest.mark.parametrize("name", sorted(LINES_OF_INT64_MIN))
def test_lines_of_int64_min_on_the_tile_interpreter_and_triton(name: str) -> None:
    """Looped and masked (37 in blocks of 16): tile interpreter and Triton (CPU
    interpreter) equal eager."""
    fn = LINES_OF_INT64_MIN[name]
    x = _int64_min_lines((37, 37))
    reference = fuseopt.run_pipeline(fuseopt.parse(_nn_text(fn, x)), PRE_FUSE)
    tiled = fuseopt.run_pipeline(reference.clone(), LOOPED)
    (actual,) = fuseopt.interpret(tiled, "main", x.numpy())
    np.testing.assert_array_equal(np.asarray(actual).reshape(-1), fn(x).numpy())
    torch._dynamo.reset()
    compiled = fuseopt.compile(
        fn, backend="triton", strict=True, max_row_block=16, block_rows=16, block_cols=16
    )
    _assert_same(compiled(x), fn(x))


@pytest.mark.parametrize(
    ("name", "shape"), [("argmax_rows", (3, 50000)), ("amax_columns", (3000, 5))]
)
def test_lines_of_int64_min_emulated_on_cuda(
    name: str, shape: tuple[int, ...], tmp_path: object
) -> None:
    """The CUDA backend's looped kernels (emulated on the CPU) on lines of INT64_MIN."""
    from test_cuda_emulated import emulator_available

    from fuseopt.backends.cuda.backend import CudaBackend
    from fuseopt.backends.cuda.emulation import EmulatedFunction

    if not emulator_available():
        pytest.skip("g++ is not installed")
    fn = LINES_OF_INT64_MIN[name]
    x = _int64_min_lines(shape)
    compiled = CudaBackend().compile(fuseopt.parse(_nn_text(fn, x)), "main", {})
    (got,) = EmulatedFunction(compiled, tmp_path)(x)
    assert torch.equal(got.reshape(-1), fn(x))
