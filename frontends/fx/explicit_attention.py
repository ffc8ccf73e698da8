"""Attention written out as ops, in a graph that needs gradients, becomes PyTorch's SDPA.

In inference `nn-match-attention` finds `softmax(q @ k^T * s + mask) @ v` among the nn
ops and fuses it into one flash-attention kernel. A graph that needs gradients is
differentiated by AOTAutograd before fuseopt sees its ops, and the backward of the
written-out chain keeps the L x S probabilities of every layer for the backward pass
and computes the L x S gradients in memory (what eager does). `sdpa_from_explicit`
rewrites the chain, in Dynamo's torch-level graph before AOTAutograd traces it, into
`F.scaled_dot_product_attention`: PyTorch's fused kernels (flash, memory-efficient,
cuDNN) then run the forward and the backward without the scores in memory, and its
math kernel where none applies (the CPU).

A chain is taken, from the second matmul back, when each value it drops is used by the
chain alone (attention weights a model returns or reuses keep the ops) and Dynamo's
example values give q `[..., L, E]`, k `[..., S, E]` and v `[..., S, Ev]` of one dtype
and the same leading dims:
- `scores = q @ kT`, kT being k with its last two dims swapped (`transpose`, `mT`);
- optionally `scores * c`, `c * scores` or `scores / c` for a Python number c (the
  SDPA scale; 1 without one: SDPA's default would be 1/sqrt(E));
- optionally `+ mask` (a tensor of q's dtype, broadcast to the scores) or
  `masked_fill(drop, -inf)` with a boolean `drop` (SDPA keeps where `drop` is false),
  at least 2-D, on the scores' device, not enlarging the scores; a finite fill
  (`finfo.min`) is not taken;
- optionally casts to float32 around the softmax and back to q's dtype (SDPA computes
  in float32 and rounds once);
- softmax over the last dim; optionally dropout with p = 0 or training off;
- `probs @ v`.
Anything else (dropout that drops, a mask added before the scale, another order, a
keyword that changes an op: `alpha`, `rounding_mode`) stays as written.

One difference is SDPA's own: a query row whose every key is masked (-inf) comes out
as PyTorch's SDPA defines it (zeros in torch 2.13's CPU kernel), where eager's
written-out softmax gives NaN for that row and its gradients.
"""

from __future__ import annotations

import copy
import logging
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node

logger = logging.getLogger("fuseopt")

_FUNCTIONS: dict[Callable[..., Any], str] = {
    operator.matmul: "matmul",
    torch.matmul: "matmul",
    operator.mul: "mul",
    torch.mul: "mul",
    operator.truediv: "div",
    torch.div: "div",
    torch.true_divide: "div",
    operator.add: "add",
    torch.add: "add",
    torch.softmax: "softmax",
    F.softmax: "softmax",
    torch.transpose: "transpose",
    torch.masked_fill: "masked_fill",
    F.dropout: "dropout",
    getattr: "getattr",
}
"""The torch-level calls of the chain, by the name of the operation they spell."""

_METHODS = {
    "matmul": "matmul",
    "mul": "mul",
    "__mul__": "mul",
    "div": "div",
    "__truediv__": "div",
    "add": "add",
    "__add__": "add",
    "softmax": "softmax",
    "transpose": "transpose",
    "masked_fill": "masked_fill",
    "to": "cast",
    "type_as": "cast",
    "float": "cast",
}
"""The same operations as Tensor methods (`x.softmax(-1)`, `x.to(dtype)`)."""

_KEYWORDS: dict[str, frozenset[str]] = {
    "matmul": frozenset(),
    "mul": frozenset(),
    "div": frozenset(),  # rounding_mode would round
    "add": frozenset(),  # alpha would scale the mask
    "softmax": frozenset({"dim", "dtype", "_stacklevel"}),
    "transpose": frozenset({"dim0", "dim1"}),
    "masked_fill": frozenset({"mask", "value"}),
    "dropout": frozenset({"p", "training", "inplace"}),
    "cast": frozenset({"dtype", "non_blocking", "copy", "memory_format"}),
    "getattr": frozenset(),
}
"""The keywords each operation may be spelled with; any other keyword changes what it
computes (or names its operand), and the node is not taken."""


def _kind(node: object) -> str | None:
    """The operation `node` spells (`_FUNCTIONS`, `_METHODS`), else None; None too when
    its operand is not its first positional argument or it has a keyword `_KEYWORDS`
    does not allow (`torch.add(s, m, alpha=2)`, `F.softmax(input=s, dim=-1)`)."""
    if not isinstance(node, Node):
        return None
    kind = None
    if node.op == "call_function":
        kind = _FUNCTIONS.get(node.target)  # type: ignore[arg-type]
    elif node.op == "call_method":
        kind = _METHODS.get(node.target)  # type: ignore[arg-type]
    if kind is None or not node.args or not set(node.kwargs) <= _KEYWORDS[kind]:
        return None
    return kind


