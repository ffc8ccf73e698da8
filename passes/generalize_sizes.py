"""nn functions of dynamic size (`?`) lowered to tile IR of dynamic size.

The nn passes and convert-nn-to-tile decide with sizes (fusion costs, tile sizes,
schedules), so a function of dynamic size is lowered at a *size hint*, as torch.compile
uses size hints, and what depends on the size is then computed at run time:

1. `specialize`: every `?` of the function becomes the hint. One rule: every `?` of a
   function stands for the same size (a batch, or a number of tokens), so a reshape
   keeps it whole; a function that breaks the rule fails to verify when specialized,
   and is refused.
2. The lowering runs twice, at two hints (`HINTS`: different odd primes, so that every
   bounds mask a ragged block needs is there).
3. `generalize`: the two tile modules must be the same op for op. Where they differ,
   the value must be the same multiple `r` of the hint in both (`r * H1` and `r * H2`),
   and it must be one of what tile IR computes at run time:
   - a buffer dim (a kernel parameter, a host input, output, temporary or view): `?`;
     an output's size comes from the input it equals (`tile.dims_from`), a temporary's
     from the host's `tile.dim` of an input (`tile.alloc(%n)`);
   - in a kernel, a `tile.mask` bound or an index constant: computed from the size of a
     parameter (`tile.dim`); a value that is not a whole multiple must be a block count
     `ceil(p * H / q)` at both hints (q a power of two: the only fractions of a size
     convert-nn-to-tile computes), and becomes `ceil(p * n / q)`;
   - a launch grid: the kernel's block count (the product over its iteration dims but
     the reduced one of `ceil(size / block)`), computed on the host, when that formula
     gives the grid at both hints; else `r * H` at both hints (the attention schedule
     streams its last dim; a block count is not accepted here: `3 * ceil(H / 16)`
     equals `ceil(6145 H / 32768)` at both hints and not at small sizes);
   - `iteration_sizes` and `candidates` record the hint's values (descriptions, not
     code).
   Anything else that depends on the size (a schedule that differs between the hints,
   a grid of another form, a float constant, an op that needs a static size where the
   size is: a GEMM's contraction dim) is refused with a `SizeDependentLowering` that
   says where: such a function needs static sizes (the Triton backend compiles a
   frontend region per size instead).

The host function checks that the inputs' dynamic dims are one size (`tile.same_size`),
so a call that breaks the rule is an error, never a wrong result.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.printer import Printer
from xdsl.rewriter import InsertPoint, Rewriter

from fuseopt.diagnostics import CompileError, error_at, verify_module
from fuseopt.dialects import nn, tile
from fuseopt.dialects.syntax import array_values, int_array

HINTS = (49157, 65537)
"""The two size hints a dynamic size is lowered at: many rows (or long rows: past any
whole-row limit, so both hints pick the same schedule), and odd primes, so that no
power-of-two block divides them: every mask that a size not a multiple of its block
needs is in the kernel (a multiple would let convert-nn-to-tile leave out the mask of a
ragged last block, wrong at other sizes)."""

DESCRIPTIVE = ("iteration_sizes", "candidates")
"""Kernel attributes that describe the hint's sizes (for autotuning) and are kept as
they are at the first hint."""

_TENSOR = re.compile(r"tensor<([^>]*)>")


def is_dynamic_function(f: func.FuncOp) -> bool:
    """Does nn function `f` take or return a tensor with a dim of dynamic size?"""
    types = [*f.function_type.inputs.data, *f.function_type.outputs.data]
    return any(isinstance(t, TensorType) and any(d < 0 for d in t.get_shape()) for t in types)


def has_dynamic_functions(module: ModuleOp) -> bool:
    """Does `module` hold an nn function of dynamic size?"""
    return any(is_dynamic_function(f) for f in module.ops if isinstance(f, func.FuncOp))


def replace_body(module: ModuleOp, source: ModuleOp) -> None:
    """Make `module` hold `source`'s ops instead of its own (a lowering in place)."""
    for op in list(module.ops):
        op.detach()
        op.erase()
    for op in list(source.ops):
        op.detach()
        module.body.block.add_op(op)


