"""Capture of attention into nn.attention from PyTorch programs: every form of
F.scaled_dot_product_attention Dynamo hands over, the `attention` option, torch.export,
training through SDPA, Hugging Face models, and the forms left to PyTorch. The op, its
schedule and both printers are tested in test_attention.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fuseopt
from fuseopt.dialects import nn

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


class Attention(torch.nn.Module):
    """A block calling F.scaled_dot_product_attention with the given keywords."""

    def __init__(self, **kwargs: object):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, q, k, v, mask=None):  # noqa: ANN001, ANN201
        if mask is not None and mask.dtype == torch.bool:  # a padding mask, expanded
            mask = mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
            if self.kwargs.get("min_fill"):  # as Hugging Face builds additive masks
                low = torch.finfo(q.dtype).min
                mask = torch.where(mask, torch.zeros((), dtype=q.dtype), low)
        return (
            F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, **{k: a for k, a in self.kwargs.items() if k != "min_fill"}
            )
            * 2
        )


def _capture_inputs(form: str, dtype: torch.dtype) -> tuple[torch.nn.Module, tuple]:
    g = torch.Generator().manual_seed(1)

    def r(*s: int) -> torch.Tensor:
        return torch.randn(s, generator=g).to(dtype)

    if form == "causal":
        return Attention(is_causal=True), (r(2, 4, 24, 16), r(2, 4, 24, 16), r(2, 4, 24, 16))
    if form == "gqa_scale":
        return Attention(enable_gqa=True, scale=0.3), (
            r(1, 4, 9, 16),
            r(1, 2, 13, 16),
            r(1, 2, 13, 16),
        )
    if form == "expanded_bool_mask":
        keep = torch.rand(2, 1, 1, 13, generator=g) > 0.3
        keep[..., 0] = True
        return Attention(), (
            r(2, 2, 9, 16),
            r(2, 2, 13, 16),
            r(2, 2, 13, 16),
            keep,
        )
    if form == "min_fill_mask":
        keep = torch.rand(2, 1, 1, 13, generator=g) > 0.3
        keep[..., 0] = True
        return Attention(min_fill=True), (r(2, 2, 9, 16), r(2, 2, 13, 16), r(2, 2, 13, 16), keep)
    if form == "additive_mask":
        return Attention(), (r(1, 2, 9, 16), r(1, 2, 13, 16), r(1, 2, 13, 16), r(9, 13))
    assert form == "three_d"
    return Attention(is_causal=True), (r(3, 10, 16), r(3, 10, 16), r(3, 10, 16))


FORMS = ["causal", "gqa_scale", "expanded_bool_mask", "min_fill_mask", "additive_mask"]
"""SDPA forms PyTorch's dispatch traces as its fused kernels (3-d operands trace as its
math fallback: `test_sdpa_is_one_op_whatever_kernel_the_device_picks`)."""


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("element", ["f32", "bf16"])
def test_sdpa_compiles_to_one_attention_kernel(form: str, element: str) -> None:
    """By default (attention="fused") SDPA becomes nn.attention: one attention kernel,
    nothing left to PyTorch, results as eager's."""
    dtype = DTYPES[element]
    model, inputs = _capture_inputs(form, dtype)
    compiled = fuseopt.compile(model, backend="triton")
    got = compiled(*inputs)
    assert not compiled.fallbacks, compiled.fallbacks
    assert [k.schedule for k in compiled.kernels].count("attention") == 1
    imported = compiled.regions[0].imported
    attention = [op for op in imported.walk() if isinstance(op, nn.AttentionOp)]
    assert len(attention) == 1
    if form in ("expanded_bool_mask", "min_fill_mask"):  # the kernel reads [2, 1, 1, 13]
        assert attention[0].mask.type.get_shape() == (2, 1, 1, 13)  # type: ignore[union-attr]
    with torch.no_grad():
        want = model(*(x.double() if x.is_floating_point() else x for x in inputs))
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol)


def test_sdpa_is_one_op_whatever_kernel_the_device_picks() -> None:
    """In a graph that needs no gradient, each SDPA call is fuseopt's own op before
    AOTAutograd traces it (`frontends/fx/attention_call.py`): the 3-d form, which
    PyTorch's dispatch traces as its math fallback (two GEMMs and a softmax; on a GPU
    also f32 grouped-query heads), is one attention kernel too."""
    model, inputs = _capture_inputs("three_d", torch.float32)
    compiled = fuseopt.compile(model, backend="triton")
    with torch.no_grad():
        got = compiled(*inputs)
        want = model(*(x.double() for x in inputs))
    assert not compiled.fallbacks, compiled.fallbacks
    assert [k.schedule for k in compiled.kernels].count("attention") == 1
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


def test_attention_option_nn_decomposes_and_eager_keeps_it() -> None:
    model, inputs = _capture_inputs("causal", torch.float32)
    decomposed = fuseopt.compile(model, inputs, backend="interpret", attention="nn")
    imported = decomposed.regions[0].imported
    assert not [op for op in imported.walk() if isinstance(op, nn.AttentionOp)]
    assert len([op for op in imported.walk() if isinstance(op, nn.MatmulOp)]) == 2
    torch.testing.assert_close(decomposed(*inputs), model(*inputs), rtol=1e-5, atol=1e-5)
    eager = fuseopt.compile(model, inputs, backend="interpret", attention="eager")
    assert any("attention" in f.target for f in eager.fallbacks)


