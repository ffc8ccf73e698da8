"""Long graphs through the standard pipeline: no recursion limit, no quadratic pass.

- a 350-op elementwise chain goes through `fuse-opt --pipeline standard -t triton` (the
  tiling emitter once recursed once per op and died at Python's recursion limit);
- a few thousand ops (a plain chain, a mixed chain with second inputs, broadcasts and
  reductions, a wide graph of independent branches) go through `run_pipeline` within a
  generous time bound: nn-fuse once re-checked the whole group on every merge (2,000
  ops took 32 s).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, SSAValue

from fuseopt.cli import main
from fuseopt.dialects import nn

UNARY = (nn.ExpOp, nn.TanhOp, nn.SigmoidOp, nn.SinOp, nn.CosOp)
"""Unary ops that canonicalize leaves alone when chained (no x - x, no neg(neg(x)))."""


def chain_text(n: int, shape: tuple[int, int] = (64, 128)) -> str:
    """A function applying `n` unary ops in a row to its argument, as text."""
    t = f"tensor<{shape[0]}x{shape[1]}xf32>"
    lines = [f"func.func @chain(%x0: {t}) -> {t} {{"]
    for i in range(n):
        name = UNARY[i % len(UNARY)].name
        lines.append(f"  %x{i + 1} = {name} %x{i} : {t}")
    lines += [f"  func.return %x{n} : {t}", "}", ""]
    return "\n".join(lines)


def build_function(
    arg_types: list[TensorType], body: Callable[[Block], list[SSAValue]]
) -> ModuleOp:
    """A module with one function `@main(arg_types)` whose body `body(block)` appends
    ops to the block and returns the values the function returns."""
    block = Block(arg_types=arg_types)
    results = body(block)
    block.add_op(func.ReturnOp(*results))
    fn = func.FuncOp("main", (arg_types, [v.type for v in results]))
    fn.body.detach_block(fn.body.block)
    fn.body.add_block(block)
    return ModuleOp([fn])


def test_350_op_chain_prints_as_triton(tmp_path: Path) -> None:
    src, out = tmp_path / "chain.mlir", tmp_path / "chain.py"
    src.write_text(chain_text(350))
    assert main([str(src), "--pipeline", "standard", "-t", "triton", "-o", str(out)]) == 0
    text = out.read_text()
    assert text.count("def fused_") == 1, "one fused kernel"
    assert text.count("tl.sin(") >= 70
