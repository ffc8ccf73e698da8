"""Hugging Face models from configs, with random weights, and the modules each scenario runs.

No download: a config names the architecture and sizes, the model is built from it on
the device and its weights are drawn from a seed (Hugging Face's own initialization,
then every 1-D parameter perturbed, so norm scales and biases are not all ones or
zeros). Three scenarios wrap a model into an `nn.Module` of tensors in, tensors out,
so every system (eager, torch.compile, fuseopt) compiles the same thing:

- `Prefill`: a forward over a whole prompt; logits (decoders) or the last hidden
  state (BERT, with a padding attention mask);
- `DecodeStep`: one new token per sequence after a KV cache of `context` tokens. The
  cache arrives as tensors (keys and values per layer) and is rebuilt as a
  `DynamicCache` in every call, so a call is pure and can be repeated for timing;
- `TrainStep`: forward with labels, backward, AdamW step; returns the loss and every
  gradient (the values checked). It keeps a copy of its initial weights so that each
  system starts from the same ones (`reset`).

`transformers` is imported only here and lazily by `benchmarks.models`: without it the
suite skips.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from benchmarks.workloads import Dims, element_size, generator

ONE_D_SCALE = 0.1
"""1-D parameters (norm scales, biases) become ``init + ONE_D_SCALE * N(0, 1)``."""

ADAMW_LR = 1e-4
"""The training step's AdamW learning rate."""


@dataclass(frozen=True)
class Architecture:
    """How to build one model family from the suite's dims.

    `config` maps dims (``hidden``, ``layers``, ``heads``, ``kv_heads``,
    ``intermediate``, ``vocab``) to a transformers config; `inference_class` and
    `training_class` name the model classes (a training class computes a loss from
    ``labels``); `decoder` says whether it has a KV cache (a decode scenario).
    """

    config_class: str
    inference_class: str
    training_class: str
    decoder: bool
    config: Any

    def make_config(self, dims: Dims) -> Any:
        """The transformers config for `dims` (dropout off: steps must be deterministic)."""
        import transformers

        config = getattr(transformers, self.config_class)(**self.config(dims))
        config._attn_implementation = "sdpa"
        return config


def _decoder_config(dims: Dims) -> dict[str, Any]:
    return {
        "hidden_size": dims["hidden"],
        "intermediate_size": dims["intermediate"],
        "num_attention_heads": dims["heads"],
        "num_key_value_heads": dims["kv_heads"],
        "num_hidden_layers": dims["layers"],
        "vocab_size": dims["vocab"],
        "max_position_embeddings": 4096,
        "attention_dropout": 0.0,
        "tie_word_embeddings": False,
    }


def _gpt2_config(dims: Dims) -> dict[str, Any]:
    return {
        "n_embd": dims["hidden"],
        "n_head": dims["heads"],
        "n_layer": dims["layers"],
        "n_inner": dims["intermediate"],
        "n_positions": 4096,
        "vocab_size": dims["vocab"],
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "bos_token_id": 0,
        "eos_token_id": 0,
    }


def _bert_config(dims: Dims) -> dict[str, Any]:
    return {
        "hidden_size": dims["hidden"],
        "intermediate_size": dims["intermediate"],
        "num_attention_heads": dims["heads"],
        "num_hidden_layers": dims["layers"],
        "vocab_size": dims["vocab"],
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    }


ARCHITECTURES: dict[str, Architecture] = {
    "llama": Architecture(
        "LlamaConfig", "LlamaForCausalLM", "LlamaForCausalLM", True, _decoder_config
    ),
    "qwen2": Architecture(
        "Qwen2Config", "Qwen2ForCausalLM", "Qwen2ForCausalLM", True, _decoder_config
    ),
    "mistral": Architecture(
        "MistralConfig", "MistralForCausalLM", "MistralForCausalLM", True, _decoder_config
    ),
    "gpt2": Architecture("GPT2Config", "GPT2LMHeadModel", "GPT2LMHeadModel", True, _gpt2_config),
    "bert": Architecture("BertConfig", "BertModel", "BertForMaskedLM", False, _bert_config),
}
"""The model families of the suite, by name."""


def build_model(
    family: str, dims: Dims, training: bool, dtype: torch.dtype, device: torch.device, seed: int
) -> nn.Module:
    """A randomly initialized model of `family` at `dims` on `device`, in `dtype`."""
    import transformers

    arch = ARCHITECTURES[family]
    cls = getattr(transformers, arch.training_class if training else arch.inference_class)
    torch.manual_seed(seed)
    with torch.device(device):
        model = cls(arch.make_config(dims))
    gen = generator(device, seed + 1)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 1:
                noise = torch.randn(param.shape, generator=gen, device=device)
                param.add_(ONE_D_SCALE * noise.to(param.dtype))
    return model.to(dtype).train(training)


@functools.lru_cache(maxsize=64)
def weight_counts(family: str, dims_items: tuple[tuple[str, int], ...], training: bool) -> dict:
    """Parameter counts of a model (built on the meta device: no memory, no time).

    ``params`` counts every parameter once; ``matmul_params`` those a token's forward
    multiplies by (all but the input embedding, whose rows are only looked up; a tied
    output head counts: it is a GEMM).
    """
    import transformers

    arch = ARCHITECTURES[family]
    cls = getattr(transformers, arch.training_class if training else arch.inference_class)
    with torch.device("meta"):
        model = cls(arch.make_config(dict(dims_items)))
    params = sum(p.numel() for p in model.parameters())
    embedding = model.get_input_embeddings().weight
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    tied = head is not None and head.weight is embedding
    matmul = params - (0 if tied else embedding.numel())
    return {"params": params, "matmul_params": matmul}


