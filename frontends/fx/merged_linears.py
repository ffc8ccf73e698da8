"""Linear layers that read the same input run as one GEMM over their packed weights.

A transformer layer projects one normalized input several times: Llama's, Qwen2's and
Mistral's query, key and value projections, their MLP's gate and up projections,
BERT's query, key and value. Each is a library GEMM of its own: one more launch (about
25 us of host work each through PyTorch on an H200 host) and a narrower GEMM. In
graphs that need no gradient, `merge_linears` rewrites Dynamo's graph so that each such
set of `linear(x, W_i, b_i)` becomes one `linear(x, cat(W), cat(b))` whose output
columns are narrowed back to each layer's (views: consumers read them in place).

The concatenations cost no copy: in the ATen graph `pack_at_run_time` replaces each
with a `PackedParameters` call (`packed_parameters`), which moves the parameters into
one buffer at the first call. A graph where a concatenation is not so replaced still
computes the same values (one copy of the weights a call).

A group is merged only where that changes nothing the program can see:
- the layers' weights (and biases: all or none) are distinct plain parameters owning
  their storage, of one dtype, device and input width (a layer applied twice to the
  input shares its columns);
- no node between the first and the last layer mutates data in place or switches a
  mode (autocast, grad mode): the merged GEMM runs where the first layer did;
- Dynamo's example values, recomputed for every node the narrowed outputs reach, come
  out the same at the graph's outputs (a returned layer output keeps eager's strides)
  and every node still runs (a `view` that would merge the narrowed columns with their
  rows cannot): the group is left as it is otherwise.

The option `merge_linears=False` (`torch.compile(..., options={...})`) turns this off;
it is off by default under mode="reduce-overhead" and "max-autotune", where CUDA graphs
launch for free (merged on request, a graph is still replayed whole: `whole_graph`).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch.fx import GraphModule, Node
from torch.utils._pytree import tree_leaves

from fuseopt.frontends.fx.common_calls import returned_memory
from fuseopt.frontends.fx.packed_parameters import PackedParameters, packable

logger = logging.getLogger("fuseopt")
aten = torch.ops.aten

LINEAR = torch._C._nn.linear
"""The call Dynamo records for `nn.Linear` and `F.linear`."""

Signature = tuple[str, tuple[tuple[int, ...], ...]]
"""A concatenation of parameters: their dtype and shapes, in order."""

IN_PLACE_OPERATORS = frozenset(
    {
        operator.setitem,
        operator.delitem,
        operator.iadd,
        operator.isub,
        operator.imul,
        operator.itruediv,
        operator.ifloordiv,
        operator.imod,
        operator.ipow,
        operator.iand,
        operator.ior,
        operator.ixor,
        operator.ilshift,
        operator.irshift,
        operator.imatmul,
    }
)
"""Python operators that change their first operand."""

MODE_WORDS = ("autocast", "grad", "inference_mode", "set_", "enter", "exit", "mode")
"""Words in the name of a call that switches a mode (autocast regions, grad mode)."""


def _name(node: Node) -> str:
    target = node.target
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def is_barrier(node: Node) -> bool:
    """Whether `node` may change data in place or switch a mode: a linear layer must not
    be computed on its other side (conservative: by name)."""
    if node.op not in ("call_function", "call_method", "call_module"):
        return False
    if node.op == "call_module" or node.target in IN_PLACE_OPERATORS or "out" in node.kwargs:
        return True
    name = _name(node)
    in_place = name.endswith("_") and not name.endswith("__")
    return in_place or any(word in name.lower() for word in MODE_WORDS)


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


def merge_linears(gm: GraphModule, example_inputs: Sequence[Any]) -> set[Signature]:
    """Rewrite Dynamo's graph `gm` (in place): each group of linear layers reading the
    same input node that may merge (module doc) becomes one linear over `torch.cat` of
    their weights (and biases), each layer's output a `narrow` of its columns. A
    parameter joins one group at most.

    Returns the signatures of the concatenations made, for `pack_at_run_time`."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return set()
    value = dict(zip(placeholders, example_inputs, strict=True))
    groups: dict[Node, list[tuple[Node, Node, Node | None]]] = {}
    for node in gm.graph.nodes:
        parts = _linear_parts(node)
        if parts is not None:
            groups.setdefault(parts[0], []).append((node, parts[1], parts[2]))
    used: set[Node] = set()
    made: set[Signature] = set()
    for x, calls in groups.items():
        layers: dict[tuple[Node, Node | None], list[Node]] = {}  # (weight, bias) -> calls
        for node, w, b in calls:
            if w not in used and b not in used:
                layers.setdefault((w, b), []).append(node)
        params = [(value[w], value[b] if b is not None else None) for w, b in layers]
        if len(layers) < 2 or not _mergeable(params):
            continue
        nodes = [n for ns in layers.values() for n in ns]
        order = {n: i for i, n in enumerate(gm.graph.nodes)}  # rewrites insert nodes
        first, last = min(nodes, key=order.__getitem__), max(nodes, key=order.__getitem__)
        between = [n for n in gm.graph.nodes if order[first] < order[n] < order[last]]
        barriers = [n for n in between if is_barrier(n) and n not in nodes]
        if barriers:
            _left_separate(nodes, f"{barriers[0].name} runs between them")
            continue
        widths = [int(value[w].shape[0]) for w, _ in layers]
        values = _narrowed_values(gm, x, layers, value, widths)
        if isinstance(values, str):
            _left_separate(nodes, values)
            continue
        _rewrite(gm, x, layers, widths, first, placeholders[-1], values)
        weights = [value[w] for w, _ in layers]
        made.add((str(weights[0].dtype), tuple(tuple(w.shape) for w in weights)))
        if next(iter(layers))[1] is not None:
            biases = [value[b] for _, b in layers]
            made.add((str(biases[0].dtype), tuple(tuple(b.shape) for b in biases)))
        used.update(p for key in layers for p in key if p is not None)
    if made:
        gm.graph.lint()
        gm.recompile()
    return made


