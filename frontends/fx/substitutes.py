"""Calls replaced in Dynamo's graph before AOTAutograd traces it.

Dynamo hands fuseopt a torch-level graph; AOTAutograd then traces it down to ATen,
decomposing composites on the way. Where fuseopt wants a call traced another way
(`norm_decompositions`: InstanceNorm's own form; `attention_call`: SDPA kept as one op),
it changes the call's target first, on a copy of the graph.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from torch.fx import GraphModule


def substitute_calls(gm: GraphModule, targets: Mapping[Callable[..., Any], Any]) -> GraphModule:
    """Dynamo's graph `gm` with each call of a key of `targets` calling its value
    instead: a new GraphModule (sharing `gm`'s parameters and submodules) over a copy of
    its graph, so that `gm` itself, which Dynamo and other backends may still hold, keeps
    PyTorch's calls; `gm` itself when it has none."""
    if not any(n.op == "call_function" and n.target in targets for n in gm.graph.nodes):
        return gm
    graph = copy.deepcopy(gm.graph)
    for node in graph.nodes:
        if node.op == "call_function" and node.target in targets:
            node.target = targets[node.target]
    return GraphModule(gm, graph)
