"""Graphs Dynamo traces with several symbolic sizes, compiled in versions of one dynamic
size each (frontends/fx/shape_versions.py): a batch and a sequence length under
`dynamic=True`, a decode step whose cache and mask grow together; each version against
eager, what it fixes, what it reads as one size, and the traces it refuses."""

from __future__ import annotations

import logging

import pytest
import sympy
import torch
import torch.nn.functional as F
from test_frontend_common import randn, randomize
from torch import nn

import fuseopt
from benchmarks.batch_sweep import Block
from fuseopt.frontends.fx.shape_versions import (
    SizeVersion,
    _specialized,
    generalized_inputs,
    sizes_inlined,
)


def assert_close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def _versions(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith("fuseopt: compiled a version for every n")
    ]


@pytest.mark.parametrize("backend", ["triton", "interpret"])
def test_batch_varies_under_each_sequence_length(
    backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """dynamic=True over (batch, sequence) pairs: the first call compiles its shapes, the
    second (another batch) a version for every batch at that length, a new length a
    version of its own; later batches compile nothing. Every call matches eager. On the
    GPU where there is one (Triton 3.6's interpreter cannot loop to a bound given at run
    time)."""
    torch._dynamo.reset()
    device = "cuda" if torch.cuda.is_available() and backend == "triton" else "cpu"
    model = randomize(Block(32, 2)).eval().to(device)
    compiled = fuseopt.compile(model, backend=backend, dynamic=True)
    calls = [(2, 8), (3, 8), (5, 8), (4, 8), (3, 16), (6, 16), (2, 8), (9, 16)]
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="fuseopt"):
        for i, (batch, seq) in enumerate(calls):
            x = randn(batch, seq, 32, seed=i).to(device)
            assert_close(compiled(x), model(x))
            if (batch, seq) == (3, 8):
                kernels = len(compiled.kernels)
            if (batch, seq) == (4, 8) and backend == "triton":  # kernels take the batch
                assert len(compiled.kernels) == kernels, "nothing compiled for batch 5 or 4"
    assert len(compiled.record.graphs) == 3, compiled.record.graphs
    versions = _versions(caplog)
    assert len(versions) == 2 and all("= 8" in v or "= 16" in v for v in versions), versions
    assert not compiled.fallbacks, [(f.target, f.reason) for f in compiled.fallbacks]


class _TokenMLP(nn.Module):
    """Norm, GELU MLP and a residual over [batch, tokens, features]."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


def test_training_through_versions() -> None:
    """Gradients through a version (forward and backward graphs traced with one
    symbolic size) match eager's at batches the version did not see."""
    torch._dynamo.reset()
    model = randomize(_TokenMLP())
    reference = randomize(_TokenMLP())
    compiled = fuseopt.compile(model, backend="interpret", dynamic=True)
    for i, batch in enumerate((2, 3, 5, 7)):
        x = randn(batch, 6, 8, seed=i)
        for p in (*model.parameters(), *reference.parameters()):
            p.grad = None
        compiled(x).square().sum().backward()
        reference(x).square().sum().backward()
        for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=name)
    graphs = compiled.record.graphs
    assert len([g for g in graphs if g.startswith("forward")]) == 2, graphs


def _symbols(*names: str) -> list[sympy.Symbol]:
    return [sympy.Symbol(n, integer=True, positive=True) for n in names]


def test_a_version_reads_sizes_with_offsets() -> None:
    """The group's sizes must be one value plus their offsets, the fixed ones equal."""
    fn = object()
    s0, s1 = _symbols("s0", "s1")
    group = (((0, None), 0), ((1, 1), 1))  # an int argument n, then dim 1 of a tensor: n + 1
    version = SizeVersion(group, (((2, 0), 4),), (), fn, {s0: 0, s1: 1})
    assert version.matches([7, torch.zeros(3, 8), torch.zeros(4)])
    assert version.matches([2, torch.zeros(3, 3), torch.zeros(4)])
    assert not version.matches([7, torch.zeros(3, 7), torch.zeros(4)]), "offset"
    assert not version.matches([7, torch.zeros(3, 8), torch.zeros(5)]), "fixed size"


