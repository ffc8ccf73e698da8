"""Repeated ATen calls merged before partitioning (frontends/fx/common_calls.py)."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import fuseopt
from fuseopt.frontends.fx.common_calls import merge_repeated_calls

aten = torch.ops.aten


def calls(gm: torch.fx.GraphModule, target: object) -> int:
    """How many calls of `target` the graph makes."""
    return sum(n.op == "call_function" and n.target is target for n in gm.graph.nodes)


def test_a_bias_each_layer_derives_from_one_mask_is_computed_once() -> None:
    def layers(mask: torch.Tensor, s1: torch.Tensor, s2: torch.Tensor) -> torch.Tensor:
        b1 = torch.where(mask, 0.0, float("-inf"))
        b2 = torch.where(mask, 0.0, float("-inf"))
        return (s1 + b1).softmax(-1) + (s2 + b2).softmax(-1)

    mask = torch.rand(6, 6) > 0.3
    mask.fill_diagonal_(True)
    s1, s2 = torch.randn(6, 6), torch.randn(6, 6)
    gm = make_fx(layers)(mask, s1, s2)
    where = aten.where.self
    before = calls(gm, where)
    assert merge_repeated_calls(gm) >= 1
    assert calls(gm, where) == 1 < before
    torch.testing.assert_close(gm(mask, s1, s2), layers(mask, s1, s2))


def test_returned_random_and_uninitialized_calls_stay_apart() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        e1, e2 = x.exp(), x.exp()  # both returned: the caller gets two tensors
        r1, r2 = torch.rand_like(x), torch.rand_like(x)  # two draws
        u1, u2 = torch.empty_like(x), torch.empty_like(x)
        return e1, e2, r1 + r2, u1.fill_(1.0) + u2.fill_(2.0)

    gm = make_fx(f)(torch.randn(3))
    counts = {t: calls(gm, t) for t in (aten.exp.default, aten.rand_like.default)}
    merge_repeated_calls(gm)
    assert {t: calls(gm, t) for t in counts} == counts
    x = torch.randn(3)
    e1, e2, _, filled = gm(x)
    assert e1 is not e2
    torch.testing.assert_close(filled, torch.full((3,), 3.0))


def test_different_constants_are_not_merged() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        ones = torch.where(x > 0, 0.0, 1.0) + torch.where(x > 0, 0.0, 2.0)
        zeros = 1.0 / torch.where(x > 0, 0.0, 1.0) + 1.0 / torch.where(x > 0, -0.0, 1.0)
        return ones + zeros

    gm = make_fx(f)(torch.randn(4))
    merge_repeated_calls(gm)
    assert calls(gm, aten.where.self) == 3  # the one repeat merged; 2.0 and -0.0 kept
    x = torch.randn(4)
    torch.testing.assert_close(gm(x), f(x), equal_nan=True)  # inf - inf where x > 0


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_layers_after_the_first_read_the_first_layers_attention_bias(family: str) -> None:
    """Hugging Face decoders with attention left to PyTorch: the regions between
    attention calls no longer each turn the causal mask into a bias (`nn.select`)."""
    pytest.importorskip("transformers")
    from benchmarks.models.hf import Prefill, build_model

    dims = dict(hidden=32, layers=3, heads=4, kv_heads=2, intermediate=64, vocab=128)
    model = Prefill(build_model(family, dims, False, torch.float32, torch.device("cpu"), 0), True)
    ids = torch.randint(0, 128, (2, 8))
    with torch.no_grad():
        expected = model(ids)
        compiled = fuseopt.compile(model, (ids,), backend="interpret", attention="eager")
        got = compiled(ids)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    selects = [str(r.imported).count("nn.select") for r in compiled.regions]
    assert len(selects) == 4 and selects[0] > 0 and selects[1:] == [0, 0, 0]


def test_outputs_through_items_and_views_stay_apart() -> None:
    """Two sorts whose values the graph returns (through `getitem`), and two cumprods
    returned as views: merged, the caller would get one tensor twice."""

    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a, b = torch.sort(x * 2, 1), torch.sort(x * 2, 1)
        return a.values, b.values, torch.cumprod(x, 1).view(-1), torch.cumprod(x, 1).view(8)

    gm = make_fx(f)(torch.randn(2, 4))
    merge_repeated_calls(gm)
    assert calls(gm, aten.sort.default) == 2 and calls(gm, aten.cumprod.default) == 2
    a, b, c, d = gm(torch.randn(2, 4))
    assert a.data_ptr() != b.data_ptr() and c.data_ptr() != d.data_ptr()


@torch.library.custom_op("fuseopt_test::noisy", mutates_args=())
def noisy(x: torch.Tensor) -> torch.Tensor:
    """A custom op drawing random numbers without the nondeterministic tag."""
    return x + torch.rand_like(x)


noisy.register_fake(lambda x: torch.empty_like(x))


def test_custom_ops_are_not_merged() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return noisy(x) - noisy(x)

    gm = make_fx(f)(torch.randn(8))
    target = torch.ops.fuseopt_test.noisy.default
    assert merge_repeated_calls(gm) == 0 and calls(gm, target) == 2
    assert gm(torch.randn(64)).abs().sum() > 0