def located_text(module: ModuleOp) -> str:
    """`module` printed with each op's location (`loc(...)`), so that what is parsed
    again from it (specialized) reports errors at the user's text."""
    text = io.StringIO()
    Printer(stream=text, print_debuginfo=True).print_op(module)
    return text.getvalue()


def specialize(text: str, hint: int) -> str:
    """`text` (nn IR) with every `?` of a tensor type replaced by `hint`."""
    return _TENSOR.sub(lambda m: "tensor<" + m.group(1).replace("?", str(hint)) + ">", text)


@dataclass(frozen=True)
class SizedFunction:
    """An nn function of one dynamic size, given as the module it is at any size.

    `at(n)` builds the module holding `func_name` with the size fixed at `n` (static nn
    IR, a fresh module per call). `dims` are the (input, dim) pairs of the function's
    tensor inputs that are the size itself (so a call's size is read from any of them).
    A module of `?` types is one (`from_module`: every `?` is the size); the FX frontend
    makes one for a region traced with a symbolic size, whose intermediate values may be
    multiples of it (a batch flattened with the tokens), which `?` types cannot say.
    """

    func_name: str
    at: Callable[[int], ModuleOp]
    dims: tuple[tuple[int, int], ...]

    @staticmethod
    def from_module(
        module: ModuleOp, func_name: str, parse: Callable[[str], ModuleOp]
    ) -> SizedFunction:
        """The function `func_name` of nn `module` (with `?` types: `is_dynamic_function`),
        specialized by replacing each `?` (`specialize`) and parsing with `parse`."""
        f = next(
            op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == func_name
        )
        dims = tuple(
            (i, d)
            for i, t in enumerate(f.function_type.inputs.data)
            if isinstance(t, TensorType)
            for d, n in enumerate(t.get_shape())
            if n < 0
        )
        return SizedFunction(func_name, _specializer(module, parse), dims)

    def key(self) -> str:
        """The text that identifies the function (its modules at both `HINTS`), for caches."""
        return "\n// size hint\n".join(str(self.at(h)) for h in HINTS)

    def size_of(self, inputs: Sequence[object]) -> int:
        """The size a call's inputs bring (their dims at `dims`); a CompileError when the
        dims disagree or no input has one."""
        sizes = {
            inputs[i].shape[d]  # type: ignore[attr-defined]
            for i, d in self.dims
            if i < len(inputs) and hasattr(inputs[i], "shape")
        }
        if len(sizes) != 1:
            raise CompileError(
                f"the inputs' dynamic dims must be one size, got {sorted(sizes) or 'none'}"
            )
        return sizes.pop()


def as_sized(
    module: ModuleOp | SizedFunction, func_name: str, parse: Callable[[str], ModuleOp]
) -> SizedFunction | None:
    """`module` as a SizedFunction when it is one or holds `?` types, else None (static)."""
    if isinstance(module, SizedFunction):
        return module
    if not has_dynamic_functions(module):
        return None
    return SizedFunction.from_module(module, func_name, parse)


def _specializer(module: ModuleOp, parse: Callable[[str], ModuleOp]) -> Callable[[int], ModuleOp]:
    """`n -> module` with every `?` replaced by n, parsed again (errors at the user's text)."""
    text = located_text(module)

    def at(n: int) -> ModuleOp:
        try:
            return parse(specialize(text, n))
        except CompileError as e:
            raise CompileError(
                "every `?` of a function stands for one size (a reshape keeps it whole); "
                f"at size {n} this function does not verify: {e}"
            ) from None

    return at


