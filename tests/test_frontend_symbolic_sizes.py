"""Graphs Dynamo traces with one symbolic size, compiled once for every size
(frontends/fx/symbolic_sizes.py): the Triton backend's kernels take the size at run
time; the interpret backend compiles per size; results match eager at every size."""

from __future__ import annotations

import logging
import random
import re

import pytest
import sympy
import torch
import torch.nn.functional as F
from test_frontend_common import randn, randomize
from torch import nn

import fuseopt
from benchmarks.batch_sweep import Block
from fuseopt.frontends.fx.symbolic_sizes import (
    apply_splits,
    concretize,
    dynamic_reasons,
    graph_symbol,
    ratio,
    size_at,
    with_splits,
)


def assert_close(a: torch.Tensor, b: torch.Tensor) -> None:
    """Close as a different summation order allows (the GEMMs of the two sides)."""
    tol = 2e-2 if a.dtype == torch.bfloat16 else 1e-4
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def _compiled_messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("fuseopt: compiled ")
    ]


@pytest.mark.parametrize(
    "backend",
    [
        "triton",
        "interpret",
        pytest.param(
            "cuda",
            marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
        ),
    ],
)
def test_batch_sweep_compiles_twice(backend: str, caplog: pytest.LogCaptureFixture) -> None:
    """A transformer block over batch sizes 1..6 (then 3 again): Dynamo traces batch 1
    statically and batch 2 with a symbolic batch; fuseopt compiles that graph once for
    every batch (the attention included: only its batch dim is symbolic); nothing runs
    eagerly; every batch matches eager."""
    torch._dynamo.reset()
    # on a GPU host the Triton backend's kernels run on the GPU (Triton 3.6's CPU
    # interpreter there fails on them)
    device = "cuda" if torch.cuda.is_available() and backend != "interpret" else "cpu"
    model = randomize(Block(64, 4)).eval().to(device)
    options = {"attention": "fused"} if backend == "cuda" else {}
    compiled = fuseopt.compile(model, backend=backend, **options)
    with torch.no_grad(), caplog.at_level(logging.DEBUG, logger="fuseopt"):
        for batch in (1, 2, 3, 4, 5, 6, 3):
            x = randn(batch, 8, 64, seed=batch).to(device)
            assert_close(compiled(x), model(x))
            if batch == 2:
                regions = len(_compiled_messages(caplog))
        assert len(_compiled_messages(caplog)) == regions  # nothing compiled past batch 2
    assert len(compiled.record.graphs) == 2, compiled.record.graphs
    assert not compiled.fallbacks, [(f.target, f.reason) for f in compiled.fallbacks]
    sources = [k.source for k in compiled.kernels if k.region.startswith("inference1")]
    if backend == "triton":
        assert sources and any("do_not_specialize" in s for s in sources)
    if backend == "cuda":  # the kernels take the batch as an argument
        assert sources and any(re.search(r"const long long p\d+_n\d+[,)]", s) for s in sources)


def test_a_size_dependent_schedule_compiles_per_size(caplog: pytest.LogCaptureFixture) -> None:
    """A region whose lowering depends on the size (here a head transpose that becomes a
    one-program kernel over the whole tensor) is compiled per size by the Triton
    backend, logged, and stays correct; the graph is still traced once."""
    torch._dynamo.reset()
    model = randomize(Block(32, 4)).eval()
    compiled = fuseopt.compile(model, backend="triton")
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="fuseopt"):
        for batch in (1, 2, 3, 2):
            x = randn(batch, 8, 32, seed=batch)
            assert_close(compiled(x), model(x))
    messages = [r.getMessage() for r in caplog.records]
    assert any("is compiled per size" in m for m in messages), messages
    assert len(compiled.record.graphs) == 2
    assert not compiled.fallbacks, [(f.target, f.reason) for f in compiled.fallbacks]


