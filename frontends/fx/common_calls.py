"""Repeated ATen calls merged before partitioning: one value computed once.

AOTAutograd traces every layer's call of a composite separately, so a value each layer
derives from the same inputs appears once per layer. Hugging Face decoders pass one
boolean causal mask to every layer's `scaled_dot_product_attention`, and PyTorch's
cuDNN and memory-efficient kernels take an additive bias, so the traced graph turns the
mask into `where(mask, 0, -inf)` once per layer. When attention runs in PyTorch
(`attention="eager"`), those layers' compiled regions sit between attention calls and
each computed its own copy: on Llama prefill (1 x 2048, four layers) three more 8 MB
bias kernels a call. `merge_repeated_calls` keeps the first of such calls and points
the others' users at it, so the value is computed once, in the region before the first
attention, and passed on.

Merged are calls of ATen ops with the same target and the same arguments (the same
nodes, equal constants) that are functional (no mutable schema), deterministic (no
random-number ops) and not allocations of uninitialized memory (`empty`); only ATen's
own ops (a custom op may draw random numbers untagged). A call whose result the graph
returns, itself or through a tuple item or a view (`returned_memory`), is never merged with
another: AOTAutograd hands each output to the caller as its own tensor, which the
caller may update in place.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable
from typing import Any

import torch
from torch.fx import GraphModule, Node

UNMERGED = frozenset(
    {
        torch.ops.aten.empty.memory_format,
        torch.ops.aten.empty_strided.default,
        torch.ops.aten.empty_like.default,
        torch.ops.aten.empty_permuted.default,
        torch.ops.aten.new_empty.default,
        torch.ops.aten.new_empty_strided.default,
    }
)
"""Functional ops whose results must stay distinct (uninitialized memory)."""


def _mergeable(node: Node) -> bool:
    """Whether `node` is a call whose result only its target and arguments decide."""
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    if target.namespace != "aten" or target in UNMERGED or target._schema.is_mutable:
        return False
    return torch.Tag.nondeterministic_seeded not in target.tags


def _key(value: Any) -> Hashable:
    """A hashable form of an argument (nodes by identity, sequences as tuples); raises
    TypeError for a value that has none."""
    if isinstance(value, Node):
        return ("node", id(value))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _key(v)) for k, v in value.items())))
    if isinstance(value, float):  # by bits: -0.0 is not 0.0, a NaN equals itself
        return ("float", value.hex())
    hash(value)
    return (type(value).__name__, value)


def returned_memory(gm: GraphModule) -> set[Node]:
    """The nodes whose results the graph returns: the outputs, and back from each
    through tuple items (`getitem`) and views (ops whose result aliases an input) to the
    call whose memory it is."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    found: set[Node] = set()
    stack = list(output.all_input_nodes)
    while stack:
        node = stack.pop()
        if node in found:
            continue
        found.add(node)
        target = node.target
        aliases = target is operator.getitem or (
            isinstance(target, torch._ops.OpOverload)
            and any(r.alias_info is not None for r in target._schema.returns)
        )
        if node.op == "call_function" and aliases and node.args:
            stack.extend(a for a in node.args[:1] if isinstance(a, Node))
    return found


def merge_repeated_calls(gm: GraphModule) -> int:
    """Merge the repeated calls of `gm` (see the module docstring) in place; returns how
    many calls were removed."""
    returned = returned_memory(gm)
    first: dict[Hashable, Node] = {}
    removed = 0
    for node in list(gm.graph.nodes):
        if not _mergeable(node):
            continue
        try:
            key = (node.target, _key(node.args), _key(node.kwargs))
        except TypeError:  # an argument with no hashable form
            continue
        kept = first.get(key)
        if kept is None:
            first[key] = node
            continue
        if node in returned or kept in returned:
            continue
        node.replace_all_uses_with(kept)
        gm.graph.erase_node(node)
        removed += 1
    if removed:
        gm.recompile()
    return removed
