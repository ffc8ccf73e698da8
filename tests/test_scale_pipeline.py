"""Long graphs through the standard pipeline: no recursion limit, no quadratic pass.

- a 350-op elementwise chain goes through `fuse-opt --pipeline standard -t triton` (the
  tiling emitter once recursed once per op and died at Python's recursion limit);
- a few thousand ops (a plain chain, a mixed chain with second inputs, broadcasts and
  reductions, a wide graph of independent branches) go through `run_pipeline` within a
  generous bound on CPU time: nn-fuse once re-checked the whole group on every merge
  (2,000 ops took 32 s, 10,000 more than 10 minutes; now about 1 s and 6 s here);
- a hand-written fusion of 3,000 ops that does not tile whole is split into runs in
  linear time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.ir import Block, Operation, SSAValue

import fuseopt
from fuseopt.cli import main
from fuseopt.dialects import nn, tile
from fuseopt.pipelines import STANDARD

UNARY = (nn.ExpOp, nn.TanhOp, nn.SigmoidOp, nn.SinOp, nn.CosOp)
"""Unary ops that canonicalize leaves alone when chained (no x - x, no neg(neg(x)))."""

CPU_SECONDS = 30.0
"""The bound on each graph below: ten times what they take on a 2-core CI machine, and
a fraction of what the quadratic nn-fuse took."""

ROWS, COLS = 64, 128
MATRIX = TensorType(f32, [ROWS, COLS])
ROW = TensorType(f32, [COLS])


def chain_text(n: int) -> str:
    """A function applying `n` unary ops in a row to its argument, as text."""
    t = f"tensor<{ROWS}x{COLS}xf32>"
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


def add(block: Block, op: Operation) -> SSAValue:
    """Append `op` to `block`; its result."""
    block.add_op(op)
    return op.results[0]


def chain(n: int) -> ModuleOp:
    """`n` unary ops in a row."""

    def body(block: Block) -> list[SSAValue]:
        x = block.args[0]
        for i in range(n):
            x = add(block, UNARY[i % len(UNARY)](x))
        return [x]

    return build_function([MATRIX], body)


def mixed_chain(n: int, reduce_every: int = 300) -> ModuleOp:
    """About `n` ops in a row: unary ops, an add of a second input, a multiply by a
    broadcast row, and every `reduce_every` ops a row sum subtracted back (x - sum(x))."""

    def body(block: Block) -> list[SSAValue]:
        x, y, w = block.args
        count = 0
        while count < n:
            step = count % 7
            if step == 5:
                x = add(block, nn.AddOp(x, y))
            elif step == 6:
                x = add(block, nn.MulOp(x, add(block, nn.BroadcastOp(w, MATRIX))))
                count += 1
            else:
                x = add(block, UNARY[step](x))
            count += 1
            if count % reduce_every == 0:
                total = add(block, nn.SumOp(x, [1], keepdim=True))
                x = add(block, nn.SubOp(x, add(block, nn.BroadcastOp(total, MATRIX))))
                count += 3
        return [x]

    return build_function([MATRIX, MATRIX, ROW], body)


def wide(n: int, length: int = 10) -> ModuleOp:
    """`n / length` independent branches of `length` ops from one argument, each
    returned (each starts with a multiply by its own constant, so cse keeps them)."""

    def body(block: Block) -> list[SSAValue]:
        outs = []
        for b in range(n // length):
            scale = add(block, nn.ConstantOp(float(b + 2), MATRIX))
            x = add(block, nn.MulOp(block.args[0], scale))
            for i in range(length - 2):
                x = add(block, UNARY[(b + i) % len(UNARY)](x))
            outs.append(x)
        return outs

    return build_function([MATRIX], body)


def test_350_op_chain_prints_as_triton(tmp_path: Path) -> None:
    src, out = tmp_path / "chain.mlir", tmp_path / "chain.py"
    src.write_text(chain_text(350))
    assert main([str(src), "--pipeline", "standard", "-t", "triton", "-o", str(out)]) == 0
    text = out.read_text()
    assert text.count("def fused_") == 1, "one fused kernel"
    assert text.count("tl.sin(") >= 70


def test_2000_op_chain_prints_as_cuda(tmp_path: Path) -> None:
    """The CUDA printer's emission order walks operands with an explicit stack (it
    recursed once per op and failed past about 990)."""
    src, out = tmp_path / "chain.mlir", tmp_path / "chain.cu"
    src.write_text(chain_text(2000))
    assert main([str(src), "--pipeline", "standard", "-t", "cuda", "-o", str(out)]) == 0
    assert out.read_text().count("__global__") == 1


@pytest.mark.parametrize(
    "name, build",
    [
        ("chain of 3,000", lambda: chain(3000)),
        ("mixed chain of 2,500", lambda: mixed_chain(2500)),
        ("2,500 ops in 250 branches", lambda: wide(2500)),
    ],
)
def test_thousands_of_ops_through_the_standard_pipeline(
    name: str, build: Callable[[], ModuleOp]
) -> None:
    module = build()
    ops = sum(1 for _ in module.walk())
    start = time.process_time()
    fuseopt.run_pipeline(module, STANDARD)
    seconds = time.process_time() - start
    assert seconds < CPU_SECONDS, f"{name} ({ops} ops): {seconds:.1f} s of CPU"
    kernels = [op for op in module.walk() if isinstance(op, tile.KernelOp)]
    assert len(kernels) == 1, "each graph fuses into one kernel"


def hand_written_fusion_text(n: int) -> str:
    """A function holding one hand-written nn.fusion: `n` unary ops, then a transpose
    that the tiler cannot index in the same kernel (so convert-nn-to-tile splits the
    fusion into runs that tile, growing each run an op at a time)."""
    t, tt = f"tensor<{ROWS}x{COLS}xf32>", f"tensor<{COLS}x{ROWS}xf32>"
    attrs = 'kernel_name = "hand", kind = "pointwise", route = "kernel"'
    lines = [
        f"func.func @main(%x: {t}) -> {tt} {{",
        f"  %0 = nn.fusion ins(%x : {t}) -> {tt} attributes {{{attrs}}} {{",
        f"  ^bb0(%a0: {t}):",
    ]
    for i in range(n):
        lines.append(f"    %a{i + 1} = {UNARY[i % len(UNARY)].name} %a{i} : {t}")
    lines += [
        f"    %r = nn.transpose %a{n} [1, 0] : {t} -> {tt}",
        f"    %q = nn.reshape %r : {tt} -> tensor<{ROWS * COLS}xf32>",
        f"    %s = nn.reshape %q : tensor<{ROWS * COLS}xf32> -> {tt}",
        f"    nn.yield %s : {tt}",
        "  }",
        f"  func.return %0 : {tt}",
        "}",
        "",
    ]
    return "\n".join(lines)


def test_hand_written_fusion_of_thousands_of_ops_splits_in_linear_time() -> None:
    """Splitting a fusion that does not tile whole once analyzed every longer prefix of
    each run again: 3,000 ops took 25 s of CPU."""
    module = fuseopt.parse(hand_written_fusion_text(3000))
    start = time.process_time()
    fuseopt.run_pipeline(module, "convert-nn-to-tile")
    seconds = time.process_time() - start
    assert seconds < CPU_SECONDS / 3, f"{seconds:.1f} s of CPU"
    kernels = [op for op in module.walk() if isinstance(op, tile.KernelOp)]
    assert len(kernels) == 2, "the chain, then the transpose"
