"""The fallback partitioner: compile what the op table takes, run the rest eagerly.

Steps:
1. decide support per node by a trial import of the node alone (its inputs as fresh
   arguments), checking the converter's result types against the node's example value;
   any failure, including a converter bug, makes the node run eagerly, never wrong;
2. group supported nodes into cycle-free regions (torch's CapabilityBasedPartitioner)
   and drop regions that only move data (views, getitem, copies);
3. pull each region into a submodule, import it as an nn function (its inputs and
   outputs in the dimension order PyTorch traced them in: `layouts`; an output that is
   a partial view of a value the region computes returned as that view of it:
   `output_views`) and hand it to the backend; the submodule is replaced by the
   compiled callable (a region that still fails to import, or that the region compiler
   answers with `RegionFallback`, keeps its eager submodule);
4. log one line on logger `fuseopt` naming the ops that fell back and why (a
   `getitem` unpacking an eager op's results, size arithmetic on symbolic sizes and
   targets marked `host_step` (packed parameters) are not listed: they are not work).
"""

from __future__ import annotations

import logging
import operator
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
from torch.fx import GraphModule, Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.operator_support import OperatorSupportBase
from torch.fx.passes.utils.fuser_utils import fuse_by_partitions
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue

from fuseopt.backends.per_size import PerSizeFunction
from fuseopt.diagnostics import SourceLocation
from fuseopt.dialects.dtypes import UnsupportedTypeError
from fuseopt.frontends.fx.context import OP_TABLE
from fuseopt.frontends.fx.errors import (
    RegionFallback,
    UnsupportedOpError,
    describe_target,
    node_location,
)
from fuseopt.frontends.fx.importer import import_graph, import_node
from fuseopt.frontends.fx.layouts import (
    RegionLayouts,
    apply_layouts,
    region_layouts,
    with_layouts,
)
from fuseopt.frontends.fx.ops_shape import contiguous_strides
from fuseopt.frontends.fx.output_views import OutputViews, view_outputs, with_output_views
from fuseopt.frontends.fx.symbolic_sizes import (
    SymbolicRegion,
    classify_sizes,
    concretize,
    eager_past_limit,
    has_symbolic_tensors,
    one_offset_partitions,
    sized_region,
)
from fuseopt.frontends.fx.types import tensor_type
from fuseopt.passes.generalize_sizes import HINTS, SizedFunction

logger = logging.getLogger("fuseopt")

aten = torch.ops.aten

DATA_MOVEMENT = {
    operator.getitem,
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.t.default,
    aten.transpose.int,
    aten.permute.default,
    aten.expand.default,
    aten.unsqueeze.default,
    aten.squeeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.clone.default,
    aten.detach.default,
    aten.alias.default,
    aten.slice.Tensor,
    aten.select.int,
    aten.split.Tensor,
    aten.split_with_sizes.default,
    aten.unbind.int,
    aten.flatten.using_ints,
    aten._assert_tensor_metadata.default,
}
"""Ops that only move or alias data: a region of nothing else stays eager (free views)."""

PREFIX = "fuseopt_region_"

STRIDE_DEPENDENT = {aten.as_strided.default}
"""Ops whose result depends on their input's memory layout, not only its values. Eager
ops between compiled regions see the regions' contiguous outputs, so such an op on an
input traced non-contiguous would read other elements: its graph runs eagerly whole."""

STRIDES_REASON = (
    "as_strided of a tensor traced non-contiguous or offset reads memory by its strides; "
    "the whole graph runs eagerly (splitting it would hand the op a contiguous copy)"
)
"""The fallback reason of every node of a graph with a stride-dependent op on a
non-contiguous input."""

COLLECTIVE_NAMESPACES = ("_c10d_functional", "_c10d_functional_autograd", "c10d_functional")
"""The op namespaces of torch.distributed's traced collectives (all_reduce,
all_gather_into_tensor, reduce_scatter_tensor, wait_tensor, ...: what DTensor and
tensor parallelism put in a graph)."""

COLLECTIVE_REASON = "collective communication (runs in PyTorch between compiled regions)"
"""The fallback reason of a collective: nn has no communication ops, so a collective
stays an op of the graph, never inside a compiled region, and runs as PyTorch's."""


