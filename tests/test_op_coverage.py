"""Every nn op is covered by every per-op table, or listed as an explicit exception.

The nn dialect (`dialects/nn.py`) is the one list of ops. The tables that must follow it:
- the FX frontend (frontends/fx/*.py and the NNBuilder it shares with nn-decompose):
  the ops it can produce, read from the nn classes its source names;
- the reference interpreter (`NNFunctions`' registered implementations);
- the Triton printer: elementwise ops on tiles (`op_table.TRITON_OPS` plus the ops the
  kernel printer prints itself) and whole-tensor kernels printed with torch
  (`torch_fallback`);
- the CUDA printer: elementwise ops on tiles (`op_table.FLOAT_UNARY` / `FLOAT_BINARY`
  plus the emitter's own rules) and whole-tensor kernels (`whole_tensor`, `shape_ops`).
Removing an entry from any of them fails this test; an op added to the dialect fails
it until every table covers it or the op is listed in an EXCEPTIONS table with why.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from xdsl.ir import Operation

from fuseopt.backends.cuda import op_table as cuda_table
from fuseopt.backends.triton import op_table as triton_table
from fuseopt.dialects import nn
from fuseopt.interpreter.nn_semantics import NNFunctions

ROOT = Path(__file__).resolve().parents[1]

ALL_OPS: tuple[type[Operation], ...] = tuple(nn.NN.operations)
ELEMENTWISE = tuple(op for op in ALL_OPS if issubclass(op, nn.ELEMENTWISE_OPS))
"""Ops applied element by element: printed on tiles by both backends."""
REDUCTIONS = nn.REDUCTION_OPS
SHAPE_OPS = (nn.ReshapeOp, nn.TransposeOp, nn.SliceOp, nn.BroadcastOp, nn.ConcatOp)
"""Data movement: indexing inside fused kernels, whole-tensor kernels otherwise."""
WHOLE_TENSOR = (*ELEMENTWISE, *REDUCTIONS, *SHAPE_OPS, nn.CumsumOp)
"""What a whole-tensor kernel may hold (one op the tiler cannot index)."""

FRONTEND_EXCEPTIONS = {
    nn.FusionOp: "made by nn-fuse, never imported",
    nn.YieldOp: "the terminator of nn.fusion, made by nn-fuse",
}
INTERPRETER_EXCEPTIONS = {
    nn.YieldOp: "run by the nn.fusion implementation as its body's terminator",
}
TILE_PRINTER_EXCEPTIONS: dict[type[Operation], str] = {}
"""Elementwise ops a printer may not print on tiles (none)."""


def _named_in(paths: list[Path]) -> set[str]:
    names: set[str] = set()
    for p in paths:
        names.update(re.findall(r"\bnn\.([A-Z][A-Za-z0-9]*Op)\b", p.read_text()))
    return names


def _source(*rel: str) -> list[Path]:
    return [ROOT / r for r in rel]


def _missing(
    ops: tuple[type[Operation], ...], covered: set[type[Operation]], exceptions
) -> list[str]:
    return sorted(op.__name__ for op in ops if op not in covered and op not in exceptions)


def test_the_dialect_lists_are_complete() -> None:
    """Every op falls in one of the classes below (so none escapes the checks)."""
    known = {*ELEMENTWISE, *REDUCTIONS, *SHAPE_OPS, *nn.COMPOSITE_OPS}
    known |= {nn.ConstantOp, nn.MatmulOp, nn.FusionOp, nn.YieldOp}
    # one op with its own schedule (one flash-attention kernel, never fused with others)
    known |= {nn.AttentionOp}
    # a host-level call of a PyTorch op: lowered to tile.torch_call, never into a kernel
    known |= {nn.TorchCallOp}
    # a gather by flat position: elementwise in its index, `tile.gather` in any kernel
    known |= {nn.TakeOp}
    # a scan: never fused, a whole-tensor kernel of its own
    known |= {nn.CumsumOp}
    assert not [op.__name__ for op in ALL_OPS if op not in known]


def test_the_frontend_can_produce_every_op() -> None:
    paths = sorted((ROOT / "frontends" / "fx").glob("*.py")) + _source("passes/nn_builder.py")
    named = _named_in(paths)
    covered = {op for op in ALL_OPS if op.__name__ in named}
    # a base class named by the frontend (nn.ReductionOp...) covers nothing by itself
    assert not _missing(ALL_OPS, covered, FRONTEND_EXCEPTIONS)


def test_the_interpreter_runs_every_op() -> None:
    covered = {op for op, _ in NNFunctions._impls()}
    assert not _missing(ALL_OPS, covered, INTERPRETER_EXCEPTIONS)


def test_the_triton_printer_prints_every_elementwise_op_on_tiles() -> None:
    printer_rules = _named_in(_source("backends/triton/kernel_printer.py"))
    covered = set(triton_table.TRITON_OPS) | {
        op for op in ELEMENTWISE if op.__name__ in printer_rules
    }
    assert not _missing(ELEMENTWISE, covered, TILE_PRINTER_EXCEPTIONS)


def test_the_cuda_printer_prints_every_elementwise_op_on_tiles() -> None:
    emitter_rules = _named_in(_source("backends/cuda/kernel_emitter.py"))
    emitter_rules |= set(
        re.findall(r"\bnn\.([A-Z][A-Za-z0-9]*Op)\b", inspect.getsource(cuda_table.unary))
    )
    covered = (
        set(cuda_table.FLOAT_UNARY)
        | set(cuda_table.FLOAT_BINARY)
        | {op for op in ELEMENTWISE if op.__name__ in emitter_rules}
    )
    assert not _missing(ELEMENTWISE, covered, TILE_PRINTER_EXCEPTIONS)


@pytest.mark.parametrize(
    "backend,files",
    [
        ("triton", ("backends/triton/torch_fallback.py",)),
        ("cuda", ("backends/cuda/whole_tensor.py", "backends/cuda/shape_ops.py")),
    ],
)
def test_whole_tensor_kernels_cover_every_op_they_may_hold(
    backend: str, files: tuple[str, ...]
) -> None:
    named = _named_in(_source(*files))
    if backend == "triton":
        from fuseopt.backends.triton import torch_fallback

        tables = {**torch_fallback.UNARY, **torch_fallback.REDUCTIONS}
        named |= {op.__name__ for op in tables}
    covered = {
        op
        for op in WHOLE_TENSOR
        if any(base.__name__ in named for base in op.__mro__ if base.__module__ == nn.__name__)
    }
    assert not _missing(WHOLE_TENSOR, covered, {})
