"""Memory access of printed Triton kernels: addresses, masks, loads and stores.

A `tile.load`/`tile.store` box becomes `ptr + offs_0[:, None] * stride + offs_1[None, :]`
over `tl.arange`s shared within a scope; a bounds check is printed only where the
index ranges (`indexing`) do not prove the box inside the buffer, so evenly dividing
sizes give unmasked, vectorizable accesses. Shared memory (`tile.alloc` in a kernel,
`tile.copy`, `tile.barrier`, from tile-promote's row cache) has no Triton spelling:
reads of a shared buffer go to the global source it was copied from (Triton stages
through shared memory and caches by itself; those reads ask L2 to keep the row,
`evict_last`). A tile loaded only to be transposed is read transposed by addressing.
A `tile.gather` is one masked `tl.load` at the index tile's addresses.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue

from fuseopt.backends.python_names import NameTable
from fuseopt.backends.triton import op_table
from fuseopt.backends.triton.indexing import UNKNOWN, IndexRange, expand
from fuseopt.diagnostics import error_at
from fuseopt.dialects import tile
from fuseopt.dialects.syntax import array_values, is_float

if TYPE_CHECKING:
    from fuseopt.backends.triton.kernel_printer import PrintedKernel

INT32_LIMIT = 2**31 - 1
"""Buffers with more elements than this address in int64."""


def _shape(v: SSAValue) -> tuple[int, ...]:
    t = v.type
    return tuple(t.get_shape())  # type: ignore[attr-defined]


class MemoryPrinter:
    """The memory-access part of KernelPrinter (a mixin; state lives in KernelPrinter)."""

    dims: dict[SSAValue, tuple[int | str, ...]]
    ranges: dict[SSAValue, IndexRange]
    aranges: list[dict[tuple[str, int, bool], str]]
    shared: dict[SSAValue, tuple[SSAValue, list[SSAValue], list[SSAValue]] | None]
    folded: set[Operation]
    names: NameTable
    out: PrintedKernel

    def value(self, v: SSAValue) -> str:  # pragma: no cover - KernelPrinter defines it
        """The expression printed for `v`."""
        raise NotImplementedError

    def emit(self, line: str) -> None:  # pragma: no cover - KernelPrinter defines it
        """Append one statement."""
        raise NotImplementedError

    def bind(self, v: SSAValue, hint: str, expr: str) -> str:  # pragma: no cover
        """Print `name = expr` for `v`."""
        raise NotImplementedError

    def materialized(self, v: SSAValue) -> str:  # pragma: no cover
        """`v` as a full tile."""
        raise NotImplementedError

    def buffer_dims(self, buf: SSAValue) -> tuple[int | str, ...]:
        """Each dim of a buffer: a number, or the name of the kernel's size parameter
        for a dynamic one."""
        return self.dims.get(buf) or _shape(buf)

    def _arange(self, offset: SSAValue, size: int, wide: bool) -> str:
        """`offset + tl.arange(0, size)`, shared by the accesses of one scope."""
        base = self.value(offset)
        key = (base, size, wide)
        for scope in reversed(self.aranges):
            if key in scope:
                return scope[key]
        expr = f"tl.arange(0, {size})" if base == "0" else f"{base} + tl.arange(0, {size})"
        if wide:
            expr = f"({expr}).to(tl.int64)"
        name = self.names.fresh(f"offs_{base}" if base.isidentifier() else "offs")
        self.emit(f"{name} = {expr}")
        self.aranges[-1][key] = name
        return name

    def _address(
        self,
        buf: SSAValue,
        offsets: list[SSAValue],
        tile_shape: tuple[int, ...],
        positions: list[int] | None = None,
    ) -> tuple[str, str | None]:
        """(pointer expression, mask expression or None) for a box of a buffer.

        `positions[j]`: the printed tile dim that tile dim j lands on (a transposed
        load), default j.
        """
        shape = self.buffer_dims(buf)
        rank, t = len(shape), len(tile_shape)
        buf_type = buf.type
        assert isinstance(buf_type, MemRefType)
        steps: tuple[int | str, ...]
        if tile.is_dynamic(buf_type):  # contiguous; any size: int64 addressing
            steps, start, wide = tile.row_major_exprs(shape), 0, True
        else:
            steps, start = tile.buffer_strides(buf_type), tile.buffer_offset(buf_type)
            static = _shape(buf)
            extent = start + sum((n - 1) * s for n, s in zip(static, steps, strict=True)) + 1
            wide = max(extent, math.prod(static)) > INT32_LIMIT
        terms, checks = [self.value(buf)], []
        if start:  # a strided view: its elements start `start` into the buffer passed
            terms.append(str(start))
        for d, (o, n, s) in enumerate(zip(offsets, shape, steps, strict=True)):
            known = self.ranges.get(o, UNKNOWN)
            if d < rank - t:
                base = self.value(o)
                if base != "0":
                    if wide and not base.lstrip("-").isdigit():
                        base = f"tl.cast({base}, tl.int64)"
                    terms.append(base if s == 1 else f"{base} * {s}")
                if not (isinstance(n, int) and known.hi is not None and known.hi < n):
                    checks.append(f"({self.value(o)} < {n})")
                if not known.non_negative:
                    checks.append(f"({self.value(o)} >= 0)")
                continue
            j = d - (rank - t)
            size = tile_shape[j]
            idx = expand(self._arange(o, size, wide), j if positions is None else positions[j], t)
            terms.append(idx if s == 1 else f"{idx} * {s}")
            if not (isinstance(n, int) and known.hi is not None and known.hi + size <= n):
                checks.append(f"({idx} < {n})")
            if not known.non_negative:
                checks.append(f"({idx} >= 0)")
        return " + ".join(terms), " & ".join(checks) if checks else None

    def _shared_alloc(self, op: tile.AllocOp) -> None:
        """Shared memory has no Triton spelling: reads of it go to the copied source."""
        self.shared[op.result] = None

    def _copy(self, op: tile.CopyOp) -> None:
        """Record where the shared buffer's contents come from (no statement)."""
        if op.dest not in self.shared:
            raise error_at(op, "the triton target copies only into shared memory")
        self.shared[op.dest] = (op.source, list(op.src_offsets), list(op.dst_offsets))

    def _barrier(self, op: tile.BarrierOp) -> None:
        """Nothing to print: Triton orders a program's memory accesses itself."""

    def _same_offset(self, a: SSAValue, b: SSAValue) -> bool:
        """Are index values `a` and `b` provably equal (one value, or equal constants)?"""
        ca, cb = self.ranges.get(a, UNKNOWN).constant, self.ranges.get(b, UNKNOWN).constant
        return a is b or (ca is not None and ca == cb)

    def _source_of(self, op: tile.LoadOp) -> tuple[SSAValue, list[SSAValue]]:
        """The buffer and offsets a load really reads (through a shared-memory copy).

        The copy's box covers the trailing dims of the source and of the shared buffer,
        whose ranks may differ (a row cache drops the source's per-program dims). The
        source offsets are the copy's own on the source's leading dims; on each box dim
        `src_copy + (read - dst_copy)`: the read offset when the copy used the same
        offset on both sides, the copy's source offset when the copy and the read are at
        the same place of the destination. On the destination's leading dims the read
        must be where the copy wrote.
        """
        if op.buffer not in self.shared:
            return op.buffer, list(op.offsets)
        copied = self.shared[op.buffer]
        if copied is None:
            raise error_at(op, "a shared buffer is read before any tile.copy fills it")
        source, src_offs, dst_offs = copied
        reads = list(op.offsets)
        box = min(len(src_offs), len(dst_offs))
        lead_src, lead_dst = len(src_offs) - box, len(dst_offs) - box
        leading = zip(reads[:lead_dst], dst_offs[:lead_dst], strict=True)
        if not all(self._same_offset(r, d) for r, d in leading):
            raise error_at(op, "the triton target cannot map this shared-memory read")
        offsets = list(src_offs[:lead_src])
        box_dims = zip(reads[lead_dst:], src_offs[lead_src:], dst_offs[lead_dst:], strict=True)
        for read, src, dst in box_dims:
            if self._same_offset(read, dst):  # read - dst == 0
                offsets.append(src)
            elif src is dst:  # src - dst == 0
                offsets.append(read)
            else:
                raise error_at(op, "the triton target cannot map this shared-memory read")
        return source, offsets

    def _transposed_use(self, op: tile.LoadOp) -> tile.TransposeOp | None:
        """The 2-D transpose that is the only use of a load's tile, if any: the load
        then reads the tile transposed by addressing (no register shuffle, and the
        compiler sees the operand's memory order, as for `b.T` in a matmul)."""
        uses = list(op.result.uses)
        if len(uses) != 1 or len(_shape(op.result)) != 2:
            return None
        user = uses[0].operation
        if isinstance(user, tile.TransposeOp) and tuple(array_values(user.permutation)) == (1, 0):
            return user
        return None

    def _load(self, op: tile.LoadOp) -> None:
        buffer, offsets = self._source_of(op)
        transposed = self._transposed_use(op)
        positions = [1, 0] if transposed is not None else None
        ptr, mask = self._address(buffer, offsets, _shape(op.result), positions)
        element = op_table.element_type(op.result)
        args = [ptr]
        if mask is not None:
            fill = op_table.literal(
                op.fill_value if is_float(element) else int(op.fill_value), element
            )
            args += [f"mask={mask}", f"other={fill}"]
        if op.buffer in self.shared:  # a row-cached buffer is read again: keep it in L2
            args.append('eviction_policy="evict_last"')
        expr = f"tl.load({', '.join(args)})"
        if transposed is not None:
            self.bind(transposed.result, "x_t", expr)
            self.folded.add(transposed)
            return
        self.bind(op.result, "x", expr)

    def _gather(self, op: tile.GatherOp) -> None:
        """`tl.load(ptr + index, mask=in bounds, other=0)`: one address per element."""
        if op.buffer in self.shared:
            raise error_at(op, "the triton target gathers only from global memory")
        index = self.materialized(op.index)
        dims = self.buffer_dims(op.buffer)  # a dynamic dim is the kernel's size parameter
        names = [str(n) for n in dims if isinstance(n, str)]
        number = math.prod(n for n in dims if isinstance(n, int))
        numel = " * ".join(names + ([str(number)] if number != 1 or not names else []))
        zero = op_table.literal(0, op_table.element_type(op.result))
        self.bind(
            op.result,
            "gathered",
            f"tl.load({self.value(op.buffer)} + {index}, "
            f"mask=({index} >= 0) & ({index} < {numel}), other={zero})",
        )

    def _store(self, op: tile.StoreOp) -> None:
        ptr, mask = self._address(op.buffer, list(op.offsets), _shape(op.value))
        value = self.materialized(op.value)
        self.emit(
            f"tl.store({ptr}, {value})"
            if mask is None
            else f"tl.store({ptr}, {value}, mask={mask})"
        )

    def _mask(self, op: tile.MaskOp) -> None:
        shape = _shape(op.result)
        checks = []
        for j, (o, bound, size) in enumerate(zip(op.offsets, op.bound_sizes, shape, strict=True)):
            known = self.ranges.get(o, UNKNOWN)
            idx = expand(self._arange(o, size, False), j, len(shape))
            if isinstance(bound, SSAValue):
                checks.append(f"({idx} < {self.value(bound)})")
            elif not (known.hi is not None and known.hi + size <= bound):
                checks.append(f"({idx} < {bound})")
            if not known.non_negative:
                checks.append(f"({idx} >= 0)")
        if not checks:
            expr = f"tl.full({list(shape)}, 1, tl.int1)"
        else:  # a check may cover fewer dims than the tile: broadcast to its shape
            expr = f"tl.broadcast_to({' & '.join(checks)}, {list(shape)})"
        self.bind(op.result, "mask", expr)