class Flatten(nn.Module):
    """Returns a projection flattened over (batch, tokens), its transpose, and a sum
    over the batch: edges of size 16 * batch, an output traced transposed, a static
    output of a reduction over the symbolic dim."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 12)

    def forward(self, x: torch.Tensor) -> tuple:
        y = torch.tanh(self.proj(x)).reshape(-1, 12)
        return y * 2, (y + 1).t(), y.sum(0)


def test_edges_of_a_multiple_of_the_size() -> None:
    """Region edges whose size is a multiple of the symbolic size (16 * batch) are split
    into [batch, 16] and joined back; a transposed output keeps its traced strides; all
    match eager at sizes the hints never saw."""
    torch._dynamo.reset()
    model = randomize(Flatten())
    compiled = fuseopt.compile(model, backend="triton")
    with torch.no_grad():
        for batch in (2, 3, 7, 5):
            x = randn(batch, 16, 8, seed=batch)
            got, want = compiled(x), model(x)
            for g, w in zip(got, want, strict=True):
                assert g.shape == w.shape and g.stride() == w.stride()
                assert_close(g, w)
    assert len(compiled.record.graphs) <= 2
    assert not compiled.fallbacks, [(f.target, f.reason) for f in compiled.fallbacks]


def test_mark_dynamic_compiles_once(caplog: pytest.LogCaptureFixture) -> None:
    """`torch._dynamo.mark_dynamic` makes the first call symbolic: one graph for every
    size, no recompilation."""
    torch._dynamo.reset()
    model = randomize(nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32)))
    compiled = torch.compile(model, backend="fuseopt", options={"backend": "triton"})
    with torch.no_grad(), caplog.at_level(logging.DEBUG, logger="fuseopt"):
        for rows in (5, 9, 2, 33):
            x = randn(rows, 16, seed=rows)
            torch._dynamo.mark_dynamic(x, 0)
            assert_close(compiled(x), model(x))
    messages = [r.getMessage() for r in caplog.records if "symbolic sizes" in r.getMessage()]
    assert len(messages) == 1 and "compiled once for every size" in messages[0], messages
    assert len(_compiled_messages(caplog)) == 1


@pytest.mark.parametrize("seed", range(4))
def test_random_row_programs_at_random_sizes(seed: int) -> None:
    """Property test: a random chain of elementwise ops, a softmax or norm over rows and a
    projection, compiled under a symbolic row count, matches eager at random row counts
    (1, ragged, larger than a block) in f32 and bf16."""
    rng = random.Random(seed)
    width = rng.choice([3, 16, 40, 130])
    dtype = rng.choice([torch.float32, torch.bfloat16])
    unary = [torch.tanh, torch.sigmoid, F.silu, torch.exp, F.gelu, torch.abs]
    ops = [rng.choice(unary) for _ in range(rng.randint(1, 3))]
    norm = rng.choice(
        [lambda t: torch.softmax(t, -1), lambda t: F.layer_norm(t, (width,)), lambda t: t]
    )
    weight = randn(width, 7, seed=seed).to(dtype)

    def program(x: torch.Tensor) -> tuple:
        for op in ops:
            x = op(x) * 0.5
        y = norm(x)
        return y @ weight, y.amax(-1)

    torch._dynamo.reset()
    compiled = torch.compile(program, backend="fuseopt", options={"backend": "triton"})
    sizes = [2, 3] + [rng.randint(1, 300) for _ in range(3)]
    for rows in sizes:
        x = randn(rows, width, seed=rows).to(dtype)
        for g, w in zip(compiled(x), program(x), strict=True):
            assert_close(g, w)


# ----------------------------------------------------------------- the pieces


def _traced(fn, x):  # noqa: ANN001, ANN202
    """The ATen graph Dynamo and AOTAutograd make of `fn(x)` with x's dim 0 symbolic."""
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def keep(gm, inputs):  # noqa: ANN001, ANN202
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch._dynamo.mark_dynamic(x, 0)
    torch.compile(fn, backend=aot_autograd(fw_compiler=keep, inference_compiler=keep))(x)
    return graphs[0]


