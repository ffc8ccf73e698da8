"""nn-split-reductions (passes/nn_split_reductions.py): reductions of few, long rows in
two stages. Which shapes it splits (`plan_split`), and the numerics of split reductions
through fuseopt.compile on the interpreter and the Triton backend against eager, at
shapes it splits and shapes it leaves alone (FileCheck: passes/nn-split-reductions.mlir)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from test_frontend_common import randn

import fuseopt
from fuseopt.dialects import tile
from fuseopt.passes.split_shapes import divisors, plan_column_split, plan_split

PLAN = {
    "max_rows": 264,
    "min_length": 65536,
    "min_chunk": 1024,
    "max_chunk": 16384,
    "programs": 528,
}


@pytest.mark.parametrize(
    ("shape", "axes", "expected"),
    [
        ((1 << 20,), (0,), (1024, 1024)),  # a loss: ~4 programs per SM
        ((1 << 30,), (0,), (65536, 16384)),  # 2 GB of bf16: chunks capped at 16384
        ((4, 64, 4096), (1, 2), (256, 1024)),  # few long rows
        ((3, 3 * (1 << 16)), (1,), (192, 1024)),  # a ragged factor left in S
        ((512, 131072), (1,), None),  # many rows: one program per row fills the GPU
        ((40000,), (0,), None),  # short
        ((2, 65536, 2), (1,), None),  # a middle axis
        ((100001,), (0,), (11, 9091)),  # no power-of-two factor: its one divisor in range
        ((8, 128256), (1,), (64, 2004)),  # a vocabulary: 64 chunks of 2004 (block 2048)
        ((1, 100003), (1,), (98, 1024)),  # a prime length: ragged, the last chunk overhangs
        ((5, 65537), (1,), (65, 1024)),  # prime rows: 325 programs of 1024-element chunks
        ((65536,), (0,), (64, 1024)),
    ],
)
def test_plan(shape: tuple[int, ...], axes: tuple[int, ...], expected: tuple | None) -> None:
    plan = plan_split(shape, axes, **PLAN)
    got = None if plan is None else (plan.splits, plan.chunk)
    assert got == expected
    if plan is not None:
        length = math.prod(shape[plan.first :])
        assert (plan.length is not None) == (plan.splits * plan.chunk != length)
        assert length <= plan.splits * plan.chunk < length + plan.chunk


COLUMN_PLAN = {
    "programs": 1024,
    "columns_per_program": 64,
    "min_chunk": 256,
    "min_elements": 1 << 18,
}


@pytest.mark.parametrize(
    ("shape", "axes", "expected"),
    [
        ((16384, 4096), (0,), (0, 0, 16, 1024)),  # a bias gradient: ~1024 programs
        ((65536, 1024), (0,), (0, 0, 64, 1024)),
        ((131072, 256), (0,), (0, 0, 256, 512)),
        ((8192, 768), (0,), (0, 0, 32, 256)),  # wants 86 chunks; 32 keep 256 rows each
        ((2, 4096, 16, 64), (1, 2), (1, 2, 256, 256)),  # a run of two middle axes
        ((107520, 4), (0,), (0, 0, 420, 256)),  # any divisor: 420 = 2^2 * 3 * 5 * 7
        ((3, 5 * 7 * 4096, 2), (1,), (1, 1, 448, 320)),  # 3 programs want 342: 448 = 7 * 64
        ((4096, 1024, 4), (1,), None),  # 4096 programs of 4 columns already
        ((2, 65537 * 2, 64), (1,), (1, 1, 511, 257)),  # divisors give 2 chunks: ragged
        ((4096, 8192), (0,), (0, 0, 8, 512)),
        ((64, 1024, 1024), (1,), None),  # 65536 outputs fill the GPU
        ((1024, 64, 512), (0,), None),  # 32768 outputs: 2 chunks would not pay a launch
        ((1024, 64), (0,), None),  # small
        ((65521, 16), (0,), (0, 0, 255, 257)),  # a prime count: ragged, 65535 >= 65521
        ((16, 1021, 64), (1,), None),  # prime and short: 3 chunks of 256 would not pay
        ((16384, 4096), (1,), None),  # a row reduction
        ((16384, 4096, 1), (0, 1), None),  # rows too: only a size-1 axis after them
        ((4096, 2, 4096), (0, 2), None),  # not adjacent (ChainReduction's case)
        ((0, 4096), (0,), None),  # empty
    ],
)
def test_column_plan(shape: tuple[int, ...], axes: tuple[int, ...], expected: tuple | None) -> None:
    plan = plan_column_split(shape, axes, **COLUMN_PLAN)
    got = None if plan is None else (plan.first, plan.last, plan.splits, plan.chunk)
    assert got == expected
    if plan is not None:
        count = math.prod(shape[plan.first : plan.last + 1])
        assert count <= plan.splits * plan.chunk < count + plan.chunk
        assert plan.ragged == (plan.splits * plan.chunk != count)


@pytest.mark.parametrize("n", [1, 2, 12, 97, 4096, 107520])
def test_divisors(n: int) -> None:
    assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]


CASES: dict[str, tuple[Callable[..., torch.Tensor], tuple[int, ...]]] = {
    "mse": (lambda a, b: torch.nn.functional.mse_loss(a, b), (1 << 17,)),
    "l1_sum": (lambda a, b: (a - b).abs().sum(), (2, 1 << 16)),
    "max_rows_keepdim": (lambda a, b: (a * b).amax((1, 2), keepdim=True), (3, 16, 8192)),
    "min": (lambda a, b: torch.minimum(a, b).amin(-1), (2, 1 << 16)),
    "mean_ragged_factor": (lambda a, b: (a + b).mean(-1), (2, 3 * (1 << 15))),
    "softmax_long_rows": (lambda a, b: torch.softmax(a, -1) * b, (2, 1 << 16)),
    "log_softmax_long_rows": (lambda a, b: torch.log_softmax(a * 4, -1) + b, (3, 1 << 16)),
    "layer_norm_long_rows": (
        lambda a, b: torch.nn.functional.layer_norm(a * 3 + 1, (a.shape[-1],), b[0], b[1]),
        (2, 1 << 16),
    ),
    "layer_norm_two_axes": (
        lambda a, b: torch.nn.functional.layer_norm(a, a.shape[-2:], b[0], b[1]),
        (2, 4, 1 << 15),
    ),
    "var_long_rows": (lambda a, b: (a + 2 * b).var(-1, keepdim=True) * b, (2, 1 << 16)),
    # row lengths without a power-of-two factor in range: chunks of another divisor
    "softmax_vocabulary_rows": (lambda a, b: torch.softmax(a * 3, -1) * b, (2, 128256)),
    "sum_odd_length": (lambda a, b: (a * b).sum(), (100001,)),
    # prime lengths and counts: ragged splits (gathered, the overhang masked)
    "sum_prime_length": (lambda a, b: (a * b).sum(), (65537,)),
    "mean_prime_rows_keepdim": (lambda a, b: (a - b).abs().mean(-1, keepdim=True), (3, 65537)),
    "max_prime_rows": (lambda a, b: (a + b).amax(-1), (2, 65537)),
    "min_prime_two_axes": (lambda a, b: (a * b).amin((1, 2)), (2, 3, 21851)),
    "column_sum_prime_count": (lambda a, b: (a * b).sum(0), (65521, 16)),
    "column_max_prime_middle": (lambda a, b: torch.maximum(a, b).amax(1), (2, 32771, 8)),
    # column reductions with few outputs (plan_column_split)
    "column_sum": (lambda a, b: (a * b).sum(0), (8192, 32)),
    "column_mean_middle_keepdim": (lambda a, b: (a + b).mean(1, keepdim=True), (2, 16384, 8)),
    "column_max_ragged_count": (lambda a, b: torch.maximum(a, b).amax(0), (107520, 4)),
    "column_var": (lambda a, b: (a - b).var(0, keepdim=True) + b[:1], (16384, 16)),
    "column_softmax": (lambda a, b: torch.softmax(a * 3, 0) * b, (32768, 8)),
    # a LayerNorm weight gradient: per-row statistics broadcast along the columns
    "column_weight_gradient": (
        lambda a, b: (b * (a - a.mean(1, keepdim=True)) * a.std(1, keepdim=True)).sum(0),
        (16384, 16),
    ),
}


TRITON_CASES = [
    ("mse", torch.bfloat16),
    ("column_sum", torch.bfloat16),
    ("sum_prime_length", torch.bfloat16),
]
"""The Triton interpreter is slow on 2^17-element inputs (a minute a case on the CI's
two cores): a row and a column split cover its kernels."""


@pytest.mark.parametrize(
    ("name", "dtype", "backend"),
    [(n, d, "interpret") for n in sorted(CASES) for d in (torch.float32, torch.bfloat16)]
    + [(n, d, "triton") for n, d in TRITON_CASES],
    ids=str,
)
def test_split_reductions_match_eager(name: str, dtype: torch.dtype, backend: str) -> None:
    fn, shape = CASES[name]
    a, b = randn(*shape, dtype=dtype, seed=1), randn(*shape, dtype=dtype, seed=2)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, (a, b), backend=backend, strict=True)
        got, expected = compiled(a, b), fn(a, b)
        reference = fn(a.double(), b.double())
    assert got.dtype == expected.dtype and got.shape == expected.shape
    error = (got.double() - reference).abs().max().item()
    eager_error = (expected.double() - reference).abs().max().item()
    # the magnitude of the inputs (a sum's rounding error scales with its terms, not
    # with the result): a lost chunk would be off by about 1/splits of it
    magnitude = (a.double().abs().mean() + b.double().abs().mean()).item()
    scale = max(reference.abs().max().item(), magnitude)
    # at least as accurate as eager (f32 partials), or within one rounding of the scale
    ulp = 2**-7 if dtype == torch.bfloat16 else 2**-22
    assert error <= max(2 * eager_error, ulp * scale), (error, eager_error, scale)
    assert compiled.kernels and not compiled.fallbacks


def test_lengths_without_a_power_of_two_factor_split() -> None:
    """A softmax over rows of 128256 (64 chunks of 2004: statistics, their combination,
    the normalization) is three kernels and a sum over 100001 elements (11 chunks) two;
    unsplit, each would be one."""
    for fn, shape, kernels in (
        (lambda a: torch.softmax(a, -1), (2, 128256), 3),
        (lambda a: a.sum(), (100001,), 2),
    ):
        a = randn(*shape, seed=3)
        torch._dynamo.reset()
        with torch.no_grad():
            compiled = fuseopt.compile(fn, (a,), backend="interpret", strict=True)
            torch.testing.assert_close(compiled(a), fn(a), rtol=1e-5, atol=1e-5)
        assert len(compiled.kernels) == kernels, [k.name for k in compiled.kernels]


@pytest.mark.parametrize("name", ["mse", "l1", "hinge", "smooth_l1"])
def test_loss_prologue_fuses_into_stage_one(name: str) -> None:
    """A loss to a scalar over a long vector is two kernels: stage one reads the inputs
    and fuses the elementwise prologue (the reshapes splitting the inputs into rows are
    views), stage two combines the partials. Before, the prologue ran as a kernel of its
    own writing an f32 temporary three times the inputs' traffic."""
    losses = {
        "mse": lambda a, b: torch.nn.functional.mse_loss(a, b),
        "l1": lambda a, b: torch.nn.functional.l1_loss(a, b),
        "hinge": lambda a, b: torch.clamp(1 - a * b, min=0).mean(),
        "smooth_l1": lambda a, b: torch.nn.functional.smooth_l1_loss(a, b),  # |a - b| twice
    }
    a, b = (
        randn(1 << 17, dtype=torch.bfloat16, seed=1),
        randn(1 << 17, dtype=torch.bfloat16, seed=2),
    )
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(losses[name], (a, b), backend="interpret", strict=True)
        got = compiled(a, b)
    assert len(compiled.kernels) == 2, [k.name for k in compiled.kernels]
    reference = losses[name](a.double(), b.double())
    assert abs(got.double() - reference).item() <= 2**-7 * max(1.0, abs(reference.item()))


