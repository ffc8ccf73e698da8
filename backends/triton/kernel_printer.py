"""One `tile.kernel` printed as a `@triton.jit` function.

Preconditions: the kernel verifies; every tile dim is a power of two (Triton's rule;
convert-nn-to-tile guarantees it) and buffers are contiguous row-major.

Steps:
1. parameters: one pointer per buffer (`in<i>_ptr`, or `out<i>_ptr` when stored to),
   then one integer per dynamic dim (`?`) of a buffer (`in<i>_n<d>`, not specialized
   by Triton: one compiled kernel serves every size; passed in units of what
   `size_multiples` says, up to SIZE_ALIGNMENT); static shapes and strides are
   compile-time constants printed into the addressing, dynamic ones expressions of the
   size parameters (and such buffers address in int64);
2. index arithmetic is folded where constant and printed otherwise, with a value
   range per index (`indexing`), so provably in-bounds dims need no mask;
3. loads, stores and masks: `kernel_memory.MemoryPrinter`;
4. each op is one statement `name = expr` (elementwise ops from `op_table`); splat
   constants are inlined as literals where an operand may be a scalar;
5. `scf.for` becomes a Python `for` over `range`, its iter_args loop-carried names.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float32Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from fuseopt.backends.python_names import NameTable
from fuseopt.backends.triton import op_table
from fuseopt.backends.triton.indexing import (
    INDEX_BINARY,
    UNKNOWN,
    IndexRange,
    combine,
    fold,
    loop_range,
)
from fuseopt.backends.triton.kernel_memory import MemoryPrinter
from fuseopt.diagnostics import CompileError, error_at
from fuseopt.dialects import nn, tile
from fuseopt.dialects.syntax import array_values, is_float

MIN_DOT = 16
"""Smallest M, N, K that `tl.dot` accepts on the GPU; smaller dots are spelled as sums."""


SIZE_ALIGNMENT = 16
"""A size whose `size_multiples` entry has a common divisor `g` > 1 with this is passed
as `size // g` and multiplied back by `g` in the kernel, so Triton knows it divisible
by `g` (16 at most: the divisibility Triton assumes of an integer argument it
specializes; the size parameters are `do_not_specialize`, and `tl.multiple_of` on a
kernel argument is a no-op in Triton)."""


@dataclass
class PrintedKernel:
    """A printed kernel: its Python name, source text and what it needs."""

    name: str
    source: str
    helpers: set[str] = field(default_factory=set)
    max_tile_elements: int = 1
    sizes: tuple[tuple[int, int], ...] = ()
    """(parameter position, dim) of each size parameter, in order after the buffers."""
    size_units: tuple[int, ...] = ()
    """Per size parameter, the unit it is passed in (the size divided by it: see
    SIZE_ALIGNMENT)."""


def _shape(v: SSAValue) -> tuple[int, ...]:
    t = v.type
    assert isinstance(t, TensorType | MemRefType)
    return tuple(t.get_shape())


def _full_tile(shape: list[int], literal: str, element: Attribute) -> str:
    """`tl.full` of `literal`. A bf16 tile is filled in f32 and converted (the value is
    a bf16 already, so the conversion is exact): Triton 3.6's CPU interpreter cannot
    build bf16 constants."""
    if isinstance(element, BFloat16Type):
        return f"tl.full({shape}, {literal}, tl.float32).to(tl.bfloat16)"
    return f"tl.full({shape}, {literal}, {op_table.triton_dtype(element)})"


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


class KernelPrinter(MemoryPrinter):
    """Prints one kernel; `print()` returns a PrintedKernel. Holds its own name table."""

    def __init__(
        self,
        kernel: tile.KernelOp,
        py_name: str,
        module_names: set[str],
        grid: tuple[int | None, ...] | None,
    ):
        self.kernel, self.py_name, self.grid = kernel, py_name, grid
        self.names = NameTable(module_names)
        self.lines: list[str] = []
        self.depth = 1
        self.expr: dict[SSAValue, str] = {}
        self.ranges: dict[SSAValue, IndexRange] = {}
        self.inlinable: set[SSAValue] = set()
        self.aranges: list[dict[tuple[str, int, bool], str]] = [{}]
        self.out = PrintedKernel(py_name, "")
        self.folded: set[Operation] = set()
        self.shared: dict[SSAValue, tuple[SSAValue, list[SSAValue], list[SSAValue]] | None] = {}
        self.dims: dict[SSAValue, tuple[int | str, ...]] = {}

    # ------------------------------------------------------------------ driver

    def print(self) -> PrintedKernel:
        """The kernel's source."""
        k = self.kernel
        stored = {op.buffer for op in k.walk() if isinstance(op, tile.StoreOp)}
        params, counts = [], {"in": 0, "out": 0}
        for arg in k.body.block.args:
            kind = "out" if arg in stored else "in"
            hint = arg.name_hint or f"{kind}{counts[kind]}"
            counts[kind] += 1
            self.expr[arg] = self.names.fresh(f"{hint}_ptr")
            params.append(self.expr[arg])
        sizes, size_names, units = [], [], []
        multiples = iter(k.array_attr("size_multiples") or ())
        for i, arg in enumerate(k.body.block.args):
            dims: list[int | str] = []
            for d, n in enumerate(_shape(arg)):
                if n >= 0:
                    dims.append(n)
                    continue
                name = self.names.fresh(f"{self.expr[arg].removesuffix('_ptr')}_n{d}")
                unit = math.gcd(next(multiples, 1), SIZE_ALIGNMENT)
                sizes.append((i, d))
                units.append(unit)
                dims.append(name)
                if unit == 1:
                    size_names.append(name)
                    continue
                # passed in units: Triton then knows the size divisible by `unit`, so
                # masked accesses of a flattened buffer stay vectorized
                passed = self.names.fresh(f"{name}_div{unit}")
                size_names.append(passed)
                self.emit(f"{name} = {passed}.to(tl.int64) * {unit}")
            self.dims[arg] = tuple(dims)
        self.out.sizes, self.out.size_units = tuple(sizes), tuple(units)
        params += size_names
        self._body(k.body.block)
        about = k.require_schedule().value
        blocks = k.array_attr("block_sizes")
        sizes = f"; block sizes {list(blocks)}" if blocks is not None else ""
        jit = f"@triton.jit(do_not_specialize={size_names!r})" if size_names else "@triton.jit"
        head = [
            jit,
            f"def {self.py_name}({', '.join(params)}):",
            f'    """Schedule {about}{sizes}."""',
        ]
        self.out.source = "\n".join(head + self.lines) + "\n"
        return self.out

    def emit(self, line: str) -> None:
        """Append one statement at the current depth."""
        self.lines.append("    " * self.depth + line)

    @contextmanager
    def nested(self) -> Iterator[None]:
        """A nested Python block (a loop body)."""
        self.depth += 1
        self.aranges.append({})
        try:
            yield
        finally:
            self.depth -= 1
            self.aranges.pop()

    def bind(self, v: SSAValue, hint: str, expr: str) -> str:
        """Print `name = expr` for `v` and remember the name."""
        name = self.names.fresh(v.name_hint or hint)
        self.emit(f"{name} = {expr}")
        self.expr[v] = name
        return name

    def value(self, v: SSAValue) -> str:
        """The expression for `v` (materializing an inlined splat where needed)."""
        if v not in self.expr:
            raise CompileError(f"the triton printer met a value before its definition: {v}")
        return self.expr[v]

    def _body(self, block: Block) -> None:
        for op in block.ops:
            self._op(op)

    def _op(self, op: Operation) -> None:
        if isinstance(op, tile.ReturnOp | scf.YieldOp):
            return
        handler = _HANDLERS.get(type(op))
        if handler is not None:
            handler(self, op)
        elif type(op) in op_table.TRITON_OPS or isinstance(
            op, nn.CompareOp | nn.CastOp | nn.GeluOp
        ):
            self._elementwise(op)
        elif type(op) in INDEX_BINARY:
            self._index_binary(op)
        else:
            raise error_at(op, f"the triton target cannot print {op.name} in a kernel")
        self._check_tiles(op)

    def _check_tiles(self, op: Operation) -> None:
        for r in op.results:
            if isinstance(r.type, TensorType):
                shape = _shape(r)
                if not all(_is_pow2(d) for d in shape):
                    raise error_at(op, f"Triton tiles need power-of-two dims, got {r.type}")
                self.out.max_tile_elements = max(self.out.max_tile_elements, math.prod(shape))

    # ------------------------------------------------------------------ index math

    def _constant(self, op: arith.ConstantOp) -> None:
        value = op.value
        r = op.result
        if isinstance(value, IntegerAttr) and isinstance(r.type, IndexType):
            n = value.value.data
            self.expr[r] = str(n)
            self.ranges[r] = IndexRange.exactly(n)
            return
        if isinstance(value, IntegerAttr):
            self.expr[r] = str(value.value.data)
            return
        data = getattr(value, "value", None)
        if data is None or not hasattr(data, "data"):
            raise error_at(op, "the triton target prints scalar arith constants only")
        self.expr[r] = op_table.literal(data.data, r.type)

    def _dim(self, op: tile.DimOp) -> None:
        """A static dim is its number; a dynamic one the kernel's size parameter."""
        n = self.buffer_dims(op.buffer)[op.index]
        self.expr[op.result] = str(n)
        known = IndexRange.exactly(n) if isinstance(n, int) else IndexRange(0, None)
        self.ranges[op.result] = known

    def _program_id(self, op: tile.ProgramIdOp) -> None:
        axis = op.axis.value.data
        self.bind(op.result, "pid", f"tl.program_id({axis})")
        n = self.grid[axis] if self.grid is not None and axis < len(self.grid) else None
        self.ranges[op.result] = IndexRange(0, None if n is None else n - 1)

    def _index_binary(self, op: Operation) -> None:
        a, b = op.operands
        ra, rb = self.ranges.get(a, UNKNOWN), self.ranges.get(b, UNKNOWN)
        r = op.results[0]
        if ra.constant is not None and rb.constant is not None:
            folded = fold(op, ra.constant, rb.constant)
            if folded is not None:
                self.expr[r] = str(folded)
                self.ranges[r] = IndexRange.exactly(folded)
                return
        identity = (isinstance(op, arith.MuliOp) and rb.constant == 1) or (
            isinstance(op, arith.AddiOp | arith.SubiOp) and rb.constant == 0
        )
        if identity:
            self.expr[r], self.ranges[r] = self.value(a), ra
            return
        hint = {arith.RemSIOp: "idx", arith.DivSIOp: "rest", arith.MuliOp: "off"}.get(type(op), "i")
        self.bind(r, hint, INDEX_BINARY[type(op)].format(self.value(a), self.value(b)))
        self.ranges[r] = combine(op, ra, rb)  # type: ignore[arg-type]

    def _index_cast(self, op: Operation) -> None:
        self.expr[op.results[0]] = self.value(op.operands[0])
        self.ranges[op.results[0]] = self.ranges.get(op.operands[0], UNKNOWN)

    # ------------------------------------------------------------------ elementwise

    def _splat(self, op: nn.ConstantOp) -> None:
        value = op.splat_value
        if value is None:
            raise error_at(op, "the triton target prints splat constants only in kernels")
        r = op.result
        element = op_table.element_type(r)
        self.expr[r] = op_table.literal(value, element)
        if all(self._may_inline(use.operation, r) for use in r.uses):
            self.inlinable.add(r)
            return
        self.bind(r, "c", _full_tile(list(_shape(r)), self.expr[r], element))

    def _may_inline(self, user: Operation, v: SSAValue) -> bool:
        """May splat `v` be a scalar literal in `user`? Only in an elementwise op with
        another, non-constant operand that is a full tile of the result's shape."""
        elementwise = type(user) in op_table.TRITON_OPS or isinstance(
            user, nn.CompareOp | nn.GeluOp
        )
        if isinstance(user, nn.PowOp):  # a known exponent is spelled out, not loaded
            exponent = op_table.splat_operand(user.operands[1])
            return (
                user.operands[1] is v
                and exponent is not None
                and (float(exponent) in op_table.POW_BY_EXPONENT)
            )
        if not elementwise:
            return False
        if isinstance(user, nn.SelectOp) and user.operands[0] is v:
            return False
        out = _shape(user.results[0])
        return any(
            x is not v and not isinstance(x.owner, nn.ConstantOp) and _shape(x) == out
            for x in user.operands
        )

    def materialized(self, v: SSAValue) -> str:
        """`v` as a full tile (a splat turned into `tl.full` where it was inlined)."""
        name = self.value(v)
        if v in self.inlinable:  # pragma: no cover - uses were checked at definition
            raise CompileError("an inlined constant reached a non-elementwise use")
        return name

    def _operand(self, v: SSAValue, upcast: bool) -> str:
        name = self.value(v)
        if upcast and op_table.is_16bit_float(op_table.element_type(v)) and v not in self.inlinable:
            return f"{name}.to(tl.float32)"
        return name

    def _elementwise(self, op: Operation) -> None:
        r = op.results[0]
        out_type = op_table.element_type(r)
        if isinstance(op, nn.CastOp):
            self._cast(op)
            return
        if isinstance(op, nn.CompareOp):
            symbol = op_table.COMPARE[op.predicate.data]
            wide = op_table.is_16bit_float(op_table.element_type(op.operands[0]))
            a, b = (self._operand(x, wide) for x in op.operands)
            self.bind(r, "cond", f"{a} {symbol} {b}")
            return
        integer = not is_float(out_type) and not isinstance(op, nn.SelectOp)
        rule = (op_table.INTEGER_OPS.get(type(op)) if integer else None) or op_table.TRITON_OPS.get(
            type(op)
        )
        if isinstance(op, nn.GeluOp):
            rule = op_table.Rule(
                op_table.GELU[op.approximation],
                helpers=("fuseopt_tanh",) if op.approximation == "tanh" else (),
            )
        operands = list(op.operands)
        if isinstance(op, nn.PowOp):
            exponent = op_table.splat_operand(op.operands[1])
            if exponent is not None and float(exponent) in op_table.POW_BY_EXPONENT:
                rule = op_table.Rule(op_table.POW_BY_EXPONENT[float(exponent)])
                operands = operands[:1]
        assert rule is not None
        upcast = rule.upcast and op_table.is_16bit_float(out_type)
        args = [self._operand(x, upcast) for x in operands]
        expr = rule.template.format(*args)
        self.out.helpers.update(rule.helpers)
        if isinstance(op, nn.TruncDivOp) and upcast:
            expr, helpers = op_table.rounded_trunc_div(*args, out_type)
            self.out.helpers.update(helpers)
        if upcast:
            expr, helpers = op_table.convert(f"({expr})", Float32Type(), out_type)
            self.out.helpers.update(helpers)
        self.bind(r, op.name.split(".")[-1], expr)

    def _iota(self, op: tile.IotaOp) -> None:
        """`start + step * (offset + tl.arange(0, n))` in i64, converted to the tile's
        element type (a 0-d tile: the offset alone)."""
        r = op.result
        shape = _shape(r)
        if shape:
            positions = self._arange(op.offset, shape[0], True)
        else:
            positions = f"(tl.full([], 0, tl.int64) + {self.value(op.offset)})"
        expr = positions if op.step_value == 1 else f"{op.step_value} * {positions}"
        if op.start_value:
            expr = f"{op.start_value} + {expr}"
        value, helpers = op_table.convert(f"({expr})", i64, op_table.element_type(r))
        self.out.helpers.update(helpers)
        self.bind(r, "iota", value)

    def _cast(self, op: nn.CastOp) -> None:
        x, r = op.operands[0], op.results[0]
        src, dst = op_table.element_type(x), op_table.element_type(r)
        if src == dst:
            self.expr[r] = self.value(x)
            return
        if op_table.triton_dtype(dst) == "tl.int1":
            # 16-bit floats compare in f32: the CPU interpreter would test bf16's raw bits
            # (-0.0 is 0x8000, so it would be true)
            value = self.value(x)
            if op_table.is_16bit_float(src):
                value, helpers = op_table.convert(value, src, Float32Type())
                self.out.helpers.update(helpers)
            self.bind(r, "cond", f"{value} != 0")
            return
        expr, helpers = op_table.convert(self.value(x), src, dst)
        self.out.helpers.update(helpers)
        self.bind(r, "cast", expr)

    # ------------------------------------------------------------------ tile math

    def _reduce(self, op: tile.ReduceOp) -> None:
        x = self.materialized(op.input)
        element = op_table.element_type(op.input)
        kind, axis = op.kind.data, op.axis_index
        combine = op_table.REDUCE_COMBINE[kind]
        self.out.helpers.add(combine)
        if op_table.is_16bit_float(element):
            # sums accumulate in f32; max and min compare in f32 (exact) because the CPU
            # interpreter would order bf16's raw bits
            total = f"tl.reduce({x}.to(tl.float32), {axis}, {combine})"
            expr, helpers = op_table.convert(total, Float32Type(), element)
            self.out.helpers.update(helpers)
        else:
            expr = f"tl.reduce({x}, {axis}, {combine})"
        self.bind(op.result, kind, expr)

    def _cumsum(self, op: nn.CumsumOp) -> None:
        """A scan kernel's prefix sum along one axis of a tile (`tl.associative_scan`
        with the module's own add, as reductions use `tl.reduce`: `tl.cumsum` is a
        jitted library function the CPU interpreter cannot call from our modules;
        16-bit floats summed in f32 and rounded once)."""
        x = self.materialized(op.input)
        element = op_table.element_type(op.input)
        combine = op_table.REDUCE_COMBINE["sum"]
        self.out.helpers.add(combine)
        if op_table.is_16bit_float(element):
            expr, helpers = op_table.convert(
                f"tl.associative_scan({x}.to(tl.float32), {op.axis_value}, {combine})",
                Float32Type(),
                element,
            )
            self.out.helpers.update(helpers)
        else:
            expr = f"tl.associative_scan({x}, {op.axis_value}, {combine})"
        self.bind(op.result, "cumsum", expr)

    def _broadcast(self, op: tile.BroadcastOp) -> None:
        x = self.materialized(op.input)
        out = _shape(op.result)
        dims = array_values(op.dims)
        if not dims:
            self.bind(op.result, "bcast", f"tl.broadcast_to({x}, {list(out)})")
            return
        index = ", ".join(":" if d in dims else "None" for d in range(len(out)))
        expanded = x if len(dims) == len(out) else f"{x}[{index}]"
        self.bind(op.result, "bcast", f"tl.broadcast_to({expanded}, {list(out)})")

    def _transpose(self, op: tile.TransposeOp) -> None:
        if op in self.folded:
            return
        perm = tuple(array_values(op.permutation))
        self.bind(op.result, "trans", f"tl.permute({self.materialized(op.input)}, {perm})")

    def _reshape(self, op: nn.ReshapeOp) -> None:
        x = op.operands[0]
        shape = list(_shape(op.results[0]))
        self.bind(op.results[0], "reshaped", f"tl.reshape({self.materialized(x)}, {shape})")

    def _dot(self, op: tile.DotOp) -> None:
        a, b, acc = (self.materialized(v) for v in (op.lhs, op.rhs, op.acc))
        sa, sb = _shape(op.lhs), _shape(op.rhs)
        if min(sa[-2], sa[-1], sb[-1]) < MIN_DOT:
            # too small for tensor cores: a broadcast product summed over K
            rank = len(sa)
            lead = ":, " * (rank - 2)
            lhs = f"{a}[{lead}:, :, None].to(tl.float32)"
            rhs = f"{b}[{lead}None, :, :].to(tl.float32)"
            self.bind(op.result, "acc", f"{acc} + tl.sum({lhs} * {rhs}, axis={rank - 1})")
            return
        if op_table.is_16bit_float(op_table.element_type(op.lhs)):
            self.out.helpers.add("fuseopt_dot")
            self.bind(op.result, "acc", f"fuseopt_dot({a}, {b}, {acc})")
            return
        self.bind(op.result, "acc", f'tl.dot({a}, {b}, {acc}, input_precision="ieee")')

    def _for(self, op: scf.ForOp) -> None:
        bounds = [self.ranges.get(v, UNKNOWN).constant for v in (op.lb, op.ub, op.step)]
        lb, ub, step = (self.value(v) for v in (op.lb, op.ub, op.step))
        body = op.body.block
        carried = []
        for arg, init, res in zip(body.args[1:], op.iter_args, op.results, strict=True):
            name = self.names.fresh(arg.name_hint or "carried")
            self.emit(f"{name} = {self.materialized(init)}")
            self.expr[arg] = self.expr[res] = name
            carried.append(name)
        iv = self.names.fresh(body.args[0].name_hint or "k")
        self.expr[body.args[0]] = iv
        if None not in bounds:
            self.ranges[body.args[0]] = loop_range(*bounds)  # type: ignore[arg-type]
        else:
            lo = self.ranges.get(op.lb, UNKNOWN).lo
            self.ranges[body.args[0]] = IndexRange(lo, self.ranges.get(op.ub, UNKNOWN).hi)
        self.emit(f"for {iv} in range({lb}, {ub}, {step}):")
        with self.nested():
            self._body(body)
            yielded = body.last_op
            assert isinstance(yielded, scf.YieldOp)
            values = [self.materialized(v) for v in yielded.operands]
            pairs = [(c, v) for c, v in zip(carried, values, strict=True) if c != v]
            if any(v in carried for _, v in pairs):
                self.emit(f"{', '.join(c for c, _ in pairs)} = {', '.join(v for _, v in pairs)}")
            else:
                for c, v in pairs:
                    self.emit(f"{c} = {v}")
            if not body.ops or all(isinstance(o, scf.YieldOp) for o in body.ops):
                self.emit("pass")


_HANDLERS = {
    arith.ConstantOp: KernelPrinter._constant,
    arith.IndexCastOp: KernelPrinter._index_cast,
    tile.ProgramIdOp: KernelPrinter._program_id,
    tile.DimOp: KernelPrinter._dim,
    tile.LoadOp: KernelPrinter._load,
    tile.GatherOp: KernelPrinter._gather,
    tile.AllocOp: KernelPrinter._shared_alloc,
    tile.CopyOp: KernelPrinter._copy,
    tile.BarrierOp: KernelPrinter._barrier,
    tile.StoreOp: KernelPrinter._store,
    tile.MaskOp: KernelPrinter._mask,
    tile.IotaOp: KernelPrinter._iota,
    tile.ReduceOp: KernelPrinter._reduce,
    nn.CumsumOp: KernelPrinter._cumsum,
    tile.BroadcastOp: KernelPrinter._broadcast,
    tile.TransposeOp: KernelPrinter._transpose,
    tile.DotOp: KernelPrinter._dot,
    nn.ConstantOp: KernelPrinter._splat,
    nn.ReshapeOp: KernelPrinter._reshape,
    scf.ForOp: KernelPrinter._for,
}
"""Ops with their own printing rule (elementwise ops go through `op_table`)."""
