"""ATen graphs traced with one symbolic size, compiled once for every size.

Dynamo traces a graph with a symbolic size `s` when a size changes between calls (a
batch, a sequence length; `dynamic=True`; `torch._dynamo.mark_dynamic`). When every
symbolic size of a graph is one symbol, the graph is compiled once for every `s`:

1. `concretize` copies the graph with `s` fixed at a number (every size computation and
   example value evaluated there), so the op table and the importer see a static graph;
   a node is supported when it is supported at the first size hint and every size it
   reads or makes is a constant or `k * (s + c)`, one offset `c` for all
   (`classify_sizes`). A decode step's tensors past its cache's `cat` are `s + 1` long,
   the cache `s`: the `cat` itself, which reads both, runs in PyTorch, as does
   attention over a symbolic query length, whose schedule depends on it (attention over
   a symbolic key length compiles);
2. each region becomes a `SizedFunction` (`sized_region`) of the size `n = s + c` of its
   nodes (a region's nodes share one offset: the partitioner splits them): the region
   imported at any `n`. Its inputs and outputs carry `n` itself in each dynamic dim: an
   edge of size `k * n` (a batch flattened with its tokens) is passed split as `[n, k]`
   and reshaped inside the region (`apply_splits`, `with_splits`; views, no copies);
3. the backend lowers the function at two size hints and generalizes
   (passes/generalize_sizes.py; the Triton backend), or compiles it per size (the others;
   the Triton backend too for what it cannot generalize): at most PER_SIZE_LIMIT sizes,
   then new sizes run in PyTorch, logged, as every fallback (`eager_past_limit`).

The region's symbolic-size inputs (`s`, `16 * s`: size arithmetic the eager part of the
graph computes) are dropped at the call: the compiled function reads its sizes from its
tensors.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx import Graph, GraphModule, Node
from torch.fx.node import map_aggregate, map_arg
from torch.fx.passes.infra.partitioner import Partition
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import SSAValue

from fuseopt.backends.per_size import PerSizeFunction, SizeLimitReached
from fuseopt.dialects import nn
from fuseopt.frontends.fx.layouts import (
    InputEdge,
    RegionLayouts,
    apply_layouts,
    region_layouts,
    rewrite_edges,
)
from fuseopt.passes.generalize_sizes import HINTS, SizedFunction

logger = logging.getLogger("fuseopt")

SIZE_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)

ATTENTION_REASON = "attention over a symbolic query length (its schedule depends on it)"
"""Why attention whose queries have a symbolic size past the batch runs in PyTorch."""

Split = tuple[int, int]
"""(dim, k): a dim of size `k * s`, passed as the two dims `[s, k]`."""


def _expr(v: object) -> sympy.Expr | None:
    """The sympy expression of a symbolic size, None for a plain number."""
    return v.node.expr if isinstance(v, SIZE_TYPES) else None


def _symbols_of(val: object) -> set[sympy.Symbol]:
    if isinstance(val, torch.Tensor):
        parts: list[object] = [*val.shape, *val.stride()]
    elif isinstance(val, list | tuple):
        return set().union(*(_symbols_of(v) for v in val)) if val else set()
    else:
        parts = [val]
    found: set[sympy.Symbol] = set()
    for p in parts:
        e = _expr(p)
        if e is not None:
            found |= e.free_symbols
    return found


def graph_symbols(gm: GraphModule) -> set[sympy.Symbol]:
    """The symbols of `gm`'s symbolic sizes (its nodes' example values: `val` in ATen
    graphs, `example_value` in Dynamo's)."""
    found: set[sympy.Symbol] = set()
    for node in gm.graph.nodes:
        found |= _symbols_of(node.meta.get("val", node.meta.get("example_value")))
    return found


def has_symbolic_tensors(gm: GraphModule) -> bool:
    """Whether a tensor of `gm` (an example value) has a symbolic size or stride."""
    return any(_symbols_of(t) for node in gm.graph.nodes for t in _tensors(node.meta.get("val")))