def test_cross_entropy_sums_share_stage_one() -> None:
    """A mean cross-entropy over many rows sums the losses and the rows' weights (0 for
    an ignored row) over all rows: both sums are split, and both rebuild the weights from
    the targets in the split shape, so one stage-one kernel reads the targets and the
    per-row losses once for both, and one stage-two kernel sums both partials (their
    reduced axes tied: `analysis._tie_sibling_reductions`) and divides. Before, a
    pointwise kernel stored the weights and the masked losses, and each sum had two
    kernels of its own (6 kernels, now 3, as Inductor's)."""
    rows, classes = 1 << 16, 8
    logits = randn(rows, classes, seed=3)
    targets = torch.randint(0, classes, (rows,), generator=torch.Generator().manual_seed(4))
    targets[::7] = -100  # ignored rows count neither in the sum nor in the mean's divisor
    fn = torch.nn.functional.cross_entropy
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, (logits, targets), backend="interpret", strict=True)
        got = compiled(logits, targets)
    assert len(compiled.kernels) == 3, [k.name for k in compiled.kernels]
    reference = fn(logits.double(), targets)
    assert abs(got.double() - reference).item() <= 1e-5 * abs(reference.item())


def _split_statistics_kernels(fn: Callable[..., torch.Tensor], *args: torch.Tensor) -> int:
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, args, backend="interpret", strict=True)
    return len(compiled.kernels)


