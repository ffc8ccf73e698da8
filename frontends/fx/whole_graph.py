"""mode="reduce-overhead" over a whole ATen graph: one CUDA graph a call.

Without it each compiled region replays a CUDA graph of its own and every op between
regions (a PyTorch attention kernel, a KV cache's `cat`, an op without a lowering)
runs as Python and a launch of its own: a Llama decode step on the CUDA backend, whose
attention runs in PyTorch, paid more host time under reduce-overhead than
torch.compile's CUDA graphs, which capture the whole graph. `WholeGraph` presents a
compiled ATen graph (regions and PyTorch ops, as `partition.compile_graph_module`
leaves it) as the function `backends/cuda_graphs.CudaGraphFunction` replays, with
`encloses=True`: one graph over all of it, recorded at the second call, the regions'
own graph functions running plainly inside it (and replaying their own graphs if the
whole graph cannot be captured: logged).

`whole_graph_refusal` says why a graph is not replayed whole; such graphs keep a graph
per region. Only graphs without gradients whose inputs Dynamo's guards pin (the
frame's inputs: sizes, strides, dtypes fixed; `dynamo_backend.frame_inputs`) are
taken, their inputs and values all tensors of static sizes on one CUDA device, with no
op that writes in place (an input written in place would be written in the graph's
copy of it), none that reads memory by strides (`as_strided` of an input would read
the copy's storage) and no host step but packed parameters over the graph's own
inputs (they move the parameters into one buffer at the first call, a plain run, and
later only return a view of it: a replay, which checks that its inputs are where they
were recorded, may skip them; a parameter replaced since is packed again by one plain
run, then recorded in place, `WholeGraph.packed_inputs`); a graph of one launch
(`launches`) runs it directly, as a region of one kernel does: a replay costs more
host time than one launch.
"""

from __future__ import annotations

import logging
import operator
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch.fx import GraphModule, Node
from torch.utils._pytree import tree_leaves

from fuseopt.backends.cuda_graphs import CudaGraphFunction
from fuseopt.frontends.fx.partition import (
    DATA_MOVEMENT,
    STRIDE_DEPENDENT,
    CompiledRegion,
    CompileRecord,
)

logger = logging.getLogger("fuseopt")

VIEWS = DATA_MOVEMENT - {torch.ops.aten.clone.default}
"""The ops of DATA_MOVEMENT whose result may share its first argument's memory (a
`getitem` of a split or unbind, a reshape that can view)."""