def graph_symbol(gm: GraphModule) -> sympy.Symbol | None:
    """The one symbol of `gm`'s symbolic sizes; None when it has none or several."""
    found = graph_symbols(gm)
    return next(iter(found)) if len(found) == 1 else None


def size_at(v: object, symbol: sympy.Symbol, n: int) -> Any:
    """`v` (a number, or a symbolic int, float or bool) with `symbol` = `n`."""
    e = _expr(v)
    if e is None:
        return v
    value = e.xreplace({symbol: sympy.Integer(n)})
    if isinstance(v, torch.SymBool):
        return bool(value)
    return float(value) if isinstance(v, torch.SymFloat) else int(value)


def affine(v: object, symbol: sympy.Symbol) -> tuple[int, int] | None:
    """(k, b) when size `v` is `k * symbol + b` with integers k, b ((0, v) for a plain
    number); None for any other expression (another symbol, a product, a quotient)."""
    e = _expr(v)
    if e is None:
        return 0, int(v)  # type: ignore[call-overload]
    e = sympy.expand(e)
    k, b = e.coeff(symbol, 1), e.coeff(symbol, 0)
    if not (k.is_Integer and b.is_Integer) or sympy.expand(e - k * symbol - b) != 0:
        return None
    return int(k), int(b)


def ratio(v: object, symbol: sympy.Symbol, offset: int = 0) -> int | None:
    """0 for a constant size, `k` for `k * (symbol + offset)` (k > 0), None for any other
    expression."""
    form = affine(v, symbol)
    if form is None:
        return None
    k, b = form
    if k == 0:
        return 0
    return k if k > 0 and b == k * offset else None


def size_offset(v: object, symbol: sympy.Symbol) -> int | None:
    """`c` when size `v` is `k * (symbol + c)` with integers k > 0 and c (a cache of
    `s` tokens grown by one is `s + 1`: offset 1); None for a constant or another
    expression."""
    form = affine(v, symbol)
    if form is None or form[0] <= 0 or form[1] % form[0]:
        return None
    return form[1] // form[0]


def _concrete(val: object, symbol: sympy.Symbol, n: int, mode: FakeTensorMode) -> object:
    if isinstance(val, torch.Tensor):
        shape = [size_at(d, symbol, n) for d in val.shape]
        stride = [size_at(d, symbol, n) for d in val.stride()]
        with mode:
            return torch.empty_strided(shape, stride, dtype=val.dtype, device=val.device)
    if isinstance(val, list | tuple):
        return type(val)(_concrete(v, symbol, n, mode) for v in val)
    return size_at(val, symbol, n)


def concretize(gm: GraphModule, symbol: sympy.Symbol, n: int) -> tuple[GraphModule, dict]:
    """A copy of `gm` with `symbol` = `n`: example values static, every node computing a
    size (and every symbolic-size placeholder) replaced by its number in the nodes that
    use it. Returns the copy and the map from `gm`'s nodes to the copy's (nodes that
    computed sizes are not in the copy)."""
    graph = Graph()
    mapping: dict[Node, Node] = {}
    graph.output(graph.graph_copy(gm.graph, mapping))
    mode = FakeTensorMode()
    for old, node in list(mapping.items()):
        val = old.meta.get("val")
        node.args = map_aggregate(node.args, lambda a: size_at(a, symbol, n))
        node.kwargs = map_aggregate(node.kwargs, lambda a: size_at(a, symbol, n))
        if isinstance(val, SIZE_TYPES):
            value = size_at(val, symbol, n)
            for user in list(node.users):
                user.args = map_arg(user.args, lambda a, m=node, v=value: v if a is m else a)
                user.kwargs = map_arg(user.kwargs, lambda a, m=node, v=value: v if a is m else a)
            graph.erase_node(node)
            del mapping[old]
        elif val is not None:
            node.meta["val"] = _concrete(val, symbol, n, mode)
    return GraphModule(gm, graph), mapping


def _tensors(val: object) -> list[torch.Tensor]:
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, list | tuple):
        return [t for v in val for t in _tensors(v)]
    return []