@dataclass(frozen=True)
class FallbackRecord:
    """One node that runs eagerly: its ATen op, why, and where it comes from."""

    graph: str
    target: str
    reason: str
    location: SourceLocation | None


@dataclass(frozen=True)
class RegionRecord:
    """One compiled region: its nn function name, the ATen graph it came from, the nn
    module as imported (before any pass; a copy the backend never sees) and what the
    backend returned for it."""

    func_name: str
    graph: str
    imported: ModuleOp
    compiled: Any


@dataclass
class CompileRecord:
    """What compiling a model produced, across all its graphs (forward, backward,
    recompilations): the compiled regions, the backends' kernel records, the eager
    fallbacks, the names of the ATen graphs seen and those replayed whole."""

    kernels: list[Any] = field(default_factory=list)
    fallbacks: list[FallbackRecord] = field(default_factory=list)
    graphs: list[str] = field(default_factory=list)
    regions: list[RegionRecord] = field(default_factory=list)
    whole_graphs: dict[str, Any] = field(default_factory=dict)
    """Per ATen graph name, the CUDA-graph function replaying it whole (mode
    "reduce-overhead" or "max-autotune": `whole_graph`)."""


def unsupported_reason(node: Node) -> str | None:
    """None if the importer takes `node`, else why not (a trial import of the node)."""
    if node.op != "call_function":
        return None if node.op in ("placeholder", "output", "get_attr") else node.op
    if node.target not in OP_TABLE:
        return COLLECTIVE_REASON if is_collective(node.target) else "no nn lowering for this op"
    block, env = Block(), {}
    for inp in node.all_input_nodes:
        val = inp.meta.get("val")
        if isinstance(val, list | tuple) and node.target is operator.getitem:
            env[inp] = tuple(_trial_arg(block, v) for v in val)
            continue
        if is_size_value(val):
            return f"input '{inp.name}': symbolic scalar {val} (dynamic shapes run eagerly)"
        try:
            env[inp] = block.insert_arg(tensor_type(val), len(block.args))
        except UnsupportedTypeError as e:
            return f"input '{inp.name}': {e}"
    try:
        result = import_node(block, env, node)
        for op in block.ops:
            op.verify()
        return _check_result(node, result)
    except UnsupportedOpError as e:
        return e.reason
    except Exception as e:  # a converter bug must fall back, never crash or miscompile
        return f"import failed ({type(e).__name__}: {e})"


def is_size_value(value: object) -> bool:
    """Whether an example value is a symbolic scalar (a SymInt, SymFloat or SymBool):
    the node computing it is size arithmetic on the host, not tensor work."""
    return isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool)


def is_collective(target: object) -> bool:
    """Whether an FX node target is a torch.distributed collective (`COLLECTIVE_NAMESPACES`)."""
    return getattr(target, "namespace", None) in COLLECTIVE_NAMESPACES


def _trial_arg(block: Block, val: object) -> SSAValue | None:
    try:
        return block.insert_arg(tensor_type(val), len(block.args))
    except UnsupportedTypeError:
        return None


def _check_result(node: Node, result: object) -> str | None:
    """Why the converter's result disagrees with the node's example value, if it does."""
    val = node.meta.get("val")
    pairs = list(zip(result, val, strict=False)) if isinstance(result, tuple) else [(result, val)]
    if isinstance(result, tuple) != isinstance(val, list | tuple):
        return "result arity differs from the example value"
    for value, example in pairs:
        if value is None and node.target is not operator.getitem:
            continue
        if not isinstance(value, SSAValue) or not isinstance(example, torch.Tensor):
            return f"result {example!r} is not a tensor"
        try:
            want = tensor_type(example)
        except UnsupportedTypeError as e:
            return str(e)
        if value.type != want:
            return f"importer produced {value.type}, PyTorch has {want} (run eagerly)"
    return None


class _TableSupport(OperatorSupportBase):
    def __init__(self, reasons: dict[Node, str | None]):
        self.reasons = reasons

    def is_node_supported(self, submodules: object, node: Node) -> bool:
        return node.op == "call_function" and self.reasons.get(node) is None


