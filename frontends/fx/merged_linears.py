"""Linear layers that read the same input run as one GEMM over their packed weights.

A transformer layer projects one normalized input several times: Llama's, Qwen2's and
Mistral's query, key and value projections, their MLP's gate and up projections,
BERT's query, key and value. Each is a library GEMM of its own: one more launch (about
25 us of host work each through PyTorch on an H200 host) and a narrower GEMM that
fills the GPU less well. In graphs that need no gradient, `merge_linears` rewrites
Dynamo's graph so that each such set of `linear(x, W_i, b_i)` becomes one
`linear(x, cat(W), cat(b))` whose output columns are narrowed back to each layer's
(views: the consumers read them in place).

Concatenating the weights on every call would copy them; instead, at the first call
`PackedParameters` moves the parameters themselves into one buffer (`param.data`
becomes a slice of it, so no memory is added and in-place updates of the parameters,
`load_state_dict` and optimizer steps, reach the buffer), and later calls return that
buffer after comparing the parameters' addresses with the ones it packed. A parameter
replaced since (a new tensor assigned, the model moved with `.to()`) is packed again;
weights that cannot be moved (not a plain `nn.Parameter` owning its storage: a view
into another parameter, a tensor subclass) keep their own GEMMs at compile time, and
at run time are concatenated for that call (correct, logged once).

Packing is a frontend step because it needs the parameters: the nn function of a
region only sees arguments. Dynamo's graph is rewritten (`merge_linears`) with
`torch.cat` of the weights as the packed operand, so AOTAutograd traces the narrowed
views as they will run; in the ATen graph, `pack_at_run_time` then replaces each of
those concatenations with its `PackedParameters`. A graph where the concatenation
is not so replaced still computes the same values (one copy of the weights a call).

The option `merge_linears=False` (`torch.compile(..., options={...})`) turns this off;
models then keep their parameters where they are.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch
from torch.fx import GraphModule, Node

logger = logging.getLogger("fuseopt")
aten = torch.ops.aten

LINEAR = torch._C._nn.linear
"""The call Dynamo records for `nn.Linear` and `F.linear`."""


def owns_storage(t: torch.Tensor) -> bool:
    """Whether `t` is a plain, contiguous `nn.Parameter` that is the whole of its
    storage: moving it into a packed buffer (`t.data = slice`) changes no other tensor."""
    return (
        type(t) is torch.nn.Parameter
        and t.device.type != "meta"
        and t.is_contiguous()
        and t.storage_offset() == 0
        and t.untyped_storage().nbytes() == t.numel() * t.element_size()
    )


def packed_view(ts: Sequence[torch.Tensor]) -> torch.Tensor | None:
    """The tensor `cat(ts)` already is, when `ts` are contiguous, consecutive slices of
    one storage in this order (packed before, by this graph or another compiled graph
    over the same parameters); else None."""
    first = ts[0]
    storage = first.untyped_storage().data_ptr()
    offset = first.storage_offset()
    for t in ts:
        if (
            not t.is_contiguous()
            or t.dtype != first.dtype
            or t.shape[1:] != first.shape[1:]
            or t.untyped_storage().data_ptr() != storage
            or t.storage_offset() != offset
        ):
            return None
        offset += t.numel()
    rows = sum(t.shape[0] for t in ts)
    shape = (rows, *first.shape[1:])
    return first.as_strided(shape, torch.empty(shape, device="meta").stride())


def packable(ts: Sequence[object], buffer: torch.Tensor | None = None) -> bool:
    """Whether parameters `ts` (distinct, one dtype and device) can be packed: each owns
    its storage or is a slice of `buffer` (a packed buffer of their own, packed again
    when one of them was replaced), or together they already are one packed buffer."""
    if not all(isinstance(t, torch.Tensor) for t in ts) or len({id(t) for t in ts}) < len(ts):
        return False
    tensors: list[torch.Tensor] = list(ts)  # type: ignore[arg-type]
    if len({(t.dtype, t.device) for t in tensors}) != 1:
        return False
    own = buffer.untyped_storage().data_ptr() if buffer is not None else None

    def movable(t: torch.Tensor) -> bool:
        mine = type(t) is torch.nn.Parameter and t.untyped_storage().data_ptr() == own
        return owns_storage(t) or mine

    return all(movable(t) for t in tensors) or (
        all(type(t) is torch.nn.Parameter for t in tensors) and packed_view(tensors) is not None
    )


class PackedParameters:
    """At run time, `cat(parameters)` without copying: the parameters are moved into one
    buffer at the first call and the buffer is returned while they stay in it.

    Called with the parameters (one graph node's arguments). `pointers` are their
    addresses when packed; as long as `packed` is alive no other tensor can have those
    addresses, so equal addresses (the graph's guards fix the shapes) mean the
    parameters still are the buffer's slices."""

    host_step = True
    """Not work to report when the partitioner runs it in PyTorch (it launches nothing)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.__name__ = self.__qualname__ = "packed_parameters"  # FX names call targets
        self.packed: torch.Tensor | None = None
        self.pointers: tuple[int, ...] = ()
        self.copied = False

    def __call__(self, *ts: torch.Tensor) -> torch.Tensor:
        """The packed buffer of `ts`: `cat(ts)` in value."""
        if self.packed is not None and tuple(t.data_ptr() for t in ts) == self.pointers:
            return self.packed
        return self.pack(ts)

    def pack(self, ts: Sequence[torch.Tensor]) -> torch.Tensor:
        """Move `ts` into one buffer (or find them already in one) and remember it; a
        concatenated copy for this call when they cannot be moved."""
        can_pack = packable(ts, self.packed)
        packed = packed_view(ts) if can_pack else None
        if packed is None and can_pack:
            with torch.inference_mode(False), torch.no_grad():
                packed = torch.cat([t.detach() for t in ts])
                for t, piece in zip(ts, packed.split([t.shape[0] for t in ts]), strict=True):
                    t.data = piece
        if packed is None:
            if not self.copied:
                self.copied = True
                logger.info(
                    "fuseopt: %s: the weights of linear layers merged into one GEMM cannot "
                    "be packed (not parameters owning their storage): concatenated each call",
                    self.name,
                )
            return torch.cat(list(ts))
        self.packed, self.pointers = packed, tuple(t.data_ptr() for t in ts)
        logger.debug("fuseopt: %s: packed %d parameters into one buffer", self.name, len(ts))
        return packed

    def __repr__(self) -> str:
        return f"PackedParameters({self.name!r})"


def _linear_parts(node: Node) -> tuple[Node, Node, Node | None] | None:
    """(input, weight, bias) of a `linear` call whose weight and bias are graph inputs."""
    if node.op != "call_function" or node.target is not LINEAR:
        return None
    x = node.args[0] if node.args else node.kwargs.get("input")
    w = node.args[1] if len(node.args) > 1 else node.kwargs.get("weight")
    b = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
    if not isinstance(x, Node) or not isinstance(w, Node) or w.op != "placeholder":
        return None
    if b is not None and (not isinstance(b, Node) or b.op != "placeholder"):
        return None
    return x, w, b


def merge_linears(gm: GraphModule, example_inputs: Sequence[Any]) -> list[tuple[int, ...]]:
    """Rewrite Dynamo's graph `gm` (in place): linear layers reading the same input node,
    with weights (and biases: all or none) that are packable parameters of one dtype,
    device and input width, become one linear over `torch.cat` of their weights, each
    layer's output a `narrow` of its columns. A parameter joins one group at most.

    Returns the concatenations' arguments as placeholder positions (weights, then
    biases: one tuple per concatenation) for `pack_at_run_time`."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return []
    position = {n: i for i, n in enumerate(placeholders)}
    value = {n: example_inputs[i] for n, i in position.items()}
    groups: dict[Node, list[tuple[Node, Node, Node | None]]] = {}
    for node in gm.graph.nodes:
        parts = _linear_parts(node)
        if parts is not None:
            groups.setdefault(parts[0], []).append((node, parts[1], parts[2]))
    used: set[Node] = set()
    packs: list[tuple[int, ...]] = []
    last_placeholder = placeholders[-1] if placeholders else None
    for x, members in groups.items():
        members = [m for m in members if m[1] not in used and (m[2] is None or m[2] not in used)]
        weights = [value[w] for _, w, _ in members]
        biases = [m[2] for m in members]
        if len(members) < 2 or any(
            not isinstance(w, torch.Tensor) or w.dim() != 2 for w in weights
        ):
            continue
        if len({w.shape[1] for w in weights}) != 1 or not packable(weights):
            continue
        if any(b is None for b in biases) != all(b is None for b in biases):
            continue  # some with a bias, some without
        if biases[0] is not None and not packable([value[b] for b in biases]):  # type: ignore[index]
            continue
        if biases[0] is not None and value[biases[0]].dtype != weights[0].dtype:  # type: ignore[index]
            continue
        widths = [int(w.shape[0]) for w in weights]
        packs.append(_rewrite(gm, x, members, widths, last_placeholder, position))
        if biases[0] is not None:
            packs.append(tuple(position[b] for b in biases))  # type: ignore[index]
        used.update(w for _, w, _ in members)
        used.update(b for _, _, b in members if b is not None)
    if packs:
        gm.graph.lint()
        gm.recompile()
    return packs


def _rewrite(
    gm: GraphModule,
    x: Node,
    members: list[tuple[Node, Node, Node | None]],
    widths: list[int],
    last_placeholder: Node | None,
    position: dict[Node, int],
) -> tuple[int, ...]:
    """One group's rewrite (see `merge_linears`); returns its weights' positions. The new
    nodes get Dynamo's example values (fake tensors), computed as they will run."""
    graph = gm.graph
    with graph.inserting_after(last_placeholder):
        weight = graph.call_function(torch.cat, ([w for _, w, _ in members], 0))
        bias = None
        if members[0][2] is not None:
            with graph.inserting_after(weight):
                bias = graph.call_function(torch.cat, ([b for _, _, b in members], 0))
    first = members[0][0]
    with graph.inserting_before(first):
        merged = graph.call_function(LINEAR, (x, weight, bias))
        start = 0
        for (node, _, _), width in zip(members, widths, strict=True):
            piece = graph.call_function(torch.narrow, (merged, -1, start, width))
            start += width
            piece.meta.update({k: v for k, v in node.meta.items() if k != "example_value"})
            node.replace_all_uses_with(piece)
    for node, _, _ in members:
        graph.erase_node(node)
    _example_values([weight, *([bias] if bias is not None else []), merged, *merged.users])
    return tuple(position[w] for _, w, _ in members)


def _example_values(nodes: Sequence[Node]) -> None:
    """Set Dynamo's `example_value` of new `nodes` (in order, each reading earlier ones
    or old nodes) from their arguments' fake tensors; stops at a node with an argument
    that has none."""
    known = [a.meta.get("example_value") for n in nodes for a in n.all_input_nodes]
    modes = {getattr(v, "fake_mode", None) for v in known if v is not None}
    if len(modes) != 1 or None in modes:
        return
    mode = modes.pop()
    with mode:
        for node in nodes:
            if any(a.meta.get("example_value") is None for a in node.all_input_nodes):
                return
            args = torch.fx.node.map_arg(node.args, lambda a: a.meta["example_value"])
            node.meta["example_value"] = node.target(*args)


def pack_at_run_time(aten_gm: GraphModule, packs: Sequence[tuple[int, ...]], name: str) -> int:
    """Replace, in ATen graph `aten_gm`, each `aten.cat` over the placeholders at the
    positions of a `merge_linears` pack (dim 0) with a `PackedParameters` call; returns
    how many were replaced."""
    placeholders = [n for n in aten_gm.graph.nodes if n.op == "placeholder"]
    wanted = {tuple(placeholders[i] for i in p) for p in packs if max(p) < len(placeholders)}
    replaced = 0
    for node in list(aten_gm.graph.nodes):
        if node.op != "call_function" or node.target is not aten.cat.default:
            continue
        tensors = node.args[0]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        if dim != 0 or not isinstance(tensors, list | tuple) or tuple(tensors) not in wanted:
            continue
        node.target = PackedParameters(f"{name}:{node.name}")
        node.args, node.kwargs = tuple(tensors), {}
        replaced += 1
    if replaced:
        aten_gm.recompile()
    return replaced