@pytest.mark.parametrize("form", [*FORMS, "three_d"])
def test_export_keeps_one_attention_op(form: str) -> None:
    """torch.export keeps the SDPA composite: one nn.attention in the text, which runs
    again from the text (through the Triton interpreter) as eager does."""
    model, inputs = _capture_inputs(form, torch.float32)
    text = fuseopt.export(model, inputs)
    assert text.count("nn.attention") == 1 and "torch_call" not in text
    if form == "gqa_scale":
        assert "scale = 3.000000e-01" in text
    got = fuseopt.load_mlir(text, backend="triton")(*inputs)
    torch.testing.assert_close(got[0], model(*inputs), rtol=1e-5, atol=1e-5)


def test_training_keeps_pytorch_attention_and_matches_gradients() -> None:
    """With gradients on, the forward graph's SDPA returns the logsumexp its backward
    needs, which nn.attention does not: that node stays PyTorch's fused kernel (forward
    and backward, never the S x S scores), everything else compiles, and the gradients
    match eager's."""
    model, inputs = _capture_inputs("causal", torch.float32)
    leaves = [x.clone().requires_grad_() for x in inputs]
    compiled = fuseopt.compile(model, backend="interpret")
    compiled(*leaves).square().sum().backward()
    eager_leaves = [x.clone().requires_grad_() for x in inputs]
    model(*eager_leaves).square().sum().backward()
    for got, want in zip(leaves, eager_leaves, strict=True):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-5)
    targets = {f.target for f in compiled.fallbacks}
    assert any("scaled_dot_product" in t for t in targets), targets
    assert compiled.regions  # the rest (the scaling around it, the backward) compiled


@pytest.mark.parametrize("family", ["llama", "qwen2", "gpt2", "bert"])
def test_hugging_face_models_get_one_attention_per_layer(family: str) -> None:
    """Two-layer Hugging Face models with SDPA attention: one nn.attention per layer,
    no attention op left to PyTorch, outputs as eager's."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    small = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}
    heads = {"num_attention_heads": 4, "vocab_size": 100, "attn_implementation": "sdpa"}
    if family == "llama":
        model = transformers.LlamaForCausalLM(
            transformers.LlamaConfig(**small, **heads, num_key_value_heads=2)
        )
    elif family == "qwen2":
        model = transformers.Qwen2ForCausalLM(
            transformers.Qwen2Config(**small, **heads, num_key_value_heads=2)
        )
    elif family == "gpt2":
        config = transformers.GPT2Config(
            n_embd=64, n_layer=2, n_head=4, vocab_size=100, attn_implementation="sdpa"
        )
        model = transformers.GPT2LMHeadModel(config)
    else:
        model = transformers.BertModel(transformers.BertConfig(**small, **heads))
    model.eval()
    ids = torch.randint(0, 100, (2, 12))
    kwargs = {}
    if family == "bert":  # a padded second sequence
        kwargs["attention_mask"] = (torch.arange(12) < torch.tensor([[12], [8]])).long()
    compiled = fuseopt.compile(model, backend="interpret")
    with torch.no_grad():
        got, want = compiled(ids, **kwargs)[0], model(ids, **kwargs)[0]
    attention = [
        op for r in compiled.regions for op in r.imported.walk() if isinstance(op, nn.AttentionOp)
    ]
    assert len(attention) == 2
    assert not [f for f in compiled.fallbacks if "attention" in f.target]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_batch_broadcast_attention_runs_in_pytorch() -> None:
    """A key of batch 1 against a query of batch 2 (PyTorch broadcasts it): not an
    nn.attention form, so the node runs in PyTorch's kernel, with the same result."""
    model = Attention()
    g = torch.Generator().manual_seed(2)
    q, k, v = torch.randn(2, 2, 5, 16, generator=g), *(torch.randn(1, 2, 7, 16) for _ in "kv")
    compiled = fuseopt.compile(model, backend="interpret")
    torch.testing.assert_close(compiled(q, k, v), model(q, k, v))


class RepeatedKV(torch.nn.Module):
    """Grouped-query attention as Hugging Face's SDPA path computes it: `repeat_kv`
    (expand over the query group, reshape) before F.scaled_dot_product_attention."""

    def forward(self, q, k, v):  # noqa: ANN001, ANN201
        def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
            b, h, s, d = x.shape
            return x[:, :, None].expand(b, h, groups, s, d).reshape(b, h * groups, s, d)

        groups = q.shape[1] // k.shape[1]
        return F.scaled_dot_product_attention(
            q, repeat_kv(k, groups), repeat_kv(v, groups), is_causal=True
        )


@pytest.mark.parametrize("element", ["f32", "bf16"])
def test_repeated_kv_heads_are_read_unrepeated(element: str) -> None:
    """The attention kernel reads the [B, Hkv, S, D] keys and values (query head h reads
    head h // G): no kernel copies them G times, and the result is eager's."""
    dtype = DTYPES[element]
    g = torch.Generator().manual_seed(2)
    q, k, v = (
        torch.randn(s, generator=g).to(dtype)
        for s in ((2, 6, 11, 16), (2, 2, 11, 16), (2, 2, 11, 16))
    )
    model = RepeatedKV()
    compiled = fuseopt.compile(model, backend="triton")
    with torch.no_grad():
        got = compiled(q, k, v)
        want = model(q.double(), k.double(), v.double())
    assert [k.schedule for k in compiled.kernels] == ["attention"], compiled.kernels
    fused = compiled.regions[0].compiled.fused_module
    (attention,) = [op for op in fused.walk() if isinstance(op, nn.AttentionOp)]
    assert attention.key.type.get_shape() == (2, 2, 11, 16)  # type: ignore[union-attr]
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol)