def _dynamo_graph(f: object, *args: torch.Tensor) -> torch.fx.GraphModule:
    """The graph Dynamo hands a backend for `f(*args)` under dynamic=True."""
    captured = {}

    def keep(gm: torch.fx.GraphModule, inputs: list) -> object:
        captured["gm"] = gm
        return gm.forward

    torch._dynamo.reset()
    torch.compile(f, backend=keep, dynamic=True)(*args)
    return captured["gm"]


def _traced(gm: torch.fx.GraphModule) -> list:
    return [n.meta["example_value"] for n in gm.graph.nodes if n.op == "placeholder"]


def _by_hint(gm: torch.fx.GraphModule) -> dict[int, sympy.Symbol]:
    """The graph's size symbols by their traced values (all distinct here)."""
    return {v.node.hint: v.node.expr for v in _traced(gm) if isinstance(v, torch.SymInt)}


def _masked_sum(x: torch.Tensor, mask: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x.sum(1)[:, None] + mask[:, : x.shape[1] + 1].sum(1)[:, None] * y.shape[0]


@pytest.mark.parametrize("offsets", [(0, 1), (5, 6)], ids=["base-0", "base-5"])
def test_sizes_are_inlined_or_read_once(offsets: tuple[int, int]) -> None:
    """Fixed sizes become numbers and a group's second size the first plus the offsets'
    difference (whatever the first's own offset): their placeholders go, and the graph
    computes what the original does at other sizes of the group."""
    args = (randn(2, 5, seed=1), randn(2, 6, seed=2), randn(3, seed=3))
    gm = _dynamo_graph(_masked_sum, *args)
    by_hint = _by_hint(gm)
    tokens, mask = by_hint[5], by_hint[6]
    values = {expr: hint for hint, expr in by_hint.items()}
    inlined, dropped = sizes_inlined(gm, {tokens: offsets[0], mask: offsets[1]}, values)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(dropped) == 3, "batch and y's length fixed, the mask's length read"
    assert all(i < len(placeholders) for i in dropped)
    for length in (5, 9, 2):  # tokens at other lengths, the mask one longer
        other = (randn(2, length, seed=length), randn(2, length + 1, seed=7), args[2])
        sizes = {tokens: length, mask: length + 1, by_hint[2]: 2, by_hint[3]: 3}
        tensors = iter(other)
        call = [
            sizes[v.node.expr] if isinstance(v, torch.SymInt) else next(tensors)
            for i, v in enumerate(_traced(gm))
            if i not in dropped
        ]
        torch.testing.assert_close(inlined(*call)[0], _masked_sum(*other))


@pytest.mark.parametrize("branch", ["greater", "not_equal"], ids=["n>10", "n!=8"])
def test_a_trace_that_pins_the_size_is_refused(branch: str) -> None:
    """A guard that some size at least 2 breaks (a branch on `n > 10`, or on `n != 8`,
    which most sizes satisfy) makes a version hold for the call's shapes only; a trace
    without one holds for every size."""
    args = (randn(2, 5, seed=1), randn(2, 6, seed=2), randn(3, seed=3))
    gm = _dynamo_graph(_masked_sum, *args)
    by_hint = _by_hint(gm)
    values = {expr: hint for hint, expr in by_hint.items()}
    inputs, n, env = generalized_inputs(_traced(gm), {by_hint[5]: 0, by_hint[6]: 1}, values)
    x = next(t for t in inputs if isinstance(t, torch.Tensor) and t.shape[0] == 2)
    assert not _specialized(env, n)
    assert bool(x.shape[1] >= 2)  # always so: no pin
    assert not _specialized(env, n)
    if branch == "greater":
        assert not bool(x.shape[1] > 10)
    else:
        assert bool(x.shape[1] != 8)
    assert _specialized(env, n)