def lower_sized(
    sized: SizedFunction, lower: Callable[[ModuleOp], ModuleOp]
) -> tuple[ModuleOp, ModuleOp]:
    """Lower `sized`: `lower` (the whole pipeline, in place, returning what a caller keeps
    of the fused stage) runs on the function at each of `HINTS`; returns (tile IR of
    dynamic size, the first hint's fused-stage module). A CompileError when the function
    breaks the one-size rule or the lowering depends on the size in a way tile IR cannot
    compute."""
    lowered, fused = [], None
    for hint in HINTS:
        specialized = sized.at(hint)
        specialized.attributes[nn.SIZE_HINT_ATTR] = IntegerAttr(hint, 64)
        kept = lower(specialized)
        specialized.attributes.pop(nn.SIZE_HINT_ATTR, None)
        fused = fused or kept
        lowered.append(specialized)
    generalize(lowered[0], lowered[1], HINTS)
    assert fused is not None
    return lowered[0], fused


def lower_dynamic(
    module: ModuleOp, lower: Callable[[ModuleOp], ModuleOp], parse: Callable[[str], ModuleOp]
) -> tuple[ModuleOp, ModuleOp]:
    """Lower nn `module` of dynamic size (every function with `?` types; see `lower_sized`)."""
    return lower_sized(SizedFunction("", _specializer(module, parse), ()), lower)


def _ratio(a: int, b: int, hints: tuple[int, int]) -> Fraction | None:
    """r when a == r * H1 and b == r * H2 (a value proportional to the size)."""
    r = Fraction(a, hints[0])
    return r if r > 0 and r * hints[1] == b else None


MAX_BLOCK_SHIFT = 15
"""Block counts `ceil(p * H / q)` are recognized for q up to 2**MAX_BLOCK_SHIFT (32768,
the largest block convert-nn-to-tile uses). Larger q would let other functions of the
size pass as block counts at both hints (`H - 1` is `ceil(131069 H / 131072)` at both),
wrong at small sizes; with q at most 32768, below the hints, no `H - c` or `H // d`
matches a block count at both."""


