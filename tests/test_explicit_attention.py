"""Attention written out as ops in a graph that needs gradients becomes PyTorch's SDPA
(`frontends/fx/explicit_attention.py`), on the CPU: which chains are taken and which
stay as written, on Dynamo's own graphs of small modules, and the compiled training
step's outputs and gradients against eager's (the backward keeps no L x S scores)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.fx import GraphModule

import fuseopt
from fuseopt.frontends.fx.explicit_attention import sdpa_from_explicit


def _dynamo_graph(fn: Callable[..., torch.Tensor], *inputs: torch.Tensor) -> GraphModule:
    """Dynamo's torch-level graph of `fn` at `inputs`."""
    graphs: list[GraphModule] = []

    def keep(gm: GraphModule, example_inputs: object) -> Callable[..., object]:  # noqa: ARG001
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=keep, fullgraph=True)(*inputs)
    (gm,) = graphs
    return gm


def _run(
    gm: GraphModule, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **more: torch.Tensor
) -> torch.Tensor:
    """`gm` called with q, k, v (and tensors `more` it reads by name) in its
    placeholders' order (Dynamo's: first use)."""
    named = {"L_q_": q, "L_k_": k, "L_v_": v, **{f"L_{n}_": t for n, t in more.items()}}
    (out,) = gm(*(named[n.target] for n in gm.graph.nodes if n.op == "placeholder"))
    return out


def _sdpa_calls(gm: GraphModule) -> int:
    return sum(n.target is F.scaled_dot_product_attention for n in gm.graph.nodes)


def _softmaxes(gm: GraphModule) -> int:
    return sum("softmax" in str(n.target) for n in gm.graph.nodes)


B, H, L, S, E = 2, 3, 5, 7, 8


def _qkv(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, n, E, generator=g) for n in (L, S, S))  # type: ignore[return-value]


def _causal_drop() -> torch.Tensor:
    return torch.ones(L, S).tril(S - L) == 0  # True where a key is dropped


def _bias() -> torch.Tensor:
    return torch.arange(H * L * S, dtype=torch.float32).reshape(1, H, L, S).sin()


TAKEN = {
    "scaled_masked_fill": lambda q, k, v: (
        torch.softmax(
            (q @ k.transpose(-2, -1) * (1.0 / math.sqrt(E))).masked_fill(_causal_drop(), -math.inf),
            dim=-1,
        )
        @ v
    ),
    "divided_additive": lambda q, k, v: F.softmax(
        torch.matmul(q, k.transpose(2, 3)) / math.sqrt(E) + _bias(), dim=-1
    ).matmul(v),
    "hf_eager": lambda q, k, v: (
        F.dropout(
            F.softmax(q @ k.transpose(2, 3) * 0.3 + _bias(), dim=-1, dtype=torch.float32).to(
                q.dtype
            ),
            p=0.1,
            training=False,
        )
        @ v
    ),
    "unscaled_mT_scale_first": lambda q, k, v: (2.0 * (q @ k.mT)).softmax(-1) @ v,
    "upcast_then_back": lambda q, k, v: (
        (q @ k.transpose(-1, -2)).float().softmax(dim=3).type_as(q) @ v
    ),
}


def _weights_used_again(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    p = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return p @ v + p.mean()


KEPT = {
    "finite_fill": lambda q, k, v: (
        torch.softmax(
            (q @ k.transpose(-2, -1)).masked_fill(_causal_drop(), torch.finfo(q.dtype).min), dim=-1
        )
        @ v
    ),
    "dropout_that_drops": lambda q, k, v: (
        F.dropout(torch.softmax(q @ k.transpose(-2, -1), dim=-1), p=0.5, training=True) @ v
    ),
    "weights_used_again": lambda q, k, v: _weights_used_again(q, k, v),
    "mask_before_scale": lambda q, k, v: (
        torch.softmax((q @ k.transpose(-2, -1) + _bias()) * 0.5, dim=-1) @ v
    ),
    "softmax_over_queries": lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1), dim=-2) @ v,
    "keys_not_transposed": lambda q, k, v: torch.softmax(q @ k[..., :E, :], dim=-1) @ v,
    "softmax_operand_by_keyword": lambda q, k, v: F.softmax(input=q @ k.mT, dim=-1) @ v,
    "add_with_alpha": lambda q, k, v: (
        torch.softmax(torch.add(q @ k.mT, _bias(), alpha=3.0), -1) @ v
    ),
    "rounding_division": lambda q, k, v: (
        torch.softmax(torch.div(q @ k.mT, 2.0, rounding_mode="floor"), -1) @ v
    ),
    "one_dimensional_mask": lambda q, k, v: torch.softmax(q @ k.mT + _bias()[0, 0, 0], -1) @ v,
    "mask_enlarging_the_scores": lambda q, k, v: (
        torch.softmax(
            (q[0] @ k[0].mT).masked_fill(_causal_drop().expand(4, H, L, S), -math.inf), -1
        )
        @ v[0]
    ),
}


