"""Sizes that grow every call: a decoder's KV cache, marked dynamic before Dynamo sees it.

Hugging Face `generate` calls the model once for the prompt (the prefill) and once per
new token, with a cache object holding every earlier token's keys and values and,
when the caller passes one, an `attention_mask` covering the cache and the new tokens.
Under Dynamo's automatic dynamic shapes the first decode step traces the cache length
as a constant and the second one traces it again, symbolic: three graphs for a
generation. Marking the growing sizes dynamic from the first decode step on makes it
two, the prefill and one decode graph for every cache length, as a user running
`generate` expects.

The cache is recognized by what it holds, not by a class name: an object with
`layers` whose entries carry `keys` and `values` tensors (transformers' `Cache`), and
that do not say they are compileable (a static cache is preallocated at its largest
size and does not grow). A size below 2 is never marked (Dynamo specializes 0 and 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

SEQUENCE_DIM = -2
"""The token dim of a cache's keys and values ([batch, heads, tokens, head dim])."""

MASK_ARGUMENTS = ("attention_mask",)
"""Keyword arguments that span the cache and the new tokens along their last dim."""


def mark_growing_sizes(args: Iterable[Any], kwargs: Mapping[str, Any]) -> bool:
    """Mark the token dims of the growing KV caches among `args` and `kwargs` dynamic,
    and the last dim of a 2-D `attention_mask` next to such a cache.

    Returns whether a cache dim was marked (a decode step past a one-token cache): the
    caller marks the calls until one such call has been traced, after which Dynamo's
    symbolic entry serves every later length without marks.
    """
    tensors = [t for value in (*args, *kwargs.values()) for t in _growing_tensors(value)]
    marked = [_mark(tensor, tensor.dim() + SEQUENCE_DIM) for tensor in tensors]
    if not any(marked):
        return False
    for name in MASK_ARGUMENTS:
        mask = kwargs.get(name)
        if isinstance(mask, torch.Tensor) and mask.dim() == 2:
            _mark(mask, 1)
    return True


def _growing_tensors(value: Any) -> list[torch.Tensor]:
    """The keys and values of `value`'s growing cache layers holding tokens ([] when
    `value` is no cache)."""
    layers = getattr(value, "layers", None)
    if isinstance(value, torch.Tensor) or not isinstance(layers, (list, tuple)):
        return []
    found = []
    for layer in layers:
        if getattr(layer, "is_compileable", False):
            continue
        for name in ("keys", "values"):
            tensor = getattr(layer, name, None)
            if isinstance(tensor, torch.Tensor) and tensor.dim() >= 3 and tensor.numel():
                found.append(tensor)
    return found


def _mark(tensor: torch.Tensor, dim: int) -> bool:
    """Mark `dim` of `tensor` dynamic when Dynamo would not specialize it (size >= 2);
    returns whether it did. A hint (`maybe_mark_dynamic`): where tracing ties the size
    to a constant, Dynamo specializes it instead of raising a constraint violation."""
    if tensor.shape[dim] < 2:
        return False
    torch._dynamo.maybe_mark_dynamic(tensor, dim)
    return True
