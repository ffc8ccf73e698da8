"""Hugging Face blocks from tiny configs (no download) through
`torch.compile(..., backend="fuseopt", options={"backend": "interpret"})` against eager:
Llama, Qwen2 and Mistral decoder layers (RMSNorm, rotary embedding, grouped-query
attention with a causal mask, SwiGLU MLP), GPT2Block and BertLayer. With eager attention,
and with SDPA under option attention="nn", every op is compiled (no fallback log line);
by default SDPA's fused kernel runs eagerly (one log line); training through a Llama
layer matches eager's gradients. Skipped when `transformers` is not installed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
import torch
from test_frontend_common import assert_close

import fuseopt

transformers = pytest.importorskip("transformers")

HIDDEN, HEADS, KV_HEADS, SEQ, BATCH = 32, 4, 2, 8, 2

Case = tuple[torch.nn.Module, tuple[torch.Tensor, ...], dict[str, Any]]


def _init(layer: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """Seeded non-trivial weights (norm weights too, never all ones), in eval mode."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2 + (1.0 if p.dim() == 1 else 0.0))
    return layer.to(dtype).eval()


def _hidden(dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, SEQ, HIDDEN, generator=g).to(dtype)


def _causal_mask(dtype: torch.dtype) -> torch.Tensor:
    """An additive (batch, 1, seq, seq) causal mask, as HF builds for eager attention;
    the second sequence also pads its first two positions."""
    allowed = torch.ones(SEQ, SEQ, dtype=torch.bool).tril()[None, None].repeat(BATCH, 1, 1, 1)
    allowed[1, :, :, :2] = False
    allowed[1, :, :2, :2] = torch.eye(2, dtype=torch.bool)  # rows never fully masked
    mask = torch.zeros(allowed.shape, dtype=dtype)
    return mask.masked_fill(~allowed, torch.finfo(dtype).min)


def _decoder(family: str, attn: str, dtype: torch.dtype) -> Case:
    module = getattr(transformers.models, family)
    prefix = {"llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral"}[family]
    config = getattr(transformers, f"{prefix}Config")(
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        num_hidden_layers=1,
        vocab_size=64,
        max_position_embeddings=64,
    )
    config._attn_implementation = attn
    modeling = getattr(module, f"modeling_{family}")
    layer = _init(getattr(modeling, f"{prefix}DecoderLayer")(config, 0), dtype)
    x = _hidden(dtype)
    rotary = getattr(modeling, f"{prefix}RotaryEmbedding")(config)
    position_ids = torch.arange(SEQ)[None].expand(BATCH, SEQ)
    cos, sin = rotary(x, position_ids)
    kwargs = {"position_embeddings": (cos, sin), "attention_mask": _causal_mask(dtype)}
    return layer, (x,), kwargs


def _gpt2(attn: str, dtype: torch.dtype) -> Case:
    config = transformers.GPT2Config(
        n_embd=HIDDEN,
        n_head=HEADS,
        n_layer=1,
        n_positions=64,
        vocab_size=64,
        bos_token_id=0,
        eos_token_id=0,
    )
    config._attn_implementation = attn
    layer = _init(transformers.models.gpt2.modeling_gpt2.GPT2Block(config, 0), dtype)
    return layer, (_hidden(dtype),), {"attention_mask": _causal_mask(dtype)}


def _bert_config() -> Any:  # noqa: ANN401 - a transformers.BertConfig
    return transformers.BertConfig(
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_attention_heads=HEADS,
        num_hidden_layers=1,
        vocab_size=64,
        max_position_embeddings=64,
    )


def _bert(attn: str, dtype: torch.dtype) -> Case:
    config = _bert_config()
    config._attn_implementation = attn
    layer = _init(transformers.models.bert.modeling_bert.BertLayer(config), dtype)
    padding = torch.zeros(BATCH, 1, 1, SEQ, dtype=dtype)
    padding[1, ..., -3:] = torch.finfo(dtype).min
    return layer, (_hidden(dtype),), {"attention_mask": padding}


CASES: dict[str, Callable[[str, torch.dtype], Case]] = {
    "llama": lambda attn, dtype: _decoder("llama", attn, dtype),
    "qwen2": lambda attn, dtype: _decoder("qwen2", attn, dtype),
    "mistral": lambda attn, dtype: _decoder("mistral", attn, dtype),
    "gpt2": _gpt2,
    "bert": _bert,
}


def _first(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, tuple | list) else out