def _left_separate(nodes: list[Node], reason: str) -> None:
    """Log (debug) why the linear layers `nodes` of one input stay separate GEMMs."""
    logger.debug("fuseopt: linear layers %s not merged: %s", [n.name for n in nodes], reason)


def _mergeable(layers: list[tuple[object, object]]) -> bool:
    """Whether (weight, bias) parameters of distinct layers can be packed: 2-D weights of
    one input width, biases for all or none, one dtype and device throughout, each a
    parameter owning its storage or all packed already (`packable`)."""
    weights = [w for w, _ in layers]
    biases = [b for _, b in layers]
    tensors = [*weights, *(b for b in biases if b is not None)]
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        return False
    if len({id(t) for t in tensors}) < len(tensors):  # one parameter in two layers
        return False
    if any(b is None for b in biases) and not all(b is None for b in biases):
        return False
    if not packable(weights) or (biases[0] is not None and not packable(biases)):
        return False
    if any(w.dim() != 2 for w in weights) or len({w.shape[1] for w in weights}) != 1:  # type: ignore[union-attr]
        return False
    if any(b.dim() != 1 for b in biases if b is not None):  # type: ignore[union-attr]
        return False
    return len({(t.dtype, t.device) for t in tensors}) == 1  # type: ignore[union-attr]


def _narrowed_values(
    gm: GraphModule,
    x: Node,
    layers: dict[tuple[Node, Node | None], list[Node]],
    value: dict[Node, Any],
    widths: list[int],
) -> dict[Node, Any] | str:
    """Dynamo's example values (fake tensors) as they would be after the rewrite: the
    concatenations' ("weight", "bias"), the merged linear's ("merged"), its narrowed
    columns per layer call, and every node they reach whose value changes; why not
    (a string) when a node would fail or a graph output would come out with other
    strides than before."""
    fakes = [x.meta.get("example_value")] + [
        p.meta.get("example_value") for key in layers for p in key if p is not None
    ]
    modes = {getattr(v, "fake_mode", None) for v in fakes}
    if len(modes) != 1 or None in modes:
        return "no example values of one fake mode"
    mode = modes.pop()
    env: dict[Any, Any] = {}
    try:
        with mode:
            weight = env["weight"] = torch.cat([w.meta["example_value"] for w, _ in layers])
            biases = [b.meta["example_value"] for _, b in layers if b is not None]
            bias = env["bias"] = torch.cat(biases) if biases else None
            merged = env["merged"] = LINEAR(x.meta["example_value"], weight, bias)
            start = 0
            for calls, width in zip(layers.values(), widths, strict=True):
                for call in calls:
                    env[call] = merged.narrow(-1, start, width)
                    if env[call].dtype != call.meta["example_value"].dtype:
                        return "an autocast region inside the graph"
                start += width
            return _propagate(gm, env)
    except Exception as e:  # a node that cannot take the narrowed columns: not merged
        return f"the dry run failed: {type(e).__name__}: {e}"