def _first(output: Any) -> torch.Tensor:
    """Logits or the last hidden state: the first field of a model output."""
    return output[0]


class Prefill(nn.Module):
    """A forward over whole prompts: ``(input_ids[, attention_mask]) -> logits``."""

    def __init__(self, model: nn.Module, decoder: bool):
        super().__init__()
        self.model = model
        self.decoder = decoder

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits (decoders, no cache kept) or the last hidden state (encoders)."""
        if self.decoder:
            return _first(self.model(input_ids=input_ids, use_cache=False))
        return _first(self.model(input_ids=input_ids, attention_mask=attention_mask))


class DecodeStep(nn.Module):
    """One decode step: ``(input_ids [batch, 1], k0, v0, k1, v1, ...) -> logits``.

    Keys and values are ``[batch, kv_heads, context, head_dim]`` per layer; a fresh
    `DynamicCache` is filled from them in every call (through ``update``, the cache
    API stable across transformers versions), so calls do not grow the cache.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, *keys_values: torch.Tensor) -> torch.Tensor:
        """The logits of the new token after the cached context."""
        from transformers import DynamicCache

        cache = DynamicCache()
        for layer in range(len(keys_values) // 2):
            cache.update(keys_values[2 * layer], keys_values[2 * layer + 1], layer)
        return _first(self.model(input_ids=input_ids, past_key_values=cache, use_cache=True))


class LossOf(nn.Module):
    """``(input_ids, labels[, attention_mask]) -> loss`` of a model with a loss head."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The model's own loss (causal LM or masked LM cross-entropy)."""
        kwargs = {} if attention_mask is None else {"attention_mask": attention_mask}
        return self.model(input_ids=input_ids, labels=labels, **kwargs).loss


class TrainStep(nn.Module):
    """A training step: loss, backward, AdamW step; returns ``(loss, *gradients)``.

    A system compiles `loss` (forward and, through autograd, backward); the step around
    it is the same for every system (`step_with`). The optimizer is made on the first
    step, so a copy converted to another dtype (the float32 reference) gets its own.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.loss = LossOf(model)
        self._initial = [p.detach().clone() for p in self.parameters()]
        self._optimizer: torch.optim.Optimizer | None = None

    def step_with(self, loss_fn: Any, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """One step with `loss_fn` (this module's `loss`, or a compiled version of it)."""
        params = [p for p in self.parameters() if p.requires_grad]
        if self._optimizer is None:
            self._optimizer = torch.optim.AdamW(params, lr=ADAMW_LR)
        with torch.enable_grad():
            loss = loss_fn(*inputs)
            loss.backward()
        grads = tuple(p.grad for p in params if p.grad is not None)
        self._optimizer.step()
        self._optimizer.zero_grad(set_to_none=True)
        return (loss.detach(), *grads)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """One eager training step."""
        return self.step_with(self.loss, *inputs)

    def reset(self) -> None:
        """Back to the initial weights and a fresh optimizer (before each system)."""
        with torch.no_grad():
            for param, initial in zip(self.parameters(), self._initial, strict=True):
                param.copy_(initial)
                param.grad = None
        self._optimizer = None


def tokens(vocab: int, shape: tuple[int, ...], device: torch.device, seed: int) -> torch.Tensor:
    """Random token ids of `shape` in ``[0, vocab)``."""
    return torch.randint(0, vocab, shape, generator=generator(device, seed), device=device)


def padding_mask(batch: int, seq: int, device: torch.device, seed: int) -> torch.Tensor:
    """An attention mask ``[batch, seq]`` of ones then zeros: sequence lengths drawn in
    ``[seq / 2, seq]``, the first sequence full (a batch of padded prompts)."""
    gen = generator(device, seed)
    lengths = torch.randint(seq // 2, seq + 1, (batch,), generator=gen, device=device)
    lengths[0] = seq
    return (torch.arange(seq, device=device)[None, :] < lengths[:, None]).to(torch.int64)


def kv_cache(
    dims: Dims, dtype: torch.dtype, device: torch.device, seed: int
) -> tuple[torch.Tensor, ...]:
    """Random keys and values of every layer, ``[batch, kv_heads, context, head_dim]``."""
    gen = generator(device, seed)
    head_dim = dims["hidden"] // dims["heads"]
    shape = (dims["batch"], dims["kv_heads"], dims["context"], head_dim)
    return tuple(
        torch.randn(shape, generator=gen, device=device).to(dtype)
        for _ in range(2 * dims["layers"])
    )


def cache_bytes(dims: Dims, dtype: torch.dtype) -> int:
    """Bytes of the KV cache `kv_cache` draws."""
    head_dim = dims["hidden"] // dims["heads"]
    per_layer = 2 * dims["batch"] * dims["kv_heads"] * dims["context"] * head_dim
    return dims["layers"] * per_layer * element_size(dtype)