def test_sizes_and_ratios() -> None:
    """`ratio` is 0 for a constant, k for k * s, None otherwise; `size_at` evaluates."""
    gm = _traced(lambda x: torch.cat([x.reshape(-1), x[:1].reshape(-1)]), randn(5, 4))
    s = graph_symbol(gm)
    assert isinstance(s, sympy.Symbol)
    flat = next(n for n in gm.graph.nodes if n.op == "output").args[0][0].meta["val"]
    assert size_at(flat.shape[0], s, 10) == 44 and ratio(flat.shape[0], s) is None
    x = next(
        n.meta["val"]
        for n in gm.graph.nodes
        if n.op == "placeholder" and isinstance(n.meta["val"], torch.Tensor)
    )
    assert ratio(x.shape[0], s) == 1 and ratio(x.shape[1], s) == 0
    assert ratio(x.shape[0] * 4, s) == 4 and size_at(7, s, 3) == 7
    reasons = dynamic_reasons(gm, s)
    # the cat reads 4 * s and makes 4 * (s + 1): two sizes, no region takes both
    cat = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.cat.default)
    assert list(reasons) == [cat] and "symbolic sizes" in reasons[cat], reasons


def test_concretize_copies_the_graph_at_a_size() -> None:
    """`concretize` leaves the symbolic graph as it is and gives a copy whose example
    values and size arguments are numbers at the size."""
    gm = _traced(lambda x: torch.tanh(x.reshape(x.shape[0] * 2, -1)), randn(6, 4))
    s = graph_symbol(gm)
    concrete, mapping = concretize(gm, s, 11)
    shapes = [tuple(n.meta["val"].shape) for n in concrete.graph.nodes if n.op != "output"]
    assert (11, 4) in shapes and (22, 2) in shapes
    assert all(isinstance(d, int) for sh in shapes for d in sh)
    assert graph_symbol(gm) == s  # the original is untouched
    assert all(m.graph is concrete.graph for m in mapping.values())


def test_splits_round_trip() -> None:
    """`with_splits` views an input of 16 * n rows as [n, 16, ...] and joins outputs
    back, without copies for contiguous tensors; `apply_splits` rewrites the function's
    types to match."""
    seen = []

    def fn(a: torch.Tensor) -> tuple:
        seen.append(a.shape)
        return (a * 2,)

    wrapped = with_splits(fn, [((0, 16),)], [((0, 16),)])
    x = randn(48, 5)
    (y,) = wrapped(x)
    assert seen == [torch.Size([3, 16, 5])] and y.shape == (48, 5)
    assert_close(y, x * 2)
    module = fuseopt.parse(
        "func.func @f(%x: tensor<48x5xf32>) -> tensor<48x5xf32> {\n"
        "  %y = nn.tanh %x : tensor<48x5xf32>\n"
        "  func.return %y : tensor<48x5xf32>\n}"
    )
    apply_splits(module, [((0, 16),)], [((0, 16),)], 3)
    text = str(module)
    assert "tensor<3x16x5xf32>" in text and text.count("nn.reshape") == 2


def test_a_matmul_over_the_symbolic_dim_compiles_per_size() -> None:
    """A GEMM that sums over the symbolic dim (every Linear's weight gradient) needs a
    static K: its region is compiled per size (strict: nothing may fall back), forward
    and backward match eager."""
    torch._dynamo.reset()

    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return ((x * y).tanh().t() @ y).exp()

    compiled = fuseopt.compile(f, backend="triton", strict=True)
    for n in (2, 3, 5):
        x, y = (randn(n, 4, seed=n + i).requires_grad_() for i in range(2))
        ex, ey = (t.detach().clone().requires_grad_() for t in (x, y))
        got, want = compiled(x, y), f(ex, ey)
        assert_close(got, want)
        got.sum().backward()
        want.sum().backward()
        assert_close(x.grad, ex.grad)
        assert_close(y.grad, ey.grad)


def test_host_scalars_after_a_size_input() -> None:
    """A region's CPU scalar is moved to the device of its first device tensor, also
    when a symbolic-size input (an int) comes first."""
    from fuseopt.frontends.fx.partition import CompiledRegion

    region = CompiledRegion(lambda *a: a, "r", (1,))
    out = region(3, torch.tensor(2.0), torch.empty(3, 4, device="meta"))
    assert out[0] == 3 and out[1].device.type == "meta"