def dynamic_reasons(gm: GraphModule, symbol: sympy.Symbol) -> dict[Node, str]:
    """The calls of `gm` that run in PyTorch however the op table takes them, and why
    (`classify_sizes`)."""
    return classify_sizes(gm, symbol)[0]


def classify_sizes(
    gm: GraphModule, symbol: sympy.Symbol
) -> tuple[dict[Node, str], dict[Node, int]]:
    """The calls of `gm` that run in PyTorch however the op table takes them, and why,
    and the offset `c` of every other call whose tensors have sizes `k * (symbol + c)`.

    A call runs in PyTorch when it reads a symbolic size as a value (`x * n`: the copy
    at a size hint would bake the hint in), has a size that is not `k * (symbol + c)`,
    has sizes of two offsets (a growing KV cache's `cat` of `s` and 1 tokens into
    `s + 1`: a region is compiled for one size, `symbol + c`), or is attention whose
    queries have a symbolic size past the batch (its schedule depends on it; attention
    over a symbolic key length, a decode step's, compiles)."""
    from fuseopt.frontends.fx.ops_attention import FUSED_ATTENTION

    reasons: dict[Node, str] = {}
    offsets: dict[Node, int] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        scalar = next((a for a in (*node.args, *node.kwargs.values()) if _is_size_node(a)), None)
        if scalar is not None:  # a size used as a value (a shape list is fine: a view's)
            reasons[node] = f"reads the symbolic size {scalar.name} as a value"
            continue
        tensors = _tensors(node.meta.get("val"))
        for arg in node.all_input_nodes:
            tensors += _tensors(arg.meta.get("val"))
        sizes = [d for t in tensors for d in t.shape if ratio(d, symbol) != 0]
        found = [(d, size_offset(d, symbol)) for d in sizes]  # SymInts: no dict keys
        odd = next((d for d, c in found if c is None), None)
        classes = {c: d for d, c in found if c is not None}
        if odd is not None:
            reasons[node] = (
                f"size {odd} is not a whole multiple of the symbolic size {symbol} "
                f"or of {symbol} plus a constant"
            )
        elif len(classes) > 1:
            a, b = sorted(classes.values(), key=str)[:2]
            reasons[node] = (
                f"reads and makes the symbolic sizes {a} and {b} (a compiled region "
                f"takes one size, {symbol} + c)"
            )
        elif node.target in FUSED_ATTENTION and _symbolic_queries(node, symbol):
            reasons[node] = ATTENTION_REASON
        elif classes:
            offsets[node] = next(iter(classes))
    return reasons, offsets


def _symbolic_queries(node: Node, symbol: sympy.Symbol) -> bool:
    """Whether attention `node`'s query has a symbolic size past its batch dim."""
    query = node.args[0] if node.args else None
    val = query.meta.get("val") if isinstance(query, Node) else None
    return not isinstance(val, torch.Tensor) or any(ratio(d, symbol) != 0 for d in val.shape[1:])


def _is_size_node(a: object) -> bool:
    return isinstance(a, Node) and isinstance(a.meta.get("val"), SIZE_TYPES)


def _splits(
    val: object, symbol: sympy.Symbol, order: Sequence[int] | None, offset: int
) -> tuple[Split, ...]:
    """The dims of size `k * (symbol + offset)`, k > 1, of tensor `val` stored in `order`."""
    if not isinstance(val, torch.Tensor):
        return ()
    dims = order if order is not None else range(val.dim())
    found = []
    for stored, d in enumerate(dims):
        k = ratio(val.shape[d], symbol, offset)
        if k is not None and k > 1:
            found.append((stored, k))
    return tuple(found)


def _split_shape(shape: Sequence[int], splits: Sequence[Split], n: int) -> list[int]:
    out = list(shape)
    for d, k in sorted(splits, reverse=True):
        out[d : d + 1] = [n, k]
    return out