def _block_count(a: int, b: int, hints: tuple[int, int]) -> Fraction | None:
    """p / q (q a power of two, the smallest that fits) when a == ceil(p * H1 / q) and
    b == ceil(p * H2 / q): a number of blocks of q covering p times the size."""
    for shift in range(MAX_BLOCK_SHIFT + 1):
        q = 1 << shift
        for p in range(max(1, a * q // hints[0] - 1), a * q // hints[0] + 2):
            if -(-p * hints[0] // q) == a and -(-p * hints[1] // q) == b:
                return Fraction(p, q)
    return None


class SizeDependentLowering(CompileError):
    """The lowering of a function of dynamic size depends on the size in a way tile IR
    cannot compute at run time (`generalize`): a caller may compile it per size."""


class _Generalizer:
    """The state of one `generalize`: per value, the ratio of each buffer dim that is
    proportional to the size (None for a static one)."""

    def __init__(self, a: ModuleOp, b: ModuleOp, hints: tuple[int, int]):
        self.a, self.b, self.hints = a, b, hints
        self.dims: dict[SSAValue, list[Fraction | None]] = {}
        self.masks: list[tuple[tile.MaskOp, list[Fraction | None]]] = []
        self.constants: list[tuple[arith.ConstantOp, Fraction]] = []
        self.splats: list[tuple[nn.ConstantOp, Fraction]] = []
        """Integer tiles every element of which is a multiple of the size (index
        arithmetic on the size a frontend wrote out: a negative index wrapped by it, a
        flattened row's offset)."""
        self.grids: dict[tile.LaunchOp, tile.LaunchOp] = {}
        """Launches whose grid depends on the size, with their twin at the second hint."""

    def _fail(self, op: Operation, what: str) -> SizeDependentLowering:
        e = error_at(
            op,
            f"dynamic sizes: {what} depends on the size in a way tile IR cannot compute "
            "at run time; compile this function with static sizes",
        )
        return SizeDependentLowering(e.message, e.location, e.context)

    # ------------------------------------------------------------------ compare

    def compare(self) -> None:
        ops_a, ops_b = list(self.a.walk()), list(self.b.walk())
        if len(ops_a) != len(ops_b):
            where = next((op for op in self.a.ops if isinstance(op, func.FuncOp)), self.a)
            raise self._fail(where, "the lowering (its number of ops)")
        for x, y in zip(ops_a, ops_b, strict=True):
            if (
                x.name != y.name
                or len(x.operands) != len(y.operands)
                or len(x.results) != len(y.results)
                or len(x.regions) != len(y.regions)
            ):
                raise self._fail(x, f"the lowering ({x.name} at one size, {y.name} at another)")
            for r, s in zip(x.results, y.results, strict=True):
                self._value(x, r, s)
            for region_x, region_y in zip(x.regions, y.regions, strict=True):
                for bx, by in zip(region_x.blocks, region_y.blocks, strict=True):
                    for r, s in zip(bx.args, by.args, strict=True):
                        self._value(x, r, s)
            self._attributes(x, y)

    def _value(self, op: Operation, r: SSAValue, s: SSAValue) -> None:
        if r.type == s.type:
            return
        if not isinstance(r.type, MemRefType) or not isinstance(s.type, MemRefType):
            raise self._fail(op, f"a value of type {r.type}")
        ratios: list[Fraction | None] = []
        for d, e in zip(r.type.get_shape(), s.type.get_shape(), strict=True):
            ratio = None if d == e else _ratio(d, e, self.hints)
            if d != e and (ratio is None or ratio.denominator != 1):
                raise self._fail(op, f"a buffer of type {r.type}")
            ratios.append(ratio)
        self.dims[r] = ratios

    def _attributes(self, x: Operation, y: Operation) -> None:
        keys = set(x.attributes) | set(y.attributes) | set(x.properties) | set(y.properties)
        for key in keys:
            u = x.attributes.get(key, x.properties.get(key))
            v = y.attributes.get(key, y.properties.get(key))
            if u == v or (isinstance(x, tile.KernelOp) and key in DESCRIPTIVE):
                continue
            if isinstance(x, tile.MaskOp) and key == "bounds":
                self.masks.append((x, self._ratios(x, u, v)))
            elif isinstance(x, tile.LaunchOp) and key == "grid":
                assert isinstance(y, tile.LaunchOp)
                self.grids[x] = y
            elif isinstance(x, arith.ConstantOp) and tile.enclosing_kernel(x) is not None:
                self.constants.append((x, self._constant_ratio(x, u, v)))
            elif isinstance(x, nn.ConstantOp) and tile.enclosing_kernel(x) is not None:
                assert isinstance(y, nn.ConstantOp)
                self.splats.append((x, self._splat_ratio(x, y)))
            elif key in ("function_type", "arg_attrs"):
                continue  # follows the arguments' types
            else:
                raise self._fail(x, f"attribute `{key}` of {x.name}")

    def _constant_ratio(self, op: Operation, u: Attribute | None, v: Attribute | None) -> Fraction:
        if not (isinstance(u, IntegerAttr) and isinstance(v, IntegerAttr)):
            raise self._fail(op, "a constant")
        a, b = u.value.data, v.value.data
        ratio = _ratio(a, b, self.hints) or _block_count(a, b, self.hints)
        if ratio is None:
            raise self._fail(op, "an index constant")
        return ratio

    def _splat_ratio(self, x: nn.ConstantOp, y: nn.ConstantOp) -> Fraction:
        a, b = x.splat_value, y.splat_value
        t = x.result.type
        ratio = _ratio(a, b, self.hints) if isinstance(a, int) and isinstance(b, int) else None
        if not (isinstance(t, TensorType) and t.element_type == i64) or ratio is None:
            raise self._fail(x, "a constant tile")
        if ratio.denominator != 1:
            raise self._fail(x, "a constant tile (not a whole multiple of the size)")
        return ratio

    def _ratios(self, op: Operation, u: Attribute | None, v: Attribute | None) -> list:
        assert isinstance(u, DenseArrayBase) and isinstance(v, DenseArrayBase)
        out: list[Fraction | None] = []
        for p, q in zip(array_values(u), array_values(v), strict=True):
            ratio = None if p == q else _ratio(p, q, self.hints)
            if p != q and (ratio is None or ratio.denominator != 1):
                raise self._fail(op, "a mask bound")
            out.append(ratio)
        return out

    # ------------------------------------------------------------------ rewrite

    def rewrite(self) -> None:
        dims = {}
        for v, ratios in self.dims.items():
            t = v.type
            assert isinstance(t, MemRefType)
            shape = [
                DYNAMIC_INDEX if r is not None else n
                for n, r in zip(t.get_shape(), ratios, strict=True)
            ]
            new = MemRefType(t.element_type, shape, t.layout, t.memory_space)
            dims[Rewriter.replace_value_with_new_type(v, new)] = ratios
        self.dims = dims
        for op in list(self.a.walk()):
            if isinstance(op, tile.KernelOp):
                self._multiples(op)
                self._kernel(op)
            elif isinstance(op, func.FuncOp):
                self._host(op)

    def _multiples(self, k: tile.KernelOp) -> None:
        """`size_multiples` of kernel `k`: each dynamic dim of its parameters is `r` times
        the size (r an integer: `_value`), so a multiple of r at run time."""
        multiples = [
            int(r) for a in k.body.block.args for r in self.dims.get(a, []) if r is not None
        ]
        if any(m > 1 for m in multiples):
            k.attributes["size_multiples"] = int_array(multiples)

    def _kernel(self, k: tile.KernelOp) -> None:
        masks = [(m, r) for m, r in self.masks if tile.enclosing_kernel(m) is k]
        constants = [(c, r) for c, r in self.constants if tile.enclosing_kernel(c) is k]
        splats = [(c, r) for c, r in self.splats if tile.enclosing_kernel(c) is k]
        if not masks and not constants and not splats:
            return
        sources = [
            (a, d, ratio)
            for a in k.body.block.args
            for d, ratio in enumerate(self.dims.get(a, []))
            if ratio is not None
        ]
        if not sources:
            raise self._fail(k, "a mask bound of a kernel without a buffer of that size")
        param, dim, per = sources[0]
        entry = k.body.block
        size = tile.DimOp(param, dim)
        Rewriter.insert_op(size, InsertPoint.at_start(entry))
        for constant, r in constants:  # a size (integral ratio) or a block count (ceil)
            value = _scaled(size.result, r / per, InsertPoint.before(constant))
            constant.result.replace_all_uses_with(value)
            constant.detach()
            constant.erase()
        for splat, r in splats:  # the size as a 0-d index tile, broadcast
            at = InsertPoint.before(splat)
            value = _scaled(size.result, r / per, at)
            t = splat.result.type
            assert isinstance(t, TensorType)
            scalar = _emit(tile.IotaOp(value, 0, 1, TensorType(t.element_type, [])), at)
            shape = t.get_shape()
            tiled = _emit(tile.BroadcastOp(scalar, [], t), at) if shape else scalar
            splat.result.replace_all_uses_with(tiled)
            splat.detach()
            splat.erase()
        for mask, ratios in masks:
            bounds: list[int | SSAValue] = []
            for b, r in zip(mask.bound_sizes, ratios, strict=True):
                if r is None:
                    bounds.append(b)
                    continue
                bounds.append(_scaled(size.result, r / per, InsertPoint.before(mask)))
            new = tile.MaskOp(list(mask.offsets), bounds, mask.result.type.get_shape())
            Rewriter.replace_op(mask, new)

    def _host(self, f: func.FuncOp) -> None:
        block = f.body.block
        outputs = tile.output_params(f)
        inputs = [
            (i, d)
            for i, (a, out) in enumerate(zip(block.args, outputs, strict=True))
            if not out
            for d, r in enumerate(self.dims.get(a, []))
            if r is not None
        ]
        touched = any(a in self.dims for a in block.args) or any(
            op in self.grids or any(r in self.dims for r in op.results) for op in block.ops
        )
        if not touched:
            return
        if not inputs:
            raise self._fail(f, "an output whose size no input has")
        for i, d in inputs:
            if self.dims[block.args[i]][d] != 1:
                raise self._fail(f, f"input {i} (its dims are not the size itself)")
        source, dim = inputs[0]
        n = tile.DimOp(block.args[source], dim)
        Rewriter.insert_op(n, InsertPoint.at_start(block))
        self._signature(f, outputs, inputs)
        for op in list(block.ops):
            if isinstance(op, tile.AllocOp) and op.result in self.dims:
                sizes = [
                    _scaled(n.result, r, InsertPoint.before(op))
                    for r in self.dims[op.result]
                    if r is not None
                ]
                new = tile.AllocOp(op.result.type, sizes)  # type: ignore[arg-type]
                Rewriter.replace_op(op, new)
            elif isinstance(op, tile.LaunchOp):
                self._launch(op, n.result)

    def _signature(self, f: func.FuncOp, outputs: list[bool], inputs: list) -> None:
        block = f.body.block
        f.function_type = func.FunctionType.from_lists(
            [a.type for a in block.args], list(f.function_type.outputs.data)
        )
        attrs = (
            list(f.arg_attrs.data)
            if f.arg_attrs is not None
            else [DictionaryAttr({})] * len(block.args)
        )
        source, dim = inputs[0]
        for i, (a, out) in enumerate(zip(block.args, outputs, strict=True)):
            ratios = self.dims.get(a)
            if not out or ratios is None:
                continue
            if any(r is not None and r != 1 for r in ratios):
                raise self._fail(f, f"output {i} (a dim that is a multiple of the size)")
            pairs = [x for r in ratios if r is not None for x in (source, dim)]
            entries = dict(attrs[i].data)
            entries[tile.DIMS_FROM_ATTR] = int_array(pairs)
            attrs[i] = DictionaryAttr(entries)
        same = [x for pair in inputs for x in pair]
        if len(inputs) > 1:
            f.attributes[tile.SAME_SIZE_ATTR] = int_array(same)
        f.arg_attrs = ArrayAttr(attrs)

    def _launch(self, op: tile.LaunchOp, n: SSAValue) -> None:
        k = op.callee()
        args = []
        for a, p in zip(op.args, k.param_types, strict=True):
            if a.type != p and (tile.is_dynamic(p) or tile.is_dynamic(a.type)):  # type: ignore[arg-type]
                view = tile.ViewOp(a, p)
                Rewriter.insert_op(view, InsertPoint.before(op))
                a = view.result
            args.append(a)
        grid: list[int | SSAValue] = list(op.grid_sizes)
        if op in self.grids:
            grid = [self._grid(op, k, n)]
        Rewriter.replace_op(op, tile.LaunchOp(k.sym_name.data, grid, args))

    def _grid(self, op: tile.LaunchOp, k: tile.KernelOp, n: SSAValue) -> SSAValue:
        """The kernel's block count at run time: each iteration size a multiple of the
        size is `r * n`; checked against the grid at both hints."""
        if k.grid_rank != 1:
            raise self._fail(op, "the grid of a kernel of several grid dims")
        twin_launch = self.grids[op]
        twin = twin_launch.callee()
        sizes_a, sizes_b = k.array_attr("iteration_sizes"), twin.array_attr("iteration_sizes")
        blocks = k.array_attr("block_sizes")
        if sizes_a is None or sizes_b is None or blocks is None:
            raise self._fail(op, "the grid of a kernel without iteration sizes")
        reduced = k.int_attr("reduce_dim")
        static, dynamic = 1, []
        for d, (s, t, b) in enumerate(zip(sizes_a, sizes_b, blocks, strict=True)):
            if d == reduced:
                continue
            if s == t:
                static *= -(-s // b)
                continue
            r = _ratio(s, t, self.hints)
            if r is None or r.denominator != 1:
                raise self._fail(op, "an iteration size")
            dynamic.append((int(r), b))
        at = InsertPoint.before(op)
        for hint, launch in ((self.hints[0], op), (self.hints[1], twin_launch)):
            grid = static * math.prod(-(-r * hint // b) for r, b in dynamic)
            if grid != launch.grid_sizes[0]:
                return self._grid_of_its_values(op, twin_launch, n, at)
        total: SSAValue | None = None
        for r, b in dynamic:
            count = _scaled(n, Fraction(r, b), at)
            total = count if total is None else _emit(arith.MuliOp(total, count), at)
        assert total is not None
        return total if static == 1 else _emit(arith.MuliOp(total, _index(static, at)), at)

    def _grid_of_its_values(
        self, op: tile.LaunchOp, twin: tile.LaunchOp, n: SSAValue, at: InsertPoint
    ) -> SSAValue:
        """A grid that is not the product of the iteration sizes' block counts (the
        attention schedule streams its last dim in each program): `r * n` when it is
        that at both hints (r an integer; not a block count: see the module doc)."""
        a, b = op.grid_sizes[0], twin.grid_sizes[0]
        assert isinstance(a, int) and isinstance(b, int)
        ratio = _ratio(a, b, self.hints)
        if ratio is None or ratio.denominator != 1:
            raise self._fail(op, "the grid (not the kernel's block count)")
        return _scaled(n, ratio, at)


def _emit(op: Operation, at: InsertPoint) -> SSAValue:
    Rewriter.insert_op(op, at)
    return op.results[0]


def _index(value: int, at: InsertPoint) -> SSAValue:
    return _emit(arith.ConstantOp(IntegerAttr(value, IndexType())), at)


def _scaled(n: SSAValue, r: Fraction, at: InsertPoint) -> SSAValue:
    """`n * r` rounded up: a size for an integral `r`; for r = p / q, the number of
    blocks of q covering p * n (what every size-dependent fraction convert-nn-to-tile
    computes is: a block count, `ceil(size / block)`)."""
    value = n
    if r.numerator != 1:
        value = _emit(arith.MuliOp(value, _index(r.numerator, at)), at)
    if r.denominator != 1:
        value = _emit(arith.CeilDivUIOp(value, _index(r.denominator, at)), at)
    return value


def generalize(a: ModuleOp, b: ModuleOp, hints: tuple[int, int]) -> None:
    """Tile module `a` (lowered at `hints[0]`) made of dynamic size in place, by its
    differences from `b` (the same function lowered at `hints[1]`); see the module
    docstring. A located CompileError for a difference tile IR cannot compute."""
    g = _Generalizer(a, b, hints)
    g.compare()
    g.rewrite()
    try:
        verify_module(a)
    except CompileError as e:  # a `?` where an op needs a static size (a GEMM's K)
        message = (
            "dynamic sizes: made of dynamic size, the lowering does not verify (an op "
            f"needs a static size where the size is); compile this function with static "
            f"sizes: {e.message}"
        )
        raise SizeDependentLowering(message, e.location, e.context) from None


__all__ = [
    "HINTS",
    "SizeDependentLowering",
    "SizedFunction",
    "as_sized",
    "generalize",
    "has_dynamic_functions",
    "is_dynamic_function",
    "located_text",
    "lower_dynamic",
    "lower_sized",
    "replace_body",
    "specialize",
]