class WholeGraph:
    """A compiled ATen graph as `CudaGraphFunction` wants a function: `check` takes the
    inputs as they are (Dynamo's guards checked them), `host` runs the graph."""

    inputs: tuple[Any, ...] = ()
    """No input of dynamic size: the graphs are not kept per shapes."""

    kernels: tuple[Any, ...] = ()
    """The kernels are the regions' (in the compile record)."""

    def __init__(
        self,
        forward: Callable[..., Sequence[Any]],
        name: str,
        packed_inputs: frozenset[int] = frozenset(),
    ):
        self.forward = forward
        self.name = name
        self.packed_inputs = packed_inputs
        """The positions of the inputs packed parameters read (`packed_inputs`): a
        replaced one is packed again by a plain run, not copied (`GraphBook`)."""

    def check(self, inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The inputs, unchecked: the frame's guards pin their sizes, strides and dtypes."""
        return tuple(inputs)

    def host(self, interpret: bool) -> Callable[..., Sequence[torch.Tensor]]:  # noqa: ARG002
        """The graph as a host function `run(*inputs, device=...)`; an output that is not
        a tensor cannot be replayed (a RuntimeError, as a failed capture)."""

        def run(*inputs: torch.Tensor, device: torch.device) -> Sequence[torch.Tensor]:  # noqa: ARG001
            outputs = self.forward(*inputs)
            if not all(isinstance(o, torch.Tensor) for o in outputs):
                raise RuntimeError(f"{self.name} returns a value that is not a tensor")
            return outputs

        return run

    def __call__(self, *inputs: torch.Tensor) -> Sequence[Any]:
        """The graph's plain run."""
        return self.forward(*inputs)


def _nodes(compiled_gm: GraphModule) -> Iterator[Node]:
    """The nodes of `compiled_gm` and of the submodules it calls (regions left eager)."""
    for module in compiled_gm.modules():
        if isinstance(module, GraphModule):
            yield from module.graph.nodes


def launches(compiled_gm: GraphModule, region_kernels: Mapping[str, int]) -> int:
    """The launches one call of `compiled_gm` makes (as `partition.compile_graph_module`
    leaves it): its regions' kernels (`region_kernels`, by function name) and every
    PyTorch op that is not a view or a host step, in it or in an eager submodule."""
    count = 0
    for node in _nodes(compiled_gm):
        if node.op != "call_function":
            continue
        if isinstance(node.target, CompiledRegion):
            count += region_kernels.get(node.target.__name__, 1)
        elif not (
            node.target in DATA_MOVEMENT
            or node.target is operator.getitem
            or getattr(node.target, "host_step", False)
        ):
            count += 1
    return count


def _devices(node: Node) -> set[torch.device]:
    """The devices of the tensors in `node`'s value (nested tuples and lists). A 0-d
    tensor on the CPU counts as none: a constant, or a number an op returns beside its
    results (PyTorch's flash and cuDNN attention return their RNG seed and offset so),
    which a kernel reading it takes as an argument."""
    return {
        t.device
        for t in tree_leaves(node.meta.get("val"))
        if isinstance(t, torch.Tensor) and not (t.dim() == 0 and t.device.type == "cpu")
    }


def packed_inputs(compiled_gm: GraphModule) -> frozenset[int]:
    """The positions among `compiled_gm`'s inputs of those its host steps (packed
    parameters) read."""
    placeholders = [n for n in compiled_gm.graph.nodes if n.op == "placeholder"]
    read = {
        a
        for n in compiled_gm.graph.nodes
        if n.op == "call_function" and getattr(n.target, "host_step", False)
        for a in (*n.args, *n.kwargs.values())
    }
    return frozenset(i for i, p in enumerate(placeholders) if p in read)


def _over_inputs(node: Node, compiled_gm: GraphModule) -> bool:
    """Whether host step `node` (packed parameters) reads only inputs of `compiled_gm`
    itself: a replay skips it, which is right while those inputs stay where the graph
    was recorded with them (the replay checks their addresses), as the parameters it
    packed into one buffer at the first call then are."""
    return node.graph is compiled_gm.graph and all(
        isinstance(a, Node) and a.op == "placeholder" for a in (*node.args, *node.kwargs.values())
    )


def _views_an_input(value: object) -> bool:
    """Whether `value` (a node's argument) is a graph input or a view of one: an op that
    reads it by strides reads the input's storage, which a graph replaying on its own
    copy of the input does not have."""
    while isinstance(value, Node):
        if value.op == "placeholder":
            return True
        if value.op != "call_function" or value.target not in VIEWS or not value.args:
            return False
        value = value.args[0]
    return False


def whole_graph_refusal(
    compiled_gm: GraphModule,
    example_inputs: Sequence[Any],
    region_kernels: Mapping[str, int],
    device_type: str = "cuda",
) -> str | None:
    """None when the compiled inference graph `compiled_gm` (whose placeholders the
    frame's guards pin) is worth replaying as one CUDA graph and can be, else why not
    (module doc). Every input and every value the graph computes (0-d CPU numbers
    aside) must be on one device of `device_type`: kernels on another device would not
    be captured, and work on the CPU would run once, at the recording."""
    if not example_inputs:
        return "no inputs"
    for x in example_inputs:
        if not isinstance(x, torch.Tensor):
            return f"an input is a {type(x).__name__}, not a tensor"
        if any(not isinstance(d, int) for d in (*x.shape, *x.stride())):
            return "an input has a symbolic size or stride"
    devices = {x.device for x in example_inputs}
    for node in _nodes(compiled_gm):
        if node.op in ("call_function", "call_method", "get_attr"):
            devices |= _devices(node)
        if node.op != "call_function":
            continue
        if node.target in STRIDE_DEPENDENT and _views_an_input(node.args[0]):
            return f"{node.target} reads an input's memory by strides"
        schema = getattr(node.target, "_schema", None)
        if schema is not None and schema.is_mutable:
            return f"{node.target} writes in place"
        if getattr(node.target, "host_step", False) and not _over_inputs(node, compiled_gm):
            return f"{node.name} is a host step over values the graph computes"
    if len(devices) != 1 or next(iter(devices)).type != device_type:
        return f"its tensors are on {', '.join(sorted(map(str, devices)))}"
    if launches(compiled_gm, region_kernels) < 2:
        return "one launch"
    return None


def replayed_whole(
    forward: Callable[..., Sequence[Any]],
    compiled_gm: GraphModule,
    name: str,
    example_inputs: Sequence[Any],
    record: CompileRecord,
    pinned_inputs: bool,
) -> Callable[..., Sequence[Any]]:
    """`forward` (of `compiled_gm`, the ATen graph `name`) as one CUDA-graph function
    enclosing its regions' (kept in `record.whole_graphs`), or as it is where
    `whole_graph_refusal` refuses it, or when it is not an inference graph whose inputs
    the frame's guards pin (`pinned_inputs`); logged at DEBUG."""
    refusal = "not a graph without gradients whose inputs the frame's guards pin"
    if pinned_inputs:
        kernels = Counter(k.region for k in record.kernels)
        refusal = whole_graph_refusal(compiled_gm, example_inputs, kernels)
    if refusal is not None:
        logger.debug("fuseopt: %s: not one CUDA graph (%s)", name, refusal)
        return forward
    whole = CudaGraphFunction(WholeGraph(forward, name, packed_inputs(compiled_gm)), encloses=True)
    record.whole_graphs[name] = whole
    return whole


__all__ = ["WholeGraph", "launches", "packed_inputs", "replayed_whole", "whole_graph_refusal"]