def apply_splits(
    module: ModuleOp,
    inputs: Sequence[tuple[Split, ...]],
    outputs: Sequence[tuple[Split, ...]],
    n: int,
) -> None:
    """Make the region function of `module` (at size `n`) take and return each edge of
    size `k * n` as `[n, k]` dims (`nn.reshape`s at its edges)."""

    def split(i: int, t: TensorType) -> InputEdge | None:
        if not inputs[i]:
            return None
        shape = _split_shape(t.get_shape(), inputs[i], n)
        return TensorType(t.element_type, shape), lambda v: nn.ReshapeOp(v, t)

    def joined(i: int, value: SSAValue) -> nn.ReshapeOp | None:
        t = value.type
        if not outputs[i] or not isinstance(t, TensorType):
            return None
        shape = _split_shape(t.get_shape(), outputs[i], n)
        return nn.ReshapeOp(value, TensorType(t.element_type, shape))

    rewrite_edges(module, split, joined)


@dataclass(frozen=True)
class SymbolicRegion:
    """A region traced with a symbolic size: the function (`sized`) with the edges it
    takes and returns split (`input_splits`, `output_splits`, in each edge's stored
    order), its layouts (`layouts`, taken at the first size hint), and the positions of
    the region's symbolic-size inputs (`size_inputs`, dropped at the call)."""

    sized: SizedFunction
    layouts: RegionLayouts
    input_splits: tuple[tuple[Split, ...], ...]
    output_splits: tuple[tuple[Split, ...], ...]
    size_inputs: tuple[int, ...]

    def wrap(
        self, compiled: Callable[..., Sequence[torch.Tensor]]
    ) -> Callable[..., Sequence[torch.Tensor]]:
        """`compiled` (the backend's function of `sized`) called as the region is: size
        inputs dropped, edges permuted (`layouts`) and split, outputs joined back."""
        from fuseopt.frontends.fx.layouts import with_layouts

        inner = with_layouts(
            with_splits(compiled, self.input_splits, self.output_splits),
            self.layouts,
            dynamic=True,
        )
        if not self.size_inputs:
            return inner
        drop = set(self.size_inputs)

        def call(*args: Any) -> Sequence[torch.Tensor]:
            return inner(*[a for i, a in enumerate(args) if i not in drop])

        return call


def sized_region(
    sub: GraphModule,
    func_name: str,
    symbol: sympy.Symbol,
    import_graph: Callable[[GraphModule, str], ModuleOp],
    offset: int = 0,
) -> SymbolicRegion:
    """The region `sub` (traced with symbolic size `symbol`, its sizes multiples of
    `symbol + offset`: `classify_sizes`) as a SymbolicRegion of the size
    `n = symbol + offset`; its function imported at the first size hint once here, so
    that a region the importer cannot take fails now (the caller keeps it eager), as
    does one whose inputs do not carry the size (a call could not tell it)."""
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    size_inputs = tuple(
        i for i, p in enumerate(placeholders) if isinstance(p.meta.get("val"), SIZE_TYPES)
    )
    tensors = [p.meta.get("val") for i, p in enumerate(placeholders) if i not in size_inputs]
    output = next(n for n in sub.graph.nodes if n.op == "output")
    items = output.args[0] if isinstance(output.args[0], list | tuple) else [output.args[0]]
    results = [item.meta.get("val") if isinstance(item, Node) else None for item in items]
    layouts = region_layouts(concretize(sub, symbol, HINTS[0] - offset)[0])
    input_splits = tuple(
        _splits(v, symbol, o, offset) for v, o in zip(tensors, layouts.inputs, strict=True)
    )
    output_splits = tuple(
        _splits(v, symbol, o, offset) for v, o in zip(results, layouts.outputs, strict=True)
    )
    dims = []
    for i, (v, splits) in enumerate(zip(tensors, input_splits, strict=True)):
        if not isinstance(v, torch.Tensor):
            continue
        order = layouts.inputs[i] or range(v.dim())
        stored = [v.shape[d] for d in order]
        split_at = {d for d, _ in splits}
        position = 0
        for d, size in enumerate(stored):
            if ratio(size, symbol, offset) == 1 or d in split_at:
                dims.append((i, position))
            position += 2 if d in split_at else 1

    if not dims:
        size = f"{symbol} + {offset}" if offset else str(symbol)
        raise ValueError(f"no input of the region has the symbolic size {size} itself")

    def at(n: int) -> ModuleOp:
        module = import_graph(concretize(sub, symbol, n - offset)[0], func_name)
        if not layouts.trivial:
            apply_layouts(module, layouts)
        apply_splits(module, input_splits, output_splits, n)
        return module

    at(HINTS[0])
    return SymbolicRegion(
        SizedFunction(func_name, at, tuple(dims)),
        layouts,
        input_splits,
        output_splits,
        size_inputs,
    )