def _value(node: object) -> torch.Tensor | None:
    """Dynamo's example value of `node` when it is a tensor."""
    value = node.meta.get("example_value") if isinstance(node, Node) else None
    return value if isinstance(value, torch.Tensor) else None


def _arg(node: Node, index: int, name: str, default: object = None) -> object:
    """Argument `index` (counting `self` of a method) or keyword `name` of `node`."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _only_use(node: Node, user: Node) -> bool:
    """Is `user` the one node using `node`?"""
    return list(node.users) == [user]


def _swapped_key(node: object) -> Node | None:
    """k when `node` is k with its last two dims swapped (`k.transpose(-2, -1)` in any
    spelling of the dims, `k.mT`), used only by the scores' matmul."""
    if not isinstance(node, Node) or len(node.users) != 1:
        return None
    kind = _kind(node)
    k = node.args[0] if node.args else None
    value = _value(k)
    if value is None or value.dim() < 2:
        return None
    rank = value.dim()
    if kind == "transpose":
        dims = {_arg(node, 1, "dim0"), _arg(node, 2, "dim1")}
        if all(isinstance(d, int) for d in dims) and {d % rank for d in dims} == {
            rank - 2,
            rank - 1,
        }:
            return k  # type: ignore[return-value]
    if kind == "getattr" and len(node.args) == 2 and node.args[1] == "mT":
        return k  # type: ignore[return-value]
    return None


def _cast(node: Node, dtype: torch.dtype) -> bool:
    """Is `node` a cast (`to`, `type_as`, `float`) of its first argument to `dtype`,
    keeping its shape and device?"""
    before, after = _value(node.args[0] if node.args else None), _value(node)
    return (
        _kind(node) == "cast"
        and before is not None
        and after is not None
        and after.dtype == dtype
        and after.shape == before.shape
        and after.device == before.device
    )


def _softmax_dim_ok(node: Node, rank: int) -> bool:
    """A softmax over the last of `rank` dims, in its input's dtype or float32."""
    dim = _arg(node, 1, "dim")
    # F.softmax(input, dim, _stacklevel, dtype); torch.softmax and the method: dtype third
    dtype_at = 3 if node.target is F.softmax else 2
    dtype = _arg(node, dtype_at, "dtype")
    return isinstance(dim, int) and dim % rank == rank - 1 and dtype in (None, torch.float32)


def _fits(mask: object, scores: object, masked: Node, dtype: torch.dtype) -> bool:
    """Whether `mask` is a tensor of `dtype` SDPA takes as the mask of `scores` (which
    `masked` computes from both): at least 2-D, on the scores' device, broadcast to the
    scores' shape without enlarging it."""
    m, s, out = _value(mask), _value(scores), _value(masked)
    return (
        m is not None
        and s is not None
        and out is not None
        and m.dtype == dtype
        and m.dim() >= 2
        and m.device == s.device
        and out.shape == s.shape
    )


def _no_drop(node: Node) -> bool:
    """F.dropout that drops nothing: p = 0 or training off."""
    p, training = _arg(node, 1, "p", 0.5), _arg(node, 2, "training", True)
    inplace = _arg(node, 3, "inplace", False)
    return not inplace and isinstance(p, int | float) and (p == 0 or training is False)


def _operand(node: Node) -> Node | None:
    """`node`'s operand (its first argument: `_kind` took it) when the chain alone uses
    it, else None."""
    operand = node.args[0]
    return operand if isinstance(operand, Node) and len(operand.users) == 1 else None


@dataclass(frozen=True)
class _Chain:
    """One matched chain: SDPA's arguments (`mask_drops`: the mask is masked_fill's
    boolean one, true where a score is dropped, so SDPA gets its negation)."""

    q: Node
    k: Node
    v: Node
    mask: Node | None
    mask_drops: bool
    scale: float


