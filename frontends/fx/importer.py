"""The FX importer: an ATen-level `torch.fx.GraphModule` into an nn `func.func`.

Steps:
1. every placeholder (graph input; parameters are inputs in AOTAutograd and
   torch.export graphs) becomes a function argument, typed from its `meta["val"]`;
2. every `call_function` node is converted by its entry in the op table
   (`context.OP_TABLE`), one small converter per ATen op, which emits nn ops located
   at the node's source line;
3. the output node becomes `func.return`.

An op outside the table, or one whose arguments the table cannot take, raises
`UnsupportedOpError` naming the node and its source line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import torch
from torch.fx import GraphModule, Node
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region, SSAValue

from fuseopt.diagnostics import verify_module
from fuseopt.dialects.dtypes import UnsupportedTypeError
from fuseopt.frontends.fx import (  # noqa: F401 - importing fills the op table
    ops_attention,
    ops_creation,
    ops_elementwise,
    ops_linalg,
    ops_reduction,
    ops_shape,
)
from fuseopt.frontends.fx.context import OP_TABLE, ImportContext, Imported
from fuseopt.frontends.fx.errors import UnsupportedOpError
from fuseopt.frontends.fx.types import tensor_type

_NAME = re.compile(r"[^A-Za-z0-9_$.]")


def ssa_name(name: str) -> str:
    """A valid MLIR SSA name hint from an FX node name."""
    cleaned = _NAME.sub("_", name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"v{cleaned}"


def import_node(block: Block, env: dict[Node, Imported], node: Node) -> Imported:
    """Convert one `call_function` node, emitting its nn ops at the end of `block`."""
    converter = OP_TABLE.get(node.target)
    if converter is None:
        raise UnsupportedOpError(node, "no nn lowering for this op")
    return converter(ImportContext(block, env, node), node)


def placeholder_value(block: Block, node: Node) -> SSAValue:
    """A new block argument for a placeholder, typed from its example value."""
    try:
        t = tensor_type(node.meta.get("val"))
    except UnsupportedTypeError as e:
        raise UnsupportedOpError(node, f"graph input: {e}") from None
    arg = block.insert_arg(t, len(block.args))
    arg.name_hint = ssa_name(node.name)
    return arg


def output_values(env: dict[Node, Imported], output: Node) -> list[SSAValue]:
    """The values an output node returns (flattening nested lists and tuples)."""
    values: list[SSAValue] = []
    for item in _flatten(output.args[0]):
        v = env.get(item) if isinstance(item, Node) else None
        if not isinstance(v, SSAValue):
            raise UnsupportedOpError(output, f"graph output {item!r} is not a tensor value")
        values.append(v)
    return values


def _flatten(value: object) -> Iterable[object]:
    if isinstance(value, list | tuple):
        for v in value:
            yield from _flatten(v)
    else:
        yield value


def import_graph(gm: GraphModule | torch.fx.Graph, func_name: str = "forward") -> ModuleOp:
    """Import an ATen FX graph as `func.func @func_name` in a new, verified module."""
    graph = gm.graph if isinstance(gm, GraphModule) else gm
    block = Block()
    env: dict[Node, Imported] = {}
    returned: list[SSAValue] = []
    for node in graph.nodes:
        if node.op == "placeholder":
            env[node] = placeholder_value(block, node)
        elif node.op == "call_function":
            env[node] = import_node(block, env, node)
        elif node.op == "output":
            returned = output_values(env, node)
        else:
            raise UnsupportedOpError(node, f"'{node.op}' nodes are not supported")
    block.add_op(func.ReturnOp(*returned))
    fn = func.FuncOp(
        func_name,
        ([a.type for a in block.args], [v.type for v in returned]),
        Region(block),
    )
    module = ModuleOp([fn])
    verify_module(module)
    return module
