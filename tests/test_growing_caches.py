"""`fuseopt.growing_caches`: which sizes of a decode step's arguments are marked dynamic
(the KV cache's token dim, the attention mask next to it) and which are not (no cache, an
empty cache, a static cache, sizes 0 and 1)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch

from fuseopt.growing_caches import mark_growing_sizes


def _marked(tensor: torch.Tensor) -> set[int]:
    strong = getattr(tensor, "_dynamo_dynamic_indices", set())
    return set(strong) | set(getattr(tensor, "_dynamo_weak_dynamic_indices", set()))


@dataclass
class _Layer:
    keys: torch.Tensor | None
    values: torch.Tensor | None
    is_compileable: bool = False


@dataclass
class _Cache:
    layers: list[_Layer] = field(default_factory=list)


def _layer(tokens: int, compileable: bool = False) -> _Layer:
    return _Layer(torch.zeros(2, 4, tokens, 8), torch.zeros(2, 4, tokens, 8), compileable)


def test_cache_token_dims_and_mask_are_marked() -> None:
    cache = _Cache([_layer(7), _layer(7)])
    mask = torch.ones(2, 8, dtype=torch.long)
    ids = torch.zeros(2, 1, dtype=torch.long)
    assert mark_growing_sizes((ids,), {"cache": cache, "attention_mask": mask})
    for layer in cache.layers:
        assert _marked(layer.keys) == {2} and _marked(layer.values) == {2}
    assert _marked(mask) == {1}
    assert _marked(ids) == set(), "the new tokens' own sizes stay Dynamo's choice"


def test_cache_as_a_positional_argument() -> None:
    cache = _Cache([_layer(3)])
    assert mark_growing_sizes((torch.zeros(1, 1), cache), {})
    assert _marked(cache.layers[0].keys) == {2}


def test_prefill_and_plain_calls_mark_nothing() -> None:
    mask = torch.ones(2, 8)
    empty = _Cache([_Layer(None, None), _Layer(torch.zeros(0), torch.zeros(0))])
    assert not mark_growing_sizes((torch.zeros(2, 8),), {"cache": empty, "attention_mask": mask})
    assert not mark_growing_sizes((torch.zeros(2, 8),), {"attention_mask": mask})
    assert _marked(mask) == set()


def test_static_caches_and_single_tokens_are_not_marked() -> None:
    static = _Cache([_layer(16, compileable=True)])
    assert not mark_growing_sizes((), {"cache": static})
    assert _marked(static.layers[0].keys) == set()
    one = _Cache([_layer(1)])
    mask = torch.ones(2, 1)
    assert not mark_growing_sizes((), {"cache": one, "attention_mask": mask})
    assert _marked(one.layers[0].keys) == set(), "Dynamo specializes a size of 1"
    assert _marked(mask) == set()


def test_transformers_caches() -> None:
    """The real classes: a DynamicCache's layers are marked, a StaticCache's are not."""
    cache_utils = pytest.importorskip("transformers.cache_utils")
    k = torch.zeros(1, 2, 5, 8)
    dynamic = cache_utils.DynamicCache()
    dynamic.update(k, k.clone(), 0)
    assert mark_growing_sizes((), {"past_key_values": dynamic})
    assert _marked(dynamic.layers[0].keys) == {2}
    assert all(layer.is_compileable for layer in _static_layers(cache_utils))


def _static_layers(cache_utils: object) -> list[object]:
    """The layers of a small StaticCache (their `is_compileable` is what keeps them
    unmarked)."""
    import transformers

    config = transformers.LlamaConfig(
        hidden_size=16, num_attention_heads=2, num_hidden_layers=1, vocab_size=8
    )
    cache = cache_utils.StaticCache(config=config, max_cache_len=8)
    return list(cache.layers)