def _match(out: Node) -> _Chain | None:
    """The chain ending at matmul `out` (module doc), else None."""
    if _kind(out) != "matmul" or len(out.args) != 2:
        return None
    probs, v = out.args
    node = probs
    if not isinstance(node, Node) or not _only_use(node, out):
        return None
    v_value = _value(v)
    if v_value is None or v_value.dim() < 3:
        return None
    dtype, rank = v_value.dtype, v_value.dim()
    if _kind(node) == "dropout" and (not _no_drop(node) or (node := _operand(node)) is None):
        return None
    if _kind(node) == "cast" and (not _cast(node, dtype) or (node := _operand(node)) is None):
        return None
    if _kind(node) != "softmax" or not _softmax_dim_ok(node, rank):
        return None
    if (node := _operand(node)) is None:
        return None
    if _kind(node) == "cast" and _cast(node, torch.float32) and (node := _operand(node)) is None:
        return None
    mask, drops = None, False
    if _kind(node) == "masked_fill":
        fill = _arg(node, 2, "value")
        drop = _arg(node, 1, "mask")
        if not (isinstance(fill, float) and math.isinf(fill) and fill < 0):
            return None
        if not _fits(drop, node.args[0], node, torch.bool):
            return None
        mask, drops, node = drop, True, node.args[0]
    elif _kind(node) == "add" and len(node.args) == 2:
        a, b = node.args
        for scores_side, other in ((a, b), (b, a)):
            if _kind(scores_side) in ("matmul", "mul", "div") and _fits(
                other, scores_side, node, dtype
            ):
                mask, node = other, scores_side
                break
        else:
            return None
    if not isinstance(node, Node) or len(node.users) != 1:
        return None
    scale = 1.0
    if _kind(node) in ("mul", "div") and len(node.args) == 2:
        a, b = node.args
        if _kind(node) == "mul" and isinstance(a, int | float) and not isinstance(a, bool):
            a, b = b, a
        if not isinstance(b, int | float) or isinstance(b, bool) or not isinstance(a, Node):
            return None
        if _kind(node) == "div" and b == 0:
            return None
        scale = float(b) if _kind(node) == "mul" else 1.0 / float(b)
        node = a
        if len(node.users) != 1:
            return None
    if _kind(node) != "matmul" or len(node.args) != 2:
        return None
    q, key_t = node.args
    k = _swapped_key(key_t)
    q_value, k_value = _value(q), _value(k)
    if k is None or q_value is None or k_value is None or not isinstance(q, Node):
        return None
    if not (q_value.dim() == k_value.dim() == rank):
        return None
    if {q_value.dtype, k_value.dtype} != {dtype} or not dtype.is_floating_point:
        return None
    if q_value.shape[:-2] != k_value.shape[:-2] or k_value.shape[:-2] != v_value.shape[:-2]:
        return None
    if q_value.shape[-1] != k_value.shape[-1] or k_value.shape[-2] != v_value.shape[-2]:
        return None
    return _Chain(q, k, v, mask, drops, scale)  # type: ignore[arg-type]


def _erase_unused(graph: torch.fx.Graph, node: Node) -> None:
    """Erase `node` (replaced) and, walking back through its arguments, every call of
    the chain left without a user (the ops `_match` checked are used by the chain
    alone; anything else still used stays)."""
    pending = [node]
    while pending:
        n = pending.pop()
        if n.users or n.op not in ("call_function", "call_method") or _kind(n) is None:
            continue
        args = [a for a in (*n.args, *n.kwargs.values()) if isinstance(a, Node)]
        graph.erase_node(n)
        pending.extend(args)


def sdpa_from_explicit(gm: GraphModule) -> GraphModule:
    """Dynamo's graph `gm` with each written-out attention chain (module doc) replaced
    by one `F.scaled_dot_product_attention` call: a new GraphModule over a copy of its
    graph (`gm` itself, which Dynamo may still hold, keeps its ops), or `gm` itself
    when there is none."""
    if not any(_match(n) is not None for n in gm.graph.nodes):
        return gm
    graph = copy.deepcopy(gm.graph)
    replaced = 0
    for out in list(graph.nodes):
        chain = _match(out)
        if chain is None:
            continue
        with graph.inserting_before(out):
            mask = chain.mask
            if mask is not None and chain.mask_drops:
                kept = graph.call_function(torch.logical_not, (mask,))
                kept.meta["example_value"] = mask.meta.get("example_value")
                mask = kept
            sdpa = graph.call_function(
                F.scaled_dot_product_attention,
                (chain.q, chain.k, chain.v),
                {"attn_mask": mask, "dropout_p": 0.0, "is_causal": False, "scale": chain.scale},
            )
        sdpa.meta = dict(out.meta)
        out.replace_all_uses_with(sdpa)
        _erase_unused(graph, out)
        replaced += 1
    graph.lint()
    logger.debug("fuseopt: %d written-out attention(s) run as PyTorch's SDPA", replaced)
    return GraphModule(gm, graph)


__all__ = ["sdpa_from_explicit"]