def support_table(
    gm: GraphModule, eager: Mapping[object, str] | None = None
) -> dict[Node, str | None]:
    """Why each node is unsupported (None where it is supported); targets in `eager`
    are kept eager with the given reason, whatever the op table says."""
    reasons: dict[Node, str | None] = {}
    eager = eager or {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in eager:
            reasons[node] = eager[node.target]
        elif node.target is operator.getitem and node.op == "call_function":
            source = node.args[0]
            reasons[node] = reasons.get(source) if isinstance(source, Node) else "bad getitem"
            if reasons[node] is None:
                reasons[node] = unsupported_reason(node)
        else:
            reasons[node] = unsupported_reason(node)
    return reasons


def symbolic_support(
    gm: GraphModule, symbol: sympy.Symbol, eager: Mapping[object, str] | None = None
) -> tuple[dict[Node, str | None], dict[Node, int]]:
    """`support_table` of a graph traced with symbolic size `symbol`: the table of its
    copy at the first size hint, where `symbolic_sizes.classify_sizes` does not keep a
    node in PyTorch, and the offset `c` of each call whose sizes are `k * (symbol + c)`.
    Nodes computing sizes are size arithmetic, never compiled."""
    concrete, mapping = concretize(gm, symbol, HINTS[0])
    at_hint = support_table(concrete, eager)
    reasons: dict[Node, str | None] = {
        n: at_hint.get(mapping[n], "unsupported") if n in mapping else "size arithmetic"
        for n in gm.graph.nodes
    }
    dynamic, offsets = classify_sizes(gm, symbol)
    for n, why in dynamic.items():
        if reasons.get(n) is None:
            reasons[n] = why
    return reasons, offsets


def compile_graph_module(
    gm: GraphModule,
    graph_name: str,
    compile_region: Callable[[Any, str], Callable[..., Sequence[torch.Tensor]]],
    record: CompileRecord,
    eager: Mapping[object, str] | None = None,
    guarded_inputs: bool = False,
    symbol: sympy.Symbol | None = None,
    output_views: bool = False,
) -> GraphModule:
    """Replace the supported regions of `gm` by compiled callables (see module doc).

    `compile_region(module, func_name)` compiles an imported nn module's function and
    returns a callable from tensors to a sequence of tensors, or raises RegionFallback
    to leave the region eager. Targets in `eager` run eagerly (reason given).
    `guarded_inputs`: `gm`'s placeholders have their traced sizes, strides and dtypes
    in every call (they are the inputs of the frame Dynamo traced, which its guards
    pin: `dynamo_backend.frame_inputs`), so a region reading one contiguously need not
    check it per call (`_guarded`).
    `symbol`: `gm` was traced with this one symbolic size; its regions are compiled once
    for every size (`symbolic_sizes`).
    `output_views`: region outputs that are partial views of a value the region computes
    are returned as views of it (`output_views`; for graphs run without autograd only:
    a view that a training graph saves for backward would share a buffer with an output
    the user may update in place, without autograd's version counter seeing it).
    """
    if any(_reads_strides(n) for n in gm.graph.nodes):
        calls = [n for n in gm.graph.nodes if n.op == "call_function"]
        _log_fallbacks(graph_name, calls, dict.fromkeys(calls, STRIDES_REASON), record)
        record.graphs.append(graph_name)
        return gm
    offsets: dict[Node, int] = {}
    if symbol is None:
        reasons = support_table(gm, eager)
    else:
        reasons, offsets = symbolic_support(gm, symbol, eager)

    def propose() -> list[Partition]:
        partitioner = CapabilityBasedPartitioner(
            gm, _TableSupport(reasons), allows_single_node_partition=True
        )
        return partitioner.propose_partitions()

    proposed = (
        propose() if symbol is None else one_offset_partitions(propose, reasons, offsets, symbol)
    )
    failed = [n for n, r in reasons.items() if r is not None and n.op == "call_function"]
    regions = [p for p in proposed if any(n.target not in DATA_MOVEMENT for n in p.nodes)]
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    regions.sort(key=lambda p: min(order[n] for n in p.nodes))
    # each region's one offset of the symbolic size (`one_offset_partitions`), by the
    # index fuse_by_partitions names its submodule with
    region_offsets = [next((offsets[n] for n in p.nodes if n in offsets), 0) for p in regions]
    if regions:
        fuse_by_partitions(
            gm, [{n: None for n in p.nodes} for p in regions], PREFIX, always_return_tuple=True
        )
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not str(node.target).startswith(PREFIX):
            continue
        sub = getattr(gm, node.target)
        func_name = f"{graph_name}_{str(node.target).removeprefix(PREFIX)}"
        symbolic: SymbolicRegion | None = None
        views: OutputViews | None = None
        try:
            if symbol is not None and has_symbolic_tensors(sub):
                layouts = region_layouts(sub)
                offset = region_offsets[int(str(node.target).removeprefix(PREFIX))]
                symbolic = sized_region(sub, func_name, symbol, import_graph, offset)
                module: ModuleOp | SizedFunction = symbolic.sized
            else:
                # what is imported: `sub`, or its copy returning the bases of view outputs
                rewritten = view_outputs(sub) if output_views else None
                compiled_graph, views = rewritten or (sub, None)
                layouts = region_layouts(compiled_graph)
                module = import_graph(compiled_graph, func_name)
                if not layouts.trivial:
                    apply_layouts(module, layouts)
        except Exception as e:  # keep the eager submodule: correct, just not compiled
            failed.extend(n for n in sub.graph.nodes if n.op == "call_function")
            reasons.update({n: f"region import failed: {e}" for n in sub.graph.nodes})
            continue
        try:
            compiled = compile_region(module, func_name)
        except RegionFallback as e:
            failed.extend(n for n in sub.graph.nodes if n.op == "call_function")
            reasons.update({n: e.reason for n in sub.graph.nodes})
            continue
        scalars = host_scalars(sub)
        if symbolic is not None:
            wrapped = symbolic.wrap(compiled)
            if isinstance(compiled, PerSizeFunction):
                wrapped = eager_past_limit(wrapped, compiled, sub, func_name)
            region = CompiledRegion(wrapped, func_name, scalars)
            _call_directly(gm, node, region)
            continue
        trusting = getattr(compiled, "trusting", None)
        if guarded_inputs and trusting is not None:
            compiled = trusting(_guarded(node, layouts, scalars))
        region = CompiledRegion(
            with_output_views(with_layouts(compiled, layouts), views), func_name, scalars
        )
        _call_directly(gm, node, region)
    gm.recompile()
    _log_fallbacks(graph_name, failed, reasons, record)
    record.graphs.append(graph_name)
    return gm


def _guarded(node: Node, layouts: RegionLayouts, scalars: tuple[int, ...]) -> list[bool]:
    """Per input of the region call `node`: whether it is a placeholder of the graph
    traced with static sizes and strides that are dense in the order the region reads it
    (`layouts`), so that it arrives contiguous with the compiled shape in every call.
    Inputs made by other nodes are not: a compiled region's output may have a padded
    row pitch its traced value does not show (`library_gemm.padded_output`)."""
    flags = []
    for i, arg in enumerate(node.args):
        val = arg.meta.get("val") if isinstance(arg, Node) and arg.op == "placeholder" else None
        if i in scalars or not isinstance(val, torch.Tensor):
            flags.append(False)
            continue
        shape, stride = tuple(val.shape), tuple(val.stride())
        if not all(isinstance(n, int) for n in (*shape, *stride)):
            flags.append(False)
            continue
        order = layouts.inputs[i]
        if order is not None:
            shape, stride = tuple(shape[d] for d in order), tuple(stride[d] for d in order)
        dense = contiguous_strides(shape)  # a dim of size 1 may have any stride
        flags.append(all(n == 1 or s == d for n, s, d in zip(shape, stride, dense, strict=True)))
    return flags


def _reads_strides(node: Node) -> bool:
    """Whether `node` is a stride-dependent op that a contiguous copy of its input would
    answer differently: its input traced non-contiguous or at a storage offset, or its
    reads reaching past the input's own elements."""
    if node.op != "call_function" or node.target not in STRIDE_DEPENDENT:
        return False
    source = node.args[0].meta.get("val") if isinstance(node.args[0], Node) else None
    if not isinstance(source, torch.Tensor):
        return True
    if not source.is_contiguous() or source.storage_offset() != 0:
        return True
    size, stride = node.args[1], node.args[2]
    offset = node.args[3] if len(node.args) > 3 else node.kwargs.get("storage_offset", 0)
    if not all(isinstance(v, int) for v in (*size, *stride, offset or 0)):
        return True
    if any(n == 0 for n in size):
        return False  # reads nothing
    last = (offset or 0) + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    return last >= source.numel()


def host_scalars(sub: GraphModule) -> tuple[int, ...]:
    """The positions of `sub`'s inputs that are 0-d tensors on the CPU while another
    input lives on an accelerator: PyTorch mixes such scalars into device ops (Dynamo
    passes a module's float attributes that way under dynamic=True, and an eager
    conversion of one stays on the CPU), but a kernel cannot read host memory."""
    vals = [n.meta.get("val") for n in sub.graph.nodes if n.op == "placeholder"]
    tensors = [v for v in vals if isinstance(v, torch.Tensor)]
    if not any(v.device.type != "cpu" for v in tensors):
        return ()
    return tuple(
        i
        for i, v in enumerate(vals)
        if isinstance(v, torch.Tensor) and v.dim() == 0 and v.device.type == "cpu"
    )


class CompiledRegion:
    """A compiled nn function standing in for an FX submodule: the partitioned graph
    calls it as a function (a `call_function` node), without the per-call dispatch of an
    `nn.Module` call. Returns the region's outputs as a sequence. Inputs at
    `host_scalars` positions (`host_scalars`) are copied to the device of the first
    input that is not on the CPU."""

    def __init__(
        self,
        fn: Callable[..., Sequence[torch.Tensor]],
        name: str,
        host_scalars: tuple[int, ...] = (),
    ):
        self.fn = fn
        self.host_scalars = host_scalars
        self.__name__ = self.__qualname__ = name  # how FX names it in the graph's code
        self.__module__ = __name__

    def __call__(self, *args: torch.Tensor) -> Sequence[torch.Tensor]:
        """Run the compiled region."""
        if self.host_scalars:
            device = next(
                a.device for a in args if isinstance(a, torch.Tensor) and a.device.type != "cpu"
            )
            moved = list(args)
            for i in self.host_scalars:
                moved[i] = moved[i].to(device, non_blocking=True)
            return self.fn(*moved)
        return self.fn(*args)


def _call_directly(gm: GraphModule, node: Node, region: CompiledRegion) -> None:
    """Replace the `call_module` node of a region's submodule by a call of `region`,
    and drop the submodule."""
    with gm.graph.inserting_before(node):
        call = gm.graph.call_function(region, tuple(node.args), dict(node.kwargs))
    call.meta = dict(node.meta)
    node.replace_all_uses_with(call)
    gm.graph.erase_node(node)
    gm.delete_submodule(str(node.target))


def _log_fallbacks(
    graph_name: str,
    failed: list[Node],
    reasons: dict[Node, str | None],
    record: CompileRecord,
) -> None:
    eager = set(failed)
    failed = [
        n
        for n in failed
        if not (n.target is operator.getitem and n.args and n.args[0] in eager)
        and not is_size_value(n.meta.get("val"))
        and not getattr(n.target, "host_step", False)
    ]
    if not failed:
        return
    seen: Counter[tuple[str, str]] = Counter()
    for node in failed:
        reason = reasons.get(node) or "unsupported"
        target = describe_target(node.target)
        seen[(target, reason)] += 1
        record.fallbacks.append(FallbackRecord(graph_name, target, reason, node_location(node)))
    parts = [
        f"{target} x{count} ({reason})" if count > 1 else f"{target} ({reason})"
        for (target, reason), count in seen.items()
    ]
    logger.warning(
        "fuseopt: %s: %d op(s) run eagerly in PyTorch: %s",
        graph_name,
        len(failed),
        "; ".join(parts),
    )