def _propagate(gm: GraphModule, env: dict[Any, Any]) -> dict[Any, Any] | str:
    """`env` (new example values of some nodes) extended, in graph order, by every node
    reading one whose value differs from its own old example value; why not (a string)
    when a graph output's layout changes. Raises what a node raises."""
    for node in gm.graph.nodes:
        if node in env or not any(a in env for a in node.all_input_nodes):
            continue
        if node.op == "output":
            for out in tree_leaves(node.args[0]):
                if isinstance(out, Node) and out in env and not _same_layout(out, env[out]):
                    old = out.meta.get("example_value")
                    return f"output {out.name} would change: {_layout(old)} -> {_layout(env[out])}"
            continue
        if node.op not in ("call_function", "call_method"):
            return f"{node.name} ({node.op}) reads the columns"
        args, kwargs = torch.fx.node.map_arg(
            (node.args, node.kwargs), lambda a: env[a] if a in env else a.meta["example_value"]
        )
        if node.op == "call_method":
            result = getattr(args[0], node.target)(*args[1:], **kwargs)  # type: ignore[arg-type]
        else:
            result = node.target(*args, **kwargs)  # type: ignore[operator]
        if not _same_layout(node, result):
            env[node] = result
    return env


def _layout(value: object) -> str:
    """A tensor's shape, strides, offset and dtype as text (anything else: its type)."""
    if isinstance(value, torch.Tensor):
        shape, strides = tuple(value.shape), value.stride()
        return f"{shape} strides {strides} offset {value.storage_offset()} {value.dtype}"
    return type(value).__name__


def _same_layout(node: Node, new: object) -> bool:
    """Whether `new` is laid out as `node`'s old example value (both tensors: shape,
    strides, offset, dtype; anything else: equal)."""
    old = node.meta.get("example_value")
    if isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor):
        return (
            old.shape == new.shape
            and old.dtype == new.dtype
            and old.stride() == new.stride()
            and old.storage_offset() == new.storage_offset()
        )
    if isinstance(old, torch.Tensor) or isinstance(new, torch.Tensor):
        return False
    if isinstance(old, list | tuple) and any(isinstance(v, torch.Tensor) for v in old):
        return False  # tuples of tensors: assume changed (their items are fresh)
    try:
        return type(old) is type(new) and bool(old == new)
    except Exception:  # not comparable: assume changed
        return False


def _rewrite(
    gm: GraphModule,
    x: Node,
    layers: dict[tuple[Node, Node | None], list[Node]],
    widths: list[int],
    first: Node,
    last_placeholder: Node,
    values: dict[Any, Any],
) -> None:
    """One group's rewrite (see `merge_linears`), with the example values `values`."""
    graph = gm.graph
    with graph.inserting_after(last_placeholder):
        weight = graph.call_function(torch.cat, ([w for w, _ in layers], 0))
        bias = None
        if next(iter(layers))[1] is not None:
            with graph.inserting_after(weight):
                bias = graph.call_function(torch.cat, ([b for _, b in layers], 0))
    with graph.inserting_before(first):
        merged = graph.call_function(LINEAR, (x, weight, bias))
        merged.meta["example_value"] = values["merged"]
        start = 0
        for calls, width in zip(layers.values(), widths, strict=True):
            piece = graph.call_function(torch.narrow, (merged, -1, start, width))
            start += width
            piece.meta.update({k: v for k, v in calls[0].meta.items() if k != "example_value"})
            piece.meta["example_value"] = values[calls[0]]
            for call in calls:
                call.replace_all_uses_with(piece)
    for calls in layers.values():
        for call in calls:
            graph.erase_node(call)
    weight.meta["example_value"] = values["weight"]
    if bias is not None:
        bias.meta["example_value"] = values["bias"]
    for node, new in values.items():
        if isinstance(node, Node) and node.graph is graph:
            node.meta["example_value"] = new


def pack_at_run_time(aten_gm: GraphModule, signatures: set[Signature], name: str) -> int:
    """Replace, in ATen graph `aten_gm`, each `aten.cat` over placeholders along dim 0
    with the dtype and shapes of a `merge_linears` concatenation (`signatures`) with a
    `PackedParameters` call, unless its value is returned, itself or as a view (the
    caller would get a tensor sharing the parameters' memory); returns how many."""
    replaced = 0
    returned = returned_memory(aten_gm)
    for node in list(aten_gm.graph.nodes):
        if node.op != "call_function" or node.target is not aten.cat.default:
            continue
        tensors = node.args[0]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        if dim != 0 or not isinstance(tensors, list | tuple) or len(tensors) < 2:
            continue
        if not all(isinstance(t, Node) and t.op == "placeholder" for t in tensors):
            continue
        vals = [t.meta.get("val") for t in tensors]
        if not all(isinstance(v, torch.Tensor) for v in vals):
            continue
        try:
            shapes = tuple(tuple(int(n) for n in v.shape) for v in vals)
        except TypeError:  # a symbolic size: not a parameter
            continue
        if (str(vals[0].dtype), shapes) not in signatures or node in returned:
            continue
        node.target = PackedParameters(f"{name}:{node.name}")
        node.args, node.kwargs = tuple(tensors), {}
        replaced += 1
    if replaced:
        aten_gm.recompile()
    return replaced