@pytest.mark.parametrize("name", list(TAKEN))
def test_written_out_attention_becomes_one_sdpa_call(name: str) -> None:
    fn = TAKEN[name]
    q, k, v = _qkv(1)
    gm = _dynamo_graph(fn, q, k, v)
    rewritten = sdpa_from_explicit(gm)
    assert _sdpa_calls(rewritten) == 1 and _softmaxes(rewritten) == 0, rewritten.code
    assert _sdpa_calls(gm) == 0, "Dynamo's own graph was changed"
    for seed in (2, 3):
        q, k, v = _qkv(seed)
        torch.testing.assert_close(_run(rewritten, q, k, v), fn(q, k, v), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(KEPT))
def test_chains_that_are_not_sdpa_stay_as_written(name: str) -> None:
    q, k, v = _qkv(1)
    if name == "keys_not_transposed":
        k = torch.randn(B, H, E + 1, S)
    gm = _dynamo_graph(KEPT[name], q, k, v)
    assert sdpa_from_explicit(gm) is gm


def test_rows_masked_whole_come_out_as_sdpa_defines_them() -> None:
    """Eager's written-out softmax gives NaN for a query with every key dropped; the
    rewritten graph gives what PyTorch's SDPA gives (module doc of explicit_attention)."""
    drop = torch.zeros(L, S, dtype=torch.bool)
    drop[1] = True

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax((q @ k.mT).masked_fill(drop, -math.inf), dim=-1) @ v

    q, k, v = _qkv(1)
    rewritten = sdpa_from_explicit(_dynamo_graph(fn, q, k, v))
    assert _sdpa_calls(rewritten) == 1
    got = _run(rewritten, q, k, v, drop=drop)
    assert fn(q, k, v)[:, :, 1].isnan().all()
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=~drop, scale=1.0)
    torch.testing.assert_close(got, sdpa, equal_nan=True)
    torch.testing.assert_close(got[:, :, 0], fn(q, k, v)[:, :, 0], rtol=1e-5, atol=1e-5)


class CausalBlock(nn.Module):
    """nanoGPT's attention: a causal mask from a `tril` buffer, a softmax, dropout off."""

    def __init__(self, dim: int = 32, heads: int = 2, length: int = 16) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.register_buffer(
            "bias", torch.tril(torch.ones(length, length)).view(1, 1, length, length)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (
            y.view(b, t, self.heads, -1).transpose(1, 2) for y in self.qkv(x).split(d, dim=2)
        )
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        return self.out(y.transpose(1, 2).contiguous().view(b, t, d))


Tolerance = tuple[float, float]
"""rtol, atol."""


def _matches_eagers_training_step(
    eager: nn.Module,
    model: nn.Module,
    compiled: fuseopt.CompiledModule,
    x: torch.Tensor,
    outputs: Tolerance,
    input_grad: Tolerance,
    weight_grads: Tolerance,
) -> None:
    """One forward and backward of `eager` and of `compiled` (of `model`, eager's
    weights): outputs, the input's gradient and every weight's gradient are close."""
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    want, got = eager(xe), compiled(xc)
    grad = torch.randn_like(want)
    want.backward(grad)
    got.backward(grad)
    torch.testing.assert_close(got, want, rtol=outputs[0], atol=outputs[1])
    torch.testing.assert_close(xc.grad, xe.grad, rtol=input_grad[0], atol=input_grad[1])
    for (name, p), (_, pe) in zip(model.named_parameters(), eager.named_parameters(), strict=True):
        torch.testing.assert_close(
            p.grad, pe.grad, rtol=weight_grads[0], atol=weight_grads[1], msg=name
        )


@pytest.mark.parametrize("attention", ["fused", "nn"])
def test_a_training_step_runs_the_attention_as_sdpa_with_eagers_gradients(attention: str) -> None:
    """Outputs and every gradient match eager's; the fallbacks name PyTorch's SDPA
    forward and backward, except under attention="nn" (decomposed as written)."""
    torch.manual_seed(0)
    eager = CausalBlock()
    model = CausalBlock()
    model.load_state_dict(eager.state_dict())
    x = torch.randn(2, 16, 32)
    torch._dynamo.reset()
    compiled = fuseopt.compile(model, backend="triton", attention=attention)
    tight = (1e-5, 1e-5)
    _matches_eagers_training_step(eager, model, compiled, x, tight, tight, tight)
    sdpa = [f.target for f in compiled.fallbacks if "scaled_dot_product" in f.target]
    assert (len(sdpa) == 2) == (attention == "fused"), compiled.fallbacks


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("length", [15, 16])
def test_a_bf16_training_step_on_the_gpu_matches_eager(length: int) -> None:
    """On a GPU the rewritten chain runs PyTorch's fused SDPA (a boolean mask of odd
    length: the memory-efficient kernels' bias, aligned forward and backward); outputs
    and gradients match eager's written-out attention within bf16 rounding."""
    torch.manual_seed(0)
    eager = CausalBlock(dim=256, heads=4).cuda().to(torch.bfloat16)
    model = CausalBlock(dim=256, heads=4).cuda().to(torch.bfloat16)
    model.load_state_dict(eager.state_dict())
    x = torch.randn(4, length, 256, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    compiled = fuseopt.compile(model, backend="triton")
    _matches_eagers_training_step(
        eager, model, compiled, x, (3e-2, 3e-2), (5e-2, 5e-2), (5e-2, 1e-1)
    )
    assert any("scaled_dot_product" in f.target for f in compiled.fallbacks), compiled.fallbacks
