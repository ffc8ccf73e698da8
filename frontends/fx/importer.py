"""The FX importer: an ATen-level `torch.fx.GraphModule` into an nn `func.func`.

Steps:
1. every placeholder (graph input; parameters are inputs in AOTAutograd and
   torch.export graphs) becomes a function argument, typed from its `meta["val"]`;
2. every `call_function` node is converted by its entry in the op table
   (`context.OP_TABLE`), one small converter per ATen op, which emits nn ops located
   at the node's source line;
3. the output node becomes `func.return`.

An op outside the table, or one whose arguments the table cannot take, raises
`UnsupportedOpError` naming the node and its source line; or, with `opaque=True` (what
`fuseopt.export` uses), becomes an `nn.torch_call` of the ATen op.
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
from fuseopt.dialects import nn, torch_call
from fuseopt.dialects.dtypes import UnsupportedTypeError
from fuseopt.frontends.fx import (  # noqa: F401 - importing fills the op table
    ops_attention,
    ops_creation,
    ops_elementwise,
    ops_indexing,
    ops_linalg,
    ops_loss,
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


def import_node(
    block: Block, env: dict[Node, Imported], node: Node, opaque: bool = False
) -> Imported:
    """Convert one `call_function` node, emitting its nn ops at the end of `block`.

    With `opaque`, an op without an nn lowering (or one its converter refuses) becomes
    an `nn.torch_call` instead of an UnsupportedOpError, when its arguments can be
    written (see `opaque_call`)."""
    converter = OP_TABLE.get(node.target)
    if converter is None:
        if opaque:
            return opaque_call(block, env, node, "no nn lowering for this op")
        raise UnsupportedOpError(node, "no nn lowering for this op")
    if not opaque:
        return converter(ImportContext(block, env, node), node)
    mark = block.last_op
    try:
        return converter(ImportContext(block, env, node), node)
    except UnsupportedOpError as e:
        while block.last_op is not mark:  # drop what the converter emitted before failing
            block.last_op.detach()  # type: ignore[union-attr]
        return opaque_call(block, env, node, e.reason)


def opaque_call(block: Block, env: dict[Node, Imported], node: Node, why: str) -> Imported:
    """`node` as an `nn.torch_call`: its ATen op and arguments, tensors as operands.
    An UnsupportedOpError (saying `why` it has no lowering) when it cannot be written:
    not an ATen op, an argument of another kind, a result that is not a tensor."""
    operands: list[SSAValue] = []
    index: dict[Node, int] = {}

    def operand(v: object) -> int | None:
        if not isinstance(v, Node):
            return None
        value = env.get(v)
        if not isinstance(value, SSAValue):
            raise torch_call.CallEncodingError(f"argument {v.name} is not a tensor value")
        if v not in index:
            index[v] = len(operands)
            operands.append(value)
        return index[v]

    target = str(node.target)
    if not torch_call.TARGET.fullmatch(target):
        raise UnsupportedOpError(node, f"{why}; and not an ATen op, so not kept as a call")
    try:
        call = torch_call.encode(node.args, dict(node.kwargs), operand)
        val = node.meta.get("val")
        results = list(val) if isinstance(val, tuple | list) else [val]
        types = [tensor_type(r) for r in results]
    except (torch_call.CallEncodingError, UnsupportedTypeError) as e:
        raise UnsupportedOpError(node, f"{why}; and it cannot be kept as a call: {e}") from None
    op = nn.TorchCallOp(target, call, operands, types)
    ctx = ImportContext(block, env, node)
    ctx.emit(op)
    return tuple(op.outputs) if isinstance(val, tuple | list) else op.outputs[0]


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


def import_graph(
    gm: GraphModule | torch.fx.Graph, func_name: str = "forward", opaque: bool = False
) -> ModuleOp:
    """Import an ATen FX graph as `func.func @func_name` in a new, verified module
    (with `opaque`, ops without an nn lowering become `nn.torch_call`s)."""
    graph = gm.graph if isinstance(gm, GraphModule) else gm
    block = Block()
    env: dict[Node, Imported] = {}
    returned: list[SSAValue] = []
    for node in graph.nodes:
        if node.op == "placeholder":
            env[node] = placeholder_value(block, node)
        elif node.op == "call_function":
            env[node] = import_node(block, env, node, opaque)
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
