"""Region outputs that are views of another value: returned as views, not copied.

A region's output is often a view PyTorch traced over a buffer the region computes: the
query, key and value of a fused QKV projection are three slices of one GEMM's result
(GPT-2's `c_attn`), each transposed to [batch, heads, seq, head_dim], and PyTorch's
attention, run eagerly after the region, reads them as they are. Compiled as they are,
those outputs are computed into buffers of their own: one copy kernel per slice, three
a layer, while eager PyTorch copies nothing.

`view_outputs` finds each output whose traced value is a partial view (fewer elements
than its storage) of the storage of a value the region itself computes densely (the
*base*: the first node of the region whose traced value covers the whole storage from
offset 0, dense in some dimension order), and rewrites a copy of the region to return
the base instead (once, however many outputs view it). `with_output_views` wraps the
compiled region: each such output is the traced view (sizes, strides, storage offset)
re-described over the base's buffer (`reinterpret`, no copy), as eager PyTorch would
have returned it.

A base the backend returns with other strides than traced (a library GEMM whose rows it
padded: `library_gemm.padded_output`) is first copied into a buffer of the traced
strides: correct, one copy a call however many views read it. The rewrite is for graphs
run without autograd (`compile_graph_module`'s `output_views`): in a training graph a
view saved for backward would share the buffer of an output the user may update in
place, out of sight of autograd's version counters. A view is only rewritten where that
writes no more than before: the base is an output already, a GEMM's result (in memory
anyway: `WRITTEN_ANYWAY`), or the views of it together have as many elements as it (a
view of a few elements of a large intermediate keeps its own small buffer): the value
columns of a merged query/key/value projection (`merged_linears`) are returned as a view
of the GEMM's result while the RoPE kernels read the query and key columns. Outputs that
cover their whole storage (a permuted output, an output reshaped from its producer) are
left to `layouts`, which re-describes them already. Regions of symbolic sizes are left
as they are."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.fx import Graph, GraphModule, Node
from torch.multiprocessing.reductions import StorageWeakRef

from fuseopt.backends.host_memory import reinterpret
from fuseopt.frontends.fx.layouts import dimension_order, is_dense


@dataclass(frozen=True)
class OutputView:
    """An output re-described over a base's buffer: the base is output `base` of the
    rewritten region, traced with `base_strides`; the view has `shape`, `strides` and
    starts `offset` elements into the base's storage."""

    base: int
    base_shape: tuple[int, ...]
    base_strides: tuple[int, ...]
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int


@dataclass(frozen=True)
class OutputViews:
    """How the outputs of a region are made from those of its rewritten copy: per
    original output, the index of the rewritten region's output it is, or the
    OutputView over one."""

    outputs: tuple[int | OutputView, ...]


WRITTEN_ANYWAY = frozenset(
    {
        torch.ops.aten.mm.default,
        torch.ops.aten.addmm.default,
        torch.ops.aten.bmm.default,
        torch.ops.aten.baddbmm.default,
    }
)
"""Producers whose result is in memory whether or not it is returned (a matrix product
runs as a library GEMM, or a GEMM kernel that stores its tile): returning it as the
base of a few views writes nothing more."""


def _static(node: object) -> torch.Tensor | None:
    """The traced tensor of `node` when its sizes, strides and offset are static."""
    val = node.meta.get("val") if isinstance(node, Node) else None
    if not isinstance(val, torch.Tensor) or val.layout != torch.strided:
        return None
    numbers = (*val.shape, *val.stride(), val.storage_offset())
    return val if all(isinstance(n, int) for n in numbers) else None


def _storage_elements(t: torch.Tensor) -> int:
    """How many elements of `t`'s dtype its storage holds."""
    return t.untyped_storage().nbytes() // t.element_size()


def _covers_storage(t: torch.Tensor) -> bool:
    """Whether `t` is dense in its dimension order from offset 0 over its whole storage."""
    return (
        t.storage_offset() == 0
        and t.numel() == _storage_elements(t)
        and is_dense(t, dimension_order(t))
    )