def _run(
    name: str,
    attn: str,
    dtype: torch.dtype,
    caplog: pytest.LogCaptureFixture,
    attention: str = "eager",
) -> list[str]:
    """Compile the block with torch.compile(backend="fuseopt"), compare with eager, and
    return the fallback log lines (after checking that regions were compiled)."""
    torch._dynamo.reset()
    layer, args, kwargs = CASES[name](attn, dtype)
    options = {"backend": "interpret", "attention": attention}
    compiled = torch.compile(layer, backend="fuseopt", options=options)
    with caplog.at_level(logging.DEBUG, logger="fuseopt"), torch.no_grad():
        expected = _first(layer(*args, **kwargs))
        actual = _first(compiled(*args, **kwargs))
    assert_close(actual, expected)
    messages = [r.getMessage() for r in caplog.records if r.name == "fuseopt"]
    compiled_regions = [m for m in messages if m.startswith("fuseopt: compiled ")]
    assert compiled_regions, messages
    assert all(": 0 kernel(s)" not in m for m in compiled_regions)  # "20 kernel(s)" is fine
    return [m for m in messages if "run eagerly" in m]


@pytest.mark.parametrize("name", sorted(CASES))
def test_block_eager_attention(name: str, caplog: pytest.LogCaptureFixture) -> None:
    """With eager attention the whole block compiles: no op falls back."""
    assert _run(name, "eager", torch.float32, caplog) == []


@pytest.mark.parametrize("name", ["llama", "gpt2", "bert"])
def test_block_sdpa_attention(name: str, caplog: pytest.LogCaptureFixture) -> None:
    """With SDPA (Hugging Face's default) and option attention="nn", the fused attention
    kernel is converted to nn primitives too: nothing falls back, the block matches."""
    assert _run(name, "sdpa", torch.float32, caplog, attention="nn") == []


def test_block_sdpa_attention_default_is_fused(caplog: pytest.LogCaptureFixture) -> None:
    """By default PyTorch's fused attention kernel compiles (one nn.attention): nothing
    runs eagerly; with attention="eager" one log line names it, the rest of the block is
    compiled, and both match eager."""
    assert _run("llama", "sdpa", torch.float32, caplog, attention="fused") == []
    caplog.clear()
    (line,) = _run("llama", "sdpa", torch.float32, caplog)
    assert "scaled_dot_product" in line and "1 op(s) run eagerly" in line
    assert "attention='eager'" in line


def test_llama_bf16(caplog: pytest.LogCaptureFixture) -> None:
    """The Llama decoder layer in bf16 (its RMSNorm computes in f32) is as accurate as
    eager: both are held to a float64 run of the same weights and inputs, and fuseopt's
    largest error may be at most twice eager's. (Comparing bf16 with bf16 fails on one
    rounding step: outputs near 5 are 0.03 apart in bf16, whichever side rounds.)"""
    torch._dynamo.reset()
    layer, (x,), kwargs = CASES["llama"]("eager", torch.bfloat16)
    compiled = torch.compile(layer, backend="fuseopt", options={"backend": "interpret"})
    with caplog.at_level(logging.DEBUG, logger="fuseopt"), torch.no_grad():
        expected = _first(layer(x, **kwargs))
        actual = _first(compiled(x, **kwargs))
        cos, sin = kwargs["position_embeddings"]
        reference = _first(
            layer.double()(
                x.double(),
                position_embeddings=(cos.double(), sin.double()),
                attention_mask=kwargs["attention_mask"].double(),
            )
        )
    assert actual.dtype == torch.bfloat16 and actual.shape == expected.shape
    eager_error = (expected.double() - reference).abs().max().item()
    fuseopt_error = (actual.double() - reference).abs().max().item()
    assert eager_error < 0.1, eager_error  # the reference itself is sound
    assert fuseopt_error <= 2 * eager_error, (fuseopt_error, eager_error)
    messages = [r.getMessage() for r in caplog.records if r.name == "fuseopt"]
    assert not [m for m in messages if "run eagerly" in m], messages


def test_llama_gradients() -> None:
    """Backward of a Llama decoder layer (eager attention, written out) through
    fuseopt.compile: gradients match."""
    torch._dynamo.reset()
    layer, (x,), kwargs = _decoder("llama", "eager", torch.float32)
    weights = torch.linspace(-1, 1, HIDDEN)

    def grads(run: Callable[..., Any]) -> list[torch.Tensor]:
        layer.zero_grad()
        xr = x.clone().requires_grad_(True)
        (_first(run(xr, **kwargs)) * weights).sum().backward()
        return [xr.grad, *(p.grad for p in layer.parameters())]

    expected = grads(layer)
    compiled = fuseopt.compile(layer, backend="interpret")
    actual = grads(compiled)
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
    # the eager attention, written out, runs as PyTorch's SDPA (its backward keeps no
    # L x S scores); every other op of the backward is compiled
    backward = [f.target for f in compiled.fallbacks if f.graph.startswith("backward")]
    assert backward and all("scaled_dot_product" in t for t in backward), backward
    assert any(k.region.startswith("backward") for k in compiled.kernels)