def test_norm_statistics_split_as_a_pair() -> None:
    """A layer norm over few long rows reads its input three times in four kernels:
    the chunks' mean and squared deviations (one kernel), two small kernels combining
    them, the normalization. Before, `x - mean` of the whole input was written in f32 and
    read twice, in eight kernels; a softmax is three kernels."""
    x, w = randn(2, 1 << 16, seed=1), randn(1 << 16, seed=2)
    layer_norm = torch.nn.functional.layer_norm
    assert _split_statistics_kernels(lambda x, w: layer_norm(x, w.shape, w, w), x, w) <= 4
    assert _split_statistics_kernels(lambda x: torch.softmax(x, -1), x) == 3


def test_split_layer_norm_of_constant_rows_is_exact() -> None:
    """A constant row normalizes to exactly its bias, as eager's: every chunk's mean is
    the value itself, and so is the mean of the chunk means (`row_mean` at both stages;
    96 chunks, whose sum is not exact)."""
    n = 3 << 15
    x = torch.full((2, n), 3.7)
    x[1] = -0.1
    w, b = randn(n, seed=2), randn(n, seed=3)
    torch._dynamo.reset()
    with torch.no_grad():
        fn = lambda x, w, b: torch.nn.functional.layer_norm(x, w.shape, w, b)  # noqa: E731
        compiled = fuseopt.compile(fn, (x, w, b), backend="interpret", strict=True)
        got = compiled(x, w, b)
    assert torch.equal(got, fn(x, w, b))
    assert torch.equal(got, b.expand_as(got))


