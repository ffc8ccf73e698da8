"""Semantics of the tile dialect, as xDSL interpreter functions over NumPy.

Buffers (memrefs) are contiguous NumPy arrays shared by reference, stored like nn
tensors of their element type (see `dtypes`). `tile.launch` runs the kernel's body once
per program of the grid, in row-major program order; tiles are NumPy arrays, and nn ops
on tiles run with the nn reference semantics. Out-of-bounds loads read the fill value
and out-of-bounds stores are dropped, exactly as a GPU backend masks them, so a tiling
bug (a missing mask, a wrong offset) shows up as a wrong result, never as a silent pass.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import MemRefType, ModuleOp, TensorType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.scf import ScfFunctions
from xdsl.ir import SSAValue

from fuseopt.dialects import tile
from fuseopt.dialects.syntax import array_values, is_float
from fuseopt.dialects.tile_host import read_host
from fuseopt.interpreter.dtypes import compute_dtype, storage_dtype, to_element_type, to_tensor
from fuseopt.interpreter.nn_semantics import NNFunctions
from fuseopt.interpreter.torch_calls import run_torch_call


class TileRuntimeError(ValueError):
    """A tile program did something a GPU would not allow (bad view, bad launch)."""


def _box(
    offsets: Sequence[int], shape: Sequence[int], box: Sequence[int]
) -> tuple[tuple[slice, ...], tuple[slice, ...]] | None:
    """Buffer and tile index expressions for the in-bounds part of a box (None if empty).

    The box covers the trailing `len(box)` dims of a buffer of `shape`; leading dims
    are addressed by their offset alone.
    """
    lead = len(shape) - len(box)
    buf_index: list[slice | int] = []
    for o, n in zip(offsets[:lead], shape[:lead], strict=True):
        if not 0 <= o < n:
            return None
        buf_index.append(slice(o, o + 1))
    tile_index = []
    for o, n, b in zip(offsets[lead:], shape[lead:], box, strict=True):
        lo, hi = max(o, 0), min(o + b, n)
        if lo >= hi:
            return None
        buf_index.append(slice(lo, hi))
        tile_index.append(slice(lo - o, hi - o))
    return tuple(buf_index), tuple(tile_index)  # type: ignore[return-value]


def _shape(t: object) -> tuple[int, ...]:
    assert isinstance(t, TensorType | MemRefType)
    return tuple(t.get_shape())


def reinterpret(buffer: np.ndarray, t: MemRefType, offset: int = 0) -> np.ndarray:
    """`buffer` viewed with the shape of `t`, from `offset` elements in (same storage; a
    TileRuntimeError otherwise); a strided `t` (a kernel parameter) views the elements
    its layout names."""
    shape = _shape(t)
    if any(n < 0 for n in shape):  # one dynamic dim (the verifier says so): the rest
        known = math.prod(n for n in shape if n >= 0)
        shape = tuple(buffer.size // max(known, 1) if n < 0 else n for n in shape)
    flat = buffer.reshape(-1)  # a view exactly when the buffer is contiguous
    if buffer.size and not np.shares_memory(flat, buffer):
        raise TileRuntimeError(f"cannot view a non-contiguous buffer as {t}")
    layout = tile.strided_layout(t)
    if layout is not None:  # a strided view of the buffer's elements (a kernel parameter)
        strides, start = layout
        items = flat.itemsize
        return np.lib.stride_tricks.as_strided(
            flat[offset + start :], shape, tuple(s * items for s in strides)
        )
    return flat[offset : offset + math.prod(shape)].reshape(shape)


UNWRITTEN = (math.nan, 0)
"""What fresh buffers hold by default (float, integer): NaN shows an unwritten read."""


def new_buffer(t: MemRefType, unwritten: tuple[float, int] = UNWRITTEN) -> np.ndarray:
    """A fresh buffer of type `t`, holding `unwritten` (float value, integer value)."""
    dtype = storage_dtype(t.element_type)
    float_value, int_value = unwritten
    if dtype.kind == "f":
        return np.full(_shape(t), float_value, dtype=dtype)
    return np.full(_shape(t), bool(int_value) if dtype.kind == "b" else int_value, dtype=dtype)


@register_impls
class TileFunctions(InterpreterFunctions):
    """Interpreter implementations of every tile op (and arith.minsi, which the
    kernels' index arithmetic uses and xDSL's arith interpreter lacks)."""

    def __init__(self, unwritten: tuple[float, int] = UNWRITTEN) -> None:
        super().__init__()
        self._program_ids: list[tuple[int, ...]] = []
        self.unwritten = unwritten
        """What fresh temporaries hold (see `new_buffer`)."""

    # ----------------------------------------------------------------- host

    @impl(tile.LaunchOp)
    def run_launch(self, interpreter: Interpreter, op: tile.LaunchOp, args: PythonValues):
        kernel = op.callee()
        computed = iter(args[: len(op.dynamic_grid)])
        grid = [next(computed) if isinstance(n, SSAValue) else n for n in op.grid_sizes]
        buffers = tuple(
            np.asarray(a) if tile.is_dynamic(t) else reinterpret(np.asarray(a), t)
            for a, t in zip(args[len(op.dynamic_grid) :], kernel.param_types, strict=True)
        )
        for pid in itertools.product(*(range(n) for n in grid)):
            self._program_ids.append(pid)
            try:
                interpreter.run_ssacfg_region(kernel.body, buffers, kernel.sym_name.data)
            finally:
                self._program_ids.pop()
        return ()

    @impl(tile.AllocOp)
    def run_alloc(self, interpreter: Interpreter, op: tile.AllocOp, args: PythonValues):
        t = op.result.type
        assert isinstance(t, MemRefType)
        sizes = iter(args)
        shape = [next(sizes) if n < 0 else n for n in t.get_shape()]
        return (new_buffer(MemRefType(t.element_type, shape), self.unwritten),)

    @impl(tile.ViewOp)
    def run_view(self, interpreter: Interpreter, op: tile.ViewOp, args: PythonValues):
        assert isinstance(op.result.type, MemRefType)
        return (reinterpret(np.asarray(args[0]), op.result.type, op.element_offset),)

    @impl(tile.GemmOp)
    def run_gemm(self, interpreter: Interpreter, op: tile.GemmOp, args: PythonValues):
        a, b, out = (np.asarray(x) for x in args[:3])
        a, b = compute_dtype(a), compute_dtype(b)
        if op.transpose_a is not None:
            a = np.swapaxes(a, -1, -2)
        if op.transpose_b is not None:
            b = np.swapaxes(b, -1, -2)
        assert isinstance(op.out.type, MemRefType)
        product = np.matmul(a, b)
        if op.bias is not None:  # added before the one rounding (cuBLAS's epilogue)
            product = product + compute_dtype(np.asarray(args[3]))
        out[...] = to_element_type(product, op.out.type.element_type)
        return ()

    @impl(tile.TorchCallOp)
    def run_torch_call(self, interpreter: Interpreter, op: tile.TorchCallOp, args: PythonValues):
        ins, outs = args[: len(op.ins)], args[len(op.ins) :]
        elements = [v.type.element_type for v in op.ins]  # type: ignore[attr-defined]
        out_elements = [v.type.element_type for v in op.outs]  # type: ignore[attr-defined]
        results = run_torch_call(op.target.data, op.call.data, ins, elements, out_elements)
        for out, value in zip(outs, results, strict=True):
            out = np.asarray(out)
            out[...] = value.reshape(out.shape)
        return ()

    # ----------------------------------------------------------------- kernels

    @impl_terminator(tile.ReturnOp)
    def run_return(
        self, interpreter: Interpreter, op: tile.ReturnOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(()), ()

    @impl(tile.DimOp)
    def run_dim(self, interpreter: Interpreter, op: tile.DimOp, args: PythonValues):
        return (np.asarray(args[0]).shape[op.index],)

    @impl(tile.ProgramIdOp)
    def run_program_id(self, interpreter: Interpreter, op: tile.ProgramIdOp, args: PythonValues):
        if not self._program_ids:
            raise TileRuntimeError("tile.program_id outside a launched kernel")
        return (self._program_ids[-1][op.axis.value.data],)

    @impl(tile.LoadOp)
    def run_load(self, interpreter: Interpreter, op: tile.LoadOp, args: PythonValues):
        buf, *offsets = args
        buf = np.asarray(buf)
        box = _shape(op.result.type)
        assert isinstance(op.result.type, TensorType)
        element = op.result.type.element_type
        fill = op.fill_value if is_float(element) else int(op.fill_value)
        out = np.full(box, fill, dtype=buf.dtype)
        where = _box(offsets, buf.shape, box)
        if where is not None:
            buf_index, tile_index = where
            out[tile_index] = buf[buf_index].reshape(out[tile_index].shape)
        return (out,)

    @impl(tile.GatherOp)
    def run_gather(self, interpreter: Interpreter, op: tile.GatherOp, args: PythonValues):
        buf, index = np.asarray(args[0]).reshape(-1), np.asarray(args[1], dtype=np.int64)
        inside = (index >= 0) & (index < buf.size)
        out = np.zeros(index.shape, dtype=buf.dtype)
        out[inside] = buf[index[inside]]
        return (out,)

    @impl(tile.StoreOp)
    def run_store(self, interpreter: Interpreter, op: tile.StoreOp, args: PythonValues):
        value, buf, *offsets = args
        buf, value = np.asarray(buf), np.asarray(value)
        where = _box(offsets, buf.shape, value.shape)
        if where is not None:
            buf_index, tile_index = where
            target = buf[buf_index]
            target[...] = value[tile_index].reshape(target.shape)
        return ()

    @impl(tile.MaskOp)
    def run_mask(self, interpreter: Interpreter, op: tile.MaskOp, args: PythonValues):
        shape = _shape(op.result.type)
        mask = np.ones(shape, dtype=bool)
        offsets, computed = args[: len(op.offsets)], iter(args[len(op.offsets) :])
        bounds = [next(computed) if isinstance(b, SSAValue) else b for b in op.bound_sizes]
        for d, (o, bound, n) in enumerate(zip(offsets, bounds, shape, strict=True)):
            ok = (np.arange(n) + o) < bound
            mask &= ok.reshape([n if i == d else 1 for i in range(len(shape))])
        return (mask,)

    @impl(tile.IotaOp)
    def run_iota(self, interpreter: Interpreter, op: tile.IotaOp, args: PythonValues):
        t = op.result.type
        assert isinstance(t, TensorType)
        n = _shape(t)
        positions = np.arange(n[0], dtype=np.int64) if n else np.int64(0)
        values = op.start_value + op.step_value * (positions + int(args[0]))
        return (to_element_type(np.asarray(values), t.element_type),)

    @impl(tile.CopyOp)
    def run_copy(self, interpreter: Interpreter, op: tile.CopyOp, args: PythonValues):
        src, dst = np.asarray(args[0]), np.asarray(args[1])
        n_src = len(op.src_offsets)
        src_off, dst_off = args[2 : 2 + n_src], args[2 + n_src :]
        box = array_values(op.shape)
        staged = np.full(box, np.nan if src.dtype.kind == "f" else 0, dtype=src.dtype)
        valid = np.zeros(box, dtype=bool)
        if (w := _box(src_off, src.shape, box)) is not None:
            staged[w[1]] = src[w[0]].reshape(staged[w[1]].shape)
            valid[w[1]] = True
        if (w := _box(dst_off, dst.shape, box)) is not None:
            target = dst[w[0]]
            part, ok = staged[w[1]].reshape(target.shape), valid[w[1]].reshape(target.shape)
            target[ok] = part[ok]
        return ()

    @impl(tile.BarrierOp)
    def run_barrier(self, interpreter: Interpreter, op: tile.BarrierOp, args: PythonValues):
        return ()

    # ----------------------------------------------------------------- tile math

    @impl(tile.DotOp)
    def run_dot(self, interpreter: Interpreter, op: tile.DotOp, args: PythonValues):
        a, b, acc = (compute_dtype(np.asarray(x)) for x in args)
        assert isinstance(op.result.type, TensorType)
        return (to_element_type(acc + np.matmul(a, b), op.result.type.element_type),)

    @impl(tile.ReduceOp)
    def run_reduce(self, interpreter: Interpreter, op: tile.ReduceOp, args: PythonValues):
        x = compute_dtype(np.asarray(args[0]))
        fn = {"sum": np.sum, "max": np.max, "min": np.min}[op.kind.data]
        assert isinstance(op.result.type, TensorType)
        with np.errstate(all="ignore"):
            r = to_element_type(fn(x, axis=op.axis_index), op.result.type.element_type)
        return (np.asarray(r).reshape(_shape(op.result.type)),)

    @impl(tile.BroadcastOp)
    def run_broadcast(self, interpreter: Interpreter, op: tile.BroadcastOp, args: PythonValues):
        x = np.asarray(args[0])
        shape = _shape(op.result.type)
        dims = array_values(op.dims)
        expanded = [1] * len(shape)
        for i, d in enumerate(dims):
            expanded[d] = x.shape[i]
        return (np.broadcast_to(x.reshape(expanded), shape).copy(),)

    @impl(tile.TransposeOp)
    def run_transpose(self, interpreter: Interpreter, op: tile.TransposeOp, args: PythonValues):
        return (np.transpose(np.asarray(args[0]), array_values(op.permutation)).copy(),)

    @impl(arith.MinSIOp)
    def run_minsi(self, interpreter: Interpreter, op: arith.MinSIOp, args: PythonValues):
        return (min(args[0], args[1]),)

    @impl(arith.MaxSIOp)
    def run_maxsi(self, interpreter: Interpreter, op: arith.MaxSIOp, args: PythonValues):
        return (max(args[0], args[1]),)

    # sizes are non-negative: the unsigned forms the host computes grids with
    @impl(arith.CeilDivUIOp)
    def run_ceildivui(self, interpreter: Interpreter, op: arith.CeilDivUIOp, args: PythonValues):
        return (-(-args[0] // args[1]),)

    @impl(arith.CeilDivSIOp)
    def run_ceildivsi(self, interpreter: Interpreter, op: arith.CeilDivSIOp, args: PythonValues):
        return (-(-args[0] // args[1]),)

    @impl(arith.DivUIOp)
    def run_divui(self, interpreter: Interpreter, op: arith.DivUIOp, args: PythonValues):
        return (args[0] // args[1],)

    @impl(arith.RemUIOp)
    def run_remui(self, interpreter: Interpreter, op: arith.RemUIOp, args: PythonValues):
        return (args[0] % args[1],)

    @impl(arith.MaxUIOp)
    def run_maxui(self, interpreter: Interpreter, op: arith.MaxUIOp, args: PythonValues):
        return (max(args[0], args[1]),)

    @impl(arith.MinUIOp)
    def run_minui(self, interpreter: Interpreter, op: arith.MinUIOp, args: PythonValues):
        return (min(args[0], args[1]),)


def run_host_function(
    module: ModuleOp,
    target: func.FuncOp,
    arrays: Sequence[Any],
    unwritten: tuple[float, int] = UNWRITTEN,
) -> tuple[np.ndarray, ...]:
    """Run a host function of tile IR and return its output buffers.

    `arrays` are the inputs (the arguments not marked `{tile.output}`), converted to
    their buffer types; fresh output buffers are allocated (holding `unwritten`, see
    `new_buffer`) and returned in order.
    """
    types = list(target.function_type.inputs.data)
    if all(isinstance(t, MemRefType) for t in types):
        # the same reading of a host function as both printers: what they reject (an
        # op a host function cannot hold) is rejected here too, located
        read_host(target, "the tile interpreter", "run")
    outputs = tile.output_params(target)
    n_inputs = len(types) - sum(outputs)
    if len(arrays) != n_inputs:
        raise TileRuntimeError(
            f"@{target.sym_name.data} takes {n_inputs} inputs, {len(arrays)} were given"
        )
    given = iter(arrays)
    buffers: list[np.ndarray] = []
    for i, (t, is_out) in enumerate(zip(types, outputs, strict=True)):
        if not isinstance(t, MemRefType):
            raise TileRuntimeError(f"argument {i} of @{target.sym_name.data} is not a memref: {t}")
        if is_out:
            buffers.append(np.empty(0))  # allocated below, once the inputs' sizes are known
            continue
        try:
            as_tensor = TensorType(t.element_type, t.get_shape())
            buffers.append(np.ascontiguousarray(to_tensor(next(given), as_tensor)))
        except ValueError as e:
            raise TileRuntimeError(f"argument {i} of @{target.sym_name.data}: {e}") from None
    same = {buffers[p].shape[d] for p, d in tile.same_size_dims(target)}
    if len(same) > 1:
        raise TileRuntimeError(
            f"@{target.sym_name.data}: the inputs' dynamic dims must be one size, got "
            f"{sorted(same)}"
        )
    dims_from = tile.output_dims_from(target)
    for i, (t, is_out) in enumerate(zip(types, outputs, strict=True)):
        if is_out:
            assert isinstance(t, MemRefType)
            sources = iter(dims_from[i])
            shape = []
            for n in t.get_shape():
                if n < 0:  # a dynamic size: the input dim `tile.dims_from` names
                    source, dim = next(sources)
                    n = buffers[source].shape[dim]
                shape.append(n)
            buffers[i] = new_buffer(MemRefType(t.element_type, shape), unwritten)
    interpreter = Interpreter(module)
    impls = (
        FuncFunctions(),
        ArithFunctions(),
        ScfFunctions(),
        NNFunctions(),
        TileFunctions(unwritten),
    )
    for functions in impls:
        interpreter.register_implementations(functions)
    interpreter.call_op(target, tuple(buffers))
    return tuple(b for b, is_out in zip(buffers, outputs, strict=True) if is_out)