def _bases(sub: GraphModule) -> dict[StorageWeakRef, Node]:
    """Per storage, the first node of `sub` computing a value that covers it. Not the
    storage of an input, even through a view of it: an input's runtime strides are not
    the region's to promise."""
    inputs = {
        StorageWeakRef(n.meta["val"].untyped_storage())
        for n in sub.graph.nodes
        if n.op == "placeholder"
        and isinstance(n.meta.get("val"), torch.Tensor)
        and n.meta["val"].layout == torch.strided  # a sparse input has no storage
    }
    bases: dict[StorageWeakRef, Node] = {}
    for node in sub.graph.nodes:
        if node.op != "call_function":
            continue
        t = _static(node)
        if t is None or t.numel() == 0 or not _covers_storage(t):
            continue
        storage = StorageWeakRef(t.untyped_storage())
        if storage not in inputs:
            bases.setdefault(storage, node)
    return bases


def view_outputs(sub: GraphModule) -> tuple[GraphModule, OutputViews] | None:
    """A copy of region `sub` returning the bases of its view outputs in their place, and
    how to make the original outputs from its results (module doc); None when no output
    is such a view. `sub` itself is not changed (it stays the eager fallback)."""
    out_node = next(n for n in sub.graph.nodes if n.op == "output")
    items = out_node.args[0]
    if not isinstance(items, list | tuple):
        return None
    bases = _bases(sub)
    viewed: dict[int, Node] = {}  # original output index -> its base
    for i, item in enumerate(items):
        t = _static(item)
        if t is None or t.numel() == 0 or _covers_storage(t):
            continue
        base = bases.get(StorageWeakRef(t.untyped_storage()))
        if base is not None and base is not item and _static(base).dtype == t.dtype:  # type: ignore[union-attr]
            viewed[i] = base
    # rewrite only where it writes no more than before (module doc)
    for base in set(viewed.values()):
        views = [i for i, b in viewed.items() if b is base]
        whole = _static(base).numel()  # type: ignore[union-attr]
        # each view once (an output returned twice writes nothing twice)
        nodes = {items[i] for i in views}
        elements = sum(_static(n).numel() for n in nodes)  # type: ignore[union-attr]
        if base not in items and elements < whole and base.target not in WRITTEN_ANYWAY:
            for i in views:
                del viewed[i]
    if not viewed:
        return None
    returned: list[Node] = []
    outputs: list[int | OutputView] = []
    for i, item in enumerate(items):
        node = viewed.get(i, item)
        if node not in returned:
            returned.append(node)
        index = returned.index(node)
        if i not in viewed:
            outputs.append(index)
            continue
        t, b = _static(item), _static(node)
        assert t is not None and b is not None
        outputs.append(
            OutputView(
                index,
                tuple(b.shape),
                tuple(b.stride()),
                tuple(t.shape),
                tuple(t.stride()),
                t.storage_offset(),
            )
        )
    graph = Graph()
    copied: dict[Node, Node] = {}
    graph.graph_copy(sub.graph, copied)
    graph.output(tuple(copied[n] for n in returned))
    rewritten = GraphModule(sub, graph)
    rewritten.graph.eliminate_dead_code()
    rewritten.recompile()
    return rewritten, OutputViews(tuple(outputs))


def _as_traced(r: torch.Tensor, view: OutputView) -> torch.Tensor:
    """Result `r` (a base) with its traced strides: itself, or a copy when the backend
    returned it with others (size-1 dims may have any stride: they move nothing)."""
    if tuple(r.shape) == view.base_shape and all(
        n == 1 or s == t for n, s, t in zip(r.shape, r.stride(), view.base_strides, strict=True)
    ):
        return r
    traced = r.new_empty_strided(view.base_shape, view.base_strides)
    traced.copy_(r)
    return traced


def with_output_views(
    fn: Callable[..., Sequence[torch.Tensor]], views: OutputViews | None
) -> Callable[..., Sequence[torch.Tensor]]:
    """`fn` (the rewritten region, compiled) returning the original region's outputs:
    each view re-described over its base's buffer. `fn` itself when `views` is None."""
    if views is None:
        return fn
    plan = views.outputs

    def call(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        results = fn(*args)
        traced: dict[int, torch.Tensor] = {}  # each base made traced once (one copy at most)
        out = []
        for p in plan:
            if isinstance(p, int):
                out.append(results[p])
                continue
            base = traced.get(p.base)
            if base is None:
                base = traced[p.base] = _as_traced(results[p.base], p)
            out.append(reinterpret(base, p.shape, p.strides, p.offset))
        return tuple(out)

    return call