def test_split_softmax_with_masked_chunks() -> None:
    """Chunks of only -inf (a masked half row) add nothing to the row's sum instead of
    NaN; a row of only -inf is NaN, as eager's."""
    x = randn(3, 1 << 16, seed=4)
    x[0, : 1 << 15] = -torch.inf
    x[1, 1 << 14 :] = -torch.inf
    x[2] = -torch.inf
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(lambda x: torch.softmax(x, -1), (x,), backend="interpret")
        got = compiled(x)
    expected = torch.softmax(x, -1)
    torch.testing.assert_close(got[:2], expected[:2], atol=1e-7, rtol=1e-5)
    assert got[2].isnan().all() and expected[2].isnan().all()


@pytest.mark.parametrize(
    ("name", "kernels"),
    [
        ("column_sum", 2),
        ("column_mean_middle_keepdim", 2),
        ("column_var", 2),
        ("column_softmax", 3),
        ("column_weight_gradient", 3),
    ],
)
def test_column_split_kernels(name: str, kernels: int) -> None:
    """A column reduction with few outputs is two kernels (chunks, then their partials),
    its prologue fused into the first; a variance's or softmax's pair of column
    reductions splits as one (their chunk statistics in one kernel); a softmax adds its
    normalization. A LayerNorm weight gradient is its row statistics, then the two
    stages, its broadcasts of the row statistics read in place (written out before, a
    kernel more). Unsplit, each would be one kernel of a few dozen programs."""
    fn, shape = CASES[name]
    a, b = randn(*shape, seed=1), randn(*shape, seed=2)
    assert _split_statistics_kernels(fn, a, b) == kernels