def with_splits(
    fn: Callable[..., Sequence[torch.Tensor]],
    inputs: Sequence[tuple[Split, ...]],
    outputs: Sequence[tuple[Split, ...]],
) -> Callable[..., Sequence[torch.Tensor]]:
    """`fn` (a function taking and returning edges split by `apply_splits`) called with
    whole tensors: each split input viewed as `[s, k]` (a copy only when its strides
    cannot be split), each split output joined back. `fn` itself when nothing is split."""
    if not any(inputs) and not any(outputs):
        return fn

    def split(x: torch.Tensor, splits: tuple[Split, ...]) -> torch.Tensor:
        if not splits:
            return x
        shape = list(x.shape)
        for d, k in sorted(splits, reverse=True):
            shape[d : d + 1] = [-1, k] if len(splits) == 1 else [shape[d] // k, k]
        return x.reshape(shape)

    def join(r: torch.Tensor, splits: tuple[Split, ...]) -> torch.Tensor:
        for d, _ in sorted(splits, reverse=True):
            position = d + sum(1 for e, _ in splits if e < d)
            r = r.flatten(position, position + 1)
        return r

    def call(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        results = fn(*(split(a, s) for a, s in zip(args, inputs, strict=True)))
        return tuple(join(r, s) for r, s in zip(results, outputs, strict=True))

    return call


def one_offset_partitions(
    propose: Callable[[], list[Partition]],
    reasons: dict[Node, str | None],
    offsets: Mapping[Node, int],
    symbol: sympy.Symbol,
) -> list[Partition]:
    """`propose()`'s partitions, each of whose nodes have one offset of the symbolic
    size (`symbol + c`: a region is compiled for one size): a partition joining nodes of
    several (through static ones) keeps its most common offset, the other nodes run in
    PyTorch (`reasons` updated), and the partitioner runs again."""
    while True:
        partitions = propose()
        split = False
        for p in partitions:
            found = Counter(offsets[n] for n in p.nodes if n in offsets)
            if len(found) < 2:
                continue
            kept = found.most_common(1)[0][0]
            for n in p.nodes:
                if n in offsets and offsets[n] != kept:
                    reasons[n] = (
                        f"its size is {symbol} + {offsets[n]}, its region's {symbol} + {kept}"
                    )
                    split = True
        if not split:
            return partitions


PER_SIZE_LIMIT = 8
"""Sizes a symbolic region compiled per size (its backend compiles one per size, or its
lowering depends on the size) compiles before it runs new sizes in PyTorch: Dynamo's
own recompile limit. A decode step's growing KV length would otherwise compile per
token."""


def eager_past_limit(
    fn: Callable[..., Sequence[torch.Tensor]],
    per_size: PerSizeFunction,
    eager: GraphModule,
    func_name: str,
) -> Callable[..., Sequence[torch.Tensor]]:
    """`fn` (calling `per_size`), running `eager` (the region's submodule) for a call of a
    new size once PER_SIZE_LIMIT sizes are compiled (logged once)."""
    per_size.limit = PER_SIZE_LIMIT
    logged = False

    def call(*args: Any) -> Sequence[torch.Tensor]:
        nonlocal logged
        try:
            return fn(*args)
        except SizeLimitReached:
            if not logged:
                logger.info(
                    "fuseopt: %s compiled %d sizes; new sizes run in PyTorch",
                    func_name,
                    PER_SIZE_LIMIT,
                )
                logged = True
            return eager(*args)

    return call