def _tiny_causal_lm(family: str) -> torch.nn.Module:
    """A one-layer causal LM of `family` ("llama" or "gpt2") with seeded weights, f32."""
    if family == "gpt2":
        config = transformers.GPT2Config(
            n_embd=HIDDEN, n_head=HEADS, n_layer=1, n_positions=64, vocab_size=64
        )
        config._attn_implementation = "eager"
        return _init(transformers.GPT2LMHeadModel(config), torch.float32)
    config = transformers.LlamaConfig(
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        num_hidden_layers=1,
        vocab_size=64,
        max_position_embeddings=64,
    )
    config._attn_implementation = "eager"
    return _init(transformers.LlamaForCausalLM(config), torch.float32)


@pytest.mark.parametrize(
    ("family", "padded"), [("llama", False), ("gpt2", True)], ids=["llama", "gpt2-padded"]
)
def test_generate_runs_the_compiled_forward(family: str, padded: bool) -> None:
    """`compiled.generate(...)` of a causal LM decodes with the compiled forward
    (greedy: the same tokens as eager), through prefill and the decode steps; the growing
    KV cache (and the attention mask that grows with it) compiles two graphs whatever the
    number of tokens: the prefill and one decode graph with the cache length symbolic."""
    torch._dynamo.reset()
    model = _tiny_causal_lm(family)
    ids = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(2))
    options: dict[str, Any] = {"max_new_tokens": 10, "do_sample": False, "pad_token_id": 0}
    if padded:
        mask = torch.ones(ids.shape, dtype=torch.long)
        mask[1, :2] = 0
        options["attention_mask"] = mask
    compiled = fuseopt.compile(model, backend="interpret")
    with torch.no_grad():
        expected = model.generate(ids, **options)
        actual = compiled.generate(ids, **options)
    assert torch.equal(actual, expected), (actual, expected)
    assert len(compiled.graphs) == 2, [g.name for g in compiled.graphs]
    assert compiled.fallbacks, "the symbolic-size ops run in PyTorch, logged"
    assert all("symbolic" in f.reason for f in compiled.fallbacks), [
        (f.target, f.reason) for f in compiled.fallbacks
    ]


def test_generate_with_every_size_symbolic(caplog: pytest.LogCaptureFixture) -> None:
    """dynamic=True: a GPT-2's decode graph reads the batch and the cache length
    together; it is compiled for its first shapes, then once more as a version for
    every cache length (its mask's length that plus one), not once per token."""
    torch._dynamo.reset()
    model = _tiny_causal_lm("gpt2")
    ids = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(4))
    mask = torch.ones(ids.shape, dtype=torch.long)
    mask[0, :1] = 0
    options = {"max_new_tokens": 12, "do_sample": False, "pad_token_id": 0, "attention_mask": mask}
    compiled = fuseopt.compile(model, backend="interpret", dynamic=True)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="fuseopt"):
        expected = model.generate(ids, **options)
        actual = compiled.generate(ids, **options)
    assert torch.equal(actual, expected), (actual, expected)
    assert len(compiled.graphs) == 3, [g.name for g in compiled.graphs]
    versions = [m for m in caplog.messages if m.startswith("fuseopt: compiled a version")]
    assert len(versions) == 1 and "+ 1" in versions[0], versions  # the mask: length + 1


def test_generate_static_keeps_torch_compile_counts() -> None:
    """With dynamic=False nothing is marked: every cache length is a graph of its own,
    as under torch.compile(dynamic=False)."""
    torch._dynamo.reset()
    model = _tiny_causal_lm("llama")
    ids = torch.randint(0, 64, (1, 5), generator=torch.Generator().manual_seed(3))
    compiled = fuseopt.compile(model, backend="interpret", dynamic=False)
    with torch.no_grad():
        expected = model.generate(ids, max_new_tokens=3, do_sample=False)
        actual = compiled.generate(ids, max_new_tokens=3, do_sample=False)
    assert torch.equal(actual, expected)
    assert len(compiled.graphs) == 3, [g.name for g in compiled.graphs]
    assert not compiled.fallbacks


def test_bert_padding_mask_is_read_not_gathered() -> None:
    """BertModel with a padding mask (SDPA attention, fused by default): Hugging Face
    builds the (batch, 1, seq, seq) mask as mask[batch_idx, kv_idx] with aranges, a
    gather of every mask position in order, which canonicalization turns into a reshape;
    the attention kernel reads the broadcast mask, so no kernel gathers it (the
    embeddings' lookups are the one gathering kernel). Matches eager."""
    torch._dynamo.reset()
    model = _init(transformers.BertModel(_bert_config()), torch.float32)
    ids = torch.randint(0, 64, (BATCH, SEQ), generator=torch.Generator().manual_seed(3))
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, SEQ - 3 :] = 0
    with torch.no_grad():
        compiled = fuseopt.compile(model, backend="interpret", strict=True)
        actual = compiled(input_ids=ids, attention_mask=mask).last_hidden_state
        expected = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert_close(actual, expected)
    gathering = [k.name for k in compiled.kernels if "nn.take" in k.ops]
    assert len(gathering) == 1, gathering