@pytest.mark.parametrize(
    ("fn", "shape", "count"),
    [
        (lambda x: x.argmax(0), (8192, 32), 2),  # a column split
        (lambda x: x.argmin(-1, keepdim=True), (2, 1 << 16), 2),  # a row split
        (lambda x: x.argmax(1), (2, 16384, 8), 2),  # a column split over the middle axis
        (lambda x: x.max(-1), (2, 1 << 16), 2),  # values and indices
        (lambda x: x.argmax(), (65537,), 4),  # ragged: the max and the index apart
    ],
    ids=["argmax_columns", "argmin_long_rows", "argmax_middle", "max_dim", "argmax_prime"],
)
def test_split_index_reductions_compute_their_positions(
    fn: Callable[[torch.Tensor], torch.Tensor], shape: tuple[int, ...], count: int
) -> None:
    """argmax / argmin over split axes equal eager's (bf16: ties everywhere, the first
    index wins) and split as one pair: stage one each chunk's extreme and first
    position holding it, stage two the same over the chunks (two kernels, the input
    read once); a ragged split (a prime length) splits the extreme and the index
    apart (four kernels: the max's two stages, the index's two). The positions they
    compare are computed in the kernels from the split shape
    (`split_index_broadcast`): before, the index vector reshaped to the split shape was
    a constant along two axes, written by a kernel of its own and read back by the
    reduction."""
    x = randn(*shape, dtype=torch.bfloat16, seed=3)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, (x,), backend="interpret", strict=True)
        got = compiled(x)
    expected = fn(x)
    for g, e in zip(
        got if isinstance(got, tuple) else (got,),
        expected if isinstance(expected, tuple) else (expected,),
        strict=True,
    ):
        assert torch.equal(g, e)
    lowered = fuseopt.run_pipeline(compiled.regions[0].imported.clone(), "standard")
    kernels = [op for op in lowered.walk() if isinstance(op, tile.KernelOp)]
    names = [k.sym_name.data for k in kernels]
    assert len(names) == count and not [n for n in names if "constant" in n], names


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("classes", [128256, 151936, 100003])
def test_vocabulary_rows_on_gpu(classes: int) -> None:
    """Softmax and cross-entropy over 8 rows of a vocabulary: 128256 (Llama 3) and 151936
    (Qwen2) split into chunks of a divisor (2004, 1187) that Triton reads as masked
    power-of-two blocks; a prime length (100003) stays one program per row. Each matches
    eager within twice its error against float64."""
    x = (randn(8, classes, seed=5) * 3).to(torch.bfloat16).cuda()
    targets = torch.randint(0, classes, (8,), generator=torch.Generator().manual_seed(6)).cuda()
    splits = classes != 100003
    for fn, args in (
        (lambda x: torch.softmax(x, -1), (x,)),
        (torch.nn.functional.cross_entropy, (x, targets)),
    ):
        torch._dynamo.reset()
        with torch.no_grad():
            compiled = fuseopt.compile(fn, args, backend="triton", strict=True)
            got, expected = compiled(*args), fn(*args)
            reference = fn(x.double(), *args[1:])
        error = (got.double() - reference).abs().max().item()
        eager_error = (expected.double() - reference).abs().max().item()
        assert error <= 2 * eager_error + 1e-6, (error, eager_error)
        grids = [k.launch for k in compiled.kernels]
        assert any("grid (8," not in g and "grid (1," not in g for g in grids) == splits, grids


@pytest.mark.parametrize("reduce", ["amax", "amin", "sum"])
def test_prime_length_integer_reductions_are_exact(reduce: str) -> None:
    """A ragged split of integers: the padding reads the last element again (the
    extreme value is placed last, where a clamp off by one shows) and is masked to the
    identity (a missing mask shows in the sum: max and min ignore the repeats), in two
    kernels."""
    x = torch.randint(-1000, 1000, (65537,), generator=torch.Generator().manual_seed(3))
    x[-1] = {"amax": 5000, "amin": -5000, "sum": 777}[reduce]

    def fn(v: torch.Tensor) -> torch.Tensor:
        return getattr(v, reduce)()

    torch._dynamo.reset()
    compiled = fuseopt.compile(fn, (x,), backend="interpret", strict=True)
    assert torch.equal(compiled(x), fn(x))
    assert len(compiled.kernels) == 2 and not compiled.fallbacks


def test_at_a_size_hint_a_ragged_split_follows_only_static_counts() -> None:
    """A function of dynamic size is lowered at size hints (odd primes) and the two
    lowerings generalized: a ragged split of a count that follows the size would have a
    chunk count tile IR cannot compute (the function would compile per size), so it is
    left alone there; a static prime count in the same module still splits."""
    from fuseopt.passes.nn_split_reductions import NNSplitReductionsPass

    text = """builtin.module attributes {nn.size_hint = 65537 : i64} {
  func.func @f(%x: tensor<4x131074xf32>, %y: tensor<100003xf32>) -> (tensor<4xf32>, tensor<f32>) {
    %a = nn.reduce_max %x [1] : tensor<4x131074xf32> -> tensor<4xf32>
    %b = nn.sum %y [0] : tensor<100003xf32> -> tensor<f32>
    func.return %a, %b : tensor<4xf32>, tensor<f32>
  }
}"""
    module = fuseopt.parse(text)
    NNSplitReductionsPass().apply(None, module)  # type: ignore[arg-type]
    printed = str(module)
    assert "nn.reduce_max %x [1]" in printed  # 2 x the hint: left alone
    assert "nn.take %y" in printed and "nn.sum %y" not in printed  # static: ragged


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("softmax", lambda a: torch.softmax(a, -1)),
        ("var", lambda a: a.var(-1)),
    ],
)
def test_statistics_pairs_over_a_prime_length_stay_whole(name: str, fn: Callable) -> None:
    """A softmax's max and sum (a variance's mean and squared deviations) split as a
    pair into whole chunks or not at all: over a prime length neither reduction splits
    ragged on its own (that would read the rows three times in five kernels instead of
    one online kernel)."""
    a = randn(2, 65537, seed=7)
    assert _split_statistics_kernels(fn, a) == 1
