"""Print one `tile.kernel` as a CUDA C++ `__global__` function.

Steps of `KernelEmitter.emit()`:
1. parameters become `T* __restrict__` pointers (`const` when the kernel never writes
   them), then one `long long` per dynamic dim (`?`) of a parameter, in order (index
   arithmetic, masks and `tile.dim` read them); the block has `num_warps * 32`
   threads; program ids are `blockIdx.x/y/z`;
2. the body is printed op by op in order (`scf.for` as a C `for` loop with its
   iter_args as variables); each tile value is held in the form of `values.Val`,
   chosen by its producer and converted on demand (`as_dist`, `as_array`), so
   layout changes cost a shared-memory round trip only where one is needed;
3. shared memory (promoted buffers, conversion scratch, matmul staging) is carved
   out of one dynamic `extern __shared__` block, one buffer after another; a region
   whose last reader is behind a barrier may be released (`smem_release`: the matmul
   K loop's operand stages, which the epilogue then reuses); `smem_bytes` is the peak.
   A kernel that needs more than the device has is a located error (at the kernel, or
   where it is launched when the kernel itself has no location).

Elementwise nn ops are printed here; shape ops live in `shape_ops.py`, scalars and
loops in `loops.py`, memory ops in `memory.py`, reductions in `reduce.py`, `tile.dot`
in `dot.py` (and the pipelined K loop in `pipeline.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    MemRefType,
    TensorType,
    f32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from fuseopt.backends.cuda import op_table
from fuseopt.backends.cuda.emission_order import late_loads_order, written_params
from fuseopt.backends.cuda.index_facts import IndexFacts
from fuseopt.backends.cuda.names import NameTable
from fuseopt.backends.cuda.values import Buffer, Layout, Val, columns_fit, default_layout
from fuseopt.diagnostics import CompileError, error_at, op_location
from fuseopt.dialects import nn, tile
from fuseopt.passes.tile_promote import SHARED_ALIGN

SMEM_LIMIT = 227 * 1024
"""Most dynamic shared memory one H100 thread block may use."""
SMEM_ALIGN = SHARED_ALIGN
"""Alignment of every shared-memory buffer (WMMA needs 32 bytes; 128 keeps banks tidy),
as tile-promote's budget model assumes."""

Handler = Callable[["KernelEmitter", Operation], None]


class KernelEmitter:
    """Prints one kernel; owns its name table, shared-memory plan and value map."""

    def __init__(
        self, kernel: tile.KernelOp, c_name: str, grid_bound: tuple[int, ...] | None = None
    ):
        self.kernel = kernel
        self.index_facts = IndexFacts(grid_bound)
        """What is known of the index scalars (program ids bounded by `grid_bound`, the
        largest grid any launch uses; None: unknown)."""
        self.c_name = c_name
        self.names = NameTable()
        self.names.taken.update({"fo_tid", "fo_lane", "fo_warp", "fo_smem", c_name})
        warps = kernel.require_int("num_warps")
        if warps not in (1, 2, 4, 8, 16, 32):
            raise self.error(f"num_warps must be a power of two up to 32, got {warps}")
        # WMMA accumulators live in registers: keep them near 64 per thread (the gated
        # MLP's two 128x64 accumulators would spill at 4 warps)
        acc = sum(
            math.prod(d.acc.type.get_shape())  # type: ignore[union-attr]
            for d in kernel.walk()
            if isinstance(d, tile.DotOp)
        )
        while warps < 8 and acc > 64 * warps * 32:
            warps *= 2
        self.warps = warps
        self.nt = warps * 32
        self.vector = kernel.require_int("vector_width")
        if self.vector & (self.vector - 1):
            self.vector = 1
        self.values: dict[SSAValue, Val | Buffer | str] = {}
        self.lines: list[str] = []
        self.decls: list[str] = []
        self.indent = 1
        self.loop_depth = 0
        self.loop_path: tuple[int, ...] = ()
        """The loops being printed, outermost first, each by its number in the kernel:
        code printed under a path that extends another's runs after it, in the same
        iteration (so what it staged may be reused)."""
        self.loops_printed = 0
        self.smem_bytes = 0
        self.smem_top = 0
        self.uses_wmma = False
        self.uses_cp_async = False
        self.deferred: dict[Operation, str] = {}
        self.skipped: set[Operation] = set()
        self.constants: list[str] = []
        self.sizes: list[tuple[int, int]] = []
        """(parameter, dim) of each dynamic dim (`?`) of the parameters, in order: the
        kernel takes each as a `long long` after the pointers."""

    # ----------------------------------------------------------------- output

    def line(self, text: str) -> None:
        """Append one line of C++ at the current indentation."""
        self.lines.append("  " * self.indent + text)

    def open(self, header: str) -> None:
        """Open a `{` block after `header`."""
        self.line(f"{header} {{" if header else "{")
        self.indent += 1

    def close(self) -> None:
        """Close the innermost block."""
        self.indent -= 1
        self.line("}")

    def fresh(self, hint: str) -> str:
        """A new local identifier."""
        return self.names.fresh(hint)

    def barrier(self) -> None:
        """`__syncthreads()`: every thread of the program reaches it (uniform control flow)."""
        if self.lines and self.lines[-1].strip() == "__syncthreads();":
            return  # two barriers in a row order nothing more than one
        self.line("__syncthreads();")

    def error(self, message: str) -> CompileError:
        """A CompileError about the kernel, located at the kernel op, or where it is
        launched when the kernel has no location (a kernel convert-nn-to-tile built)."""
        if op_location(self.kernel) is None:
            module = self.kernel.parent_op()
            name = self.kernel.sym_name.data
            for op in module.walk() if module is not None else ():
                if isinstance(op, tile.LaunchOp) and op.kernel.root_reference.data == name:
                    return error_at(op, message)
        return error_at(self.kernel, message)

    def smem_alloc(self, ctype: str, count: int, hint: str) -> str:
        """A new shared-memory array of `count` elements of `ctype`; returns its name."""
        name = self.fresh(hint)
        size = {"float": 4, "__half": 2, "__nv_bfloat16": 2, "bool": 1, "long long": 8}[ctype]
        offset = -(-self.smem_top // SMEM_ALIGN) * SMEM_ALIGN
        self.smem_top = offset + max(1, count) * size
        self.smem_bytes = max(self.smem_bytes, self.smem_top)
        if self.smem_bytes > SMEM_LIMIT:
            attention = self.kernel.schedule is not None and (
                self.kernel.schedule.data == tile.Schedule.ATTENTION
            )
            sizes = (
                "attention-block-m=.. attention-block-n=.. (the CUDA backend's are 64 and 32)"
                if attention
                else "block-m=.. block-n=.. block-k=.."
            )
            raise self.error(
                f"kernel needs {self.smem_bytes} bytes of shared memory; the limit is "
                f"{SMEM_LIMIT}: use smaller tile sizes (convert-nn-to-tile{{{sizes}}}) or a "
                "lower tile-promote{shared-bytes=..}"
            )
        self.decls.append(f"{ctype}* {name} = reinterpret_cast<{ctype}*>(fo_smem + {offset});")
        return name

    def smem_mark(self) -> int:
        """The current end of the allocated shared memory (for `smem_release`)."""
        return self.smem_top

    def smem_release(self, mark: int) -> None:
        """Free every buffer allocated since `smem_mark()` returned `mark`: later buffers
        may overlap them. The caller has printed a barrier after their last use."""
        self.smem_top = mark

    # ----------------------------------------------------------------- driver

    def emit(self) -> str:
        """The kernel's C++ source (one `extern "C" __global__` function)."""
        from fuseopt.backends.cuda.dot import dot_handlers
        from fuseopt.backends.cuda.loops import loop_handlers
        from fuseopt.backends.cuda.memory import memory_handlers
        from fuseopt.backends.cuda.reduce import reduce_handlers
        from fuseopt.backends.cuda.shape_ops import shape_handlers

        self.handlers: dict[type[Operation], Handler] = {
            **_CORE_HANDLERS,
            **shape_handlers(),
            **loop_handlers(),
            **memory_handlers(),
            **reduce_handlers(),
            **dot_handlers(),
        }
        block = self.kernel.body.block
        self.written = written_params(self.kernel)
        params, size_params = [], []
        for i, arg in enumerate(block.args):
            t = arg.type
            assert isinstance(t, MemRefType)
            name, ro = self.fresh(f"p{i}"), i not in self.written
            params.append(
                f"{'const ' if ro else ''}{op_table.c_type(t.element_type)}* __restrict__ {name}"
            )
            try:
                buf = self.values[arg] = Buffer.parameter(name, t, ro, self.fresh)
            except ValueError as e:
                raise error_at(self.kernel, str(e)) from None
            dynamic = [(d, n) for d, n in enumerate(buf.shape) if isinstance(n, str)]
            self.sizes += [(i, d) for d, _ in dynamic]
            size_params += [f"const long long {n}" for _, n in dynamic]
        params += size_params
        self.emit_block(block)
        head = [
            f'extern "C" __global__ void __launch_bounds__({self.launch_bounds()})',
            f"{self.c_name}({', '.join(params)}) {{",
            "  extern __shared__ __align__(128) unsigned char fo_smem[];",
            "  const int fo_tid = threadIdx.x;",
            "  const int fo_lane = fo_tid & 31;",
            "  const int fo_warp = fo_tid >> 5;",
            "  (void)fo_smem; (void)fo_lane; (void)fo_warp;",
        ]
        return "\n".join([*head, *("  " + d for d in self.decls), *self.lines, "}"]) + "\n"

    def launch_bounds(self) -> str:
        """`__launch_bounds__` arguments: threads, and for big blocks of kernels without
        tensor cores a minimum of blocks per SM that keeps 1536 threads resident (caps
        registers near 40; a memory-bound kernel needs the loads in flight more than the
        registers, and at 512 threads and ~48 registers only two blocks fit)."""
        if self.uses_wmma or self.nt < 512:
            return str(self.nt)
        return f"{self.nt}, {max(1, 1536 // self.nt)}"

    def emit_block(self, block: Block) -> None:
        """Print every op of `block`, loads of read-only global buffers just before their
        first use (`late_loads_order`)."""
        for op in late_loads_order(block, self.written):
            self.emit_op(op)

    def emit_op(self, op: Operation) -> None:
        """Print one op through the handler table (a located error if unsupported)."""
        handler = self.handlers.get(type(op))
        if handler is None:
            raise error_at(op, f"the CUDA backend cannot print '{op.name}' in a kernel")
        try:
            handler(self, op)
        except CompileError:
            raise
        except (ValueError, KeyError, AssertionError) as e:
            raise error_at(op, f"the CUDA backend cannot print '{op.name}': {e}") from None

    # ----------------------------------------------------------------- values

    def scalar(self, v: SSAValue) -> str:
        """The C expression of an index/integer scalar."""
        got = self.values[v]
        assert isinstance(got, str), f"{v} is not a scalar"
        return got

    def buffer(self, v: SSAValue) -> Buffer:
        """The kernel buffer bound to a memref value."""
        got = self.values[v]
        assert isinstance(got, Buffer), f"{v} is not a buffer"
        return got

    def val(self, v: SSAValue) -> Val:
        """The tile bound to a tensor value (materializing a lazy one)."""
        got = self.values[v]
        assert isinstance(got, Val), f"{v} is not a tile"
        if got.kind == "lazy":
            got = got.extra["materialize"]()
            self.values[v] = got
        return got

    def layout(self, shape: tuple[int, ...]) -> Layout:
        """The default dist layout for `shape` in this kernel."""
        return default_layout(shape, self.nt, self.vector)

    def slot(self, x: Val, k: int, j: int) -> str:
        """C expression of slot (chunk k, element j) of `x` in its dist-like form."""
        if x.kind == "uniform":
            return x.name
        if x.kind in ("chunk", "rowred"):
            return f"{x.name}[{k}]"
        if x.kind == "colred":
            return f"{x.name}[{j}]"
        assert x.kind == "dist" and x.layout is not None
        return f"{x.name}[{k * x.layout.v + j}]"

    def read(self, x: Val, index: str) -> str:
        """C expression reading flat element `index` of an array tile, as its element type."""
        assert x.kind == "array"
        expr = f"{x.name}[{index}]"
        ctype = op_table.c_type(x.elem)
        if x.array_ctype and x.array_ctype != ctype:
            return f"fo_to<{ctype}>::of({expr})"
        return expr

    def new_dist(
        self, shape: tuple[int, ...], elem: Attribute, hint: str, layout: Layout | None = None
    ) -> Val:
        """Declare a dist register array for a tile of `shape`."""
        lay = layout or self.layout(shape)
        name = self.fresh(hint)
        self.line(f"alignas(16) {op_table.c_type(elem)} {name}[{lay.slots}];")
        return Val("dist", name, tuple(shape), elem, lay)

    def for_slots(
        self, lay: Layout, body: Callable[[int, int], str | None], valid_only: bool = False
    ) -> None:
        """Print `body(k, j)` for every slot (unrolled at print time, one line each)."""
        for k in range(lay.chunks):
            guard = valid_only and lay.guarded and (k + 1) * lay.nt * lay.v > lay.n
            if guard:
                self.open(f"if ({lay.chunk_start(k)} < {lay.n})")
            for j in range(lay.v):
                text = body(k, j)
                if text:
                    self.line(text)
            if guard:
                self.close()

    def as_dist(self, x: Val, lay: Layout | None = None) -> Val:
        """`x` readable with `slot()` in layout `lay` (default layout of its shape)."""
        lay = lay or self.layout(x.shape)
        if x.kind == "uniform":
            return x
        if x.kind == "dist" and x.layout == lay:
            return x
        if x.kind == "chunk" and x.layout == lay:
            return x
        if x.kind == "colred" and columns_fit(x, lay):
            out = self.new_dist(lay.shape, x.elem, "t", lay)
            self.for_slots(lay, lambda k, j: f"{self.slot(out, k, j)} = {x.name}[{j}];")
            return out
        if (
            x.kind == "dist"
            and x.layout is not None
            and x.layout.v == lay.v
            and x.layout.n == lay.n
        ):
            return Val("dist", x.name, lay.shape, x.elem, lay)
        arr = self.as_array(x)
        out = self.new_dist(lay.shape, x.elem, "t", lay)
        self.for_slots(
            lay,
            lambda k, j: (
                f"{self.slot(out, k, j)} = {self.read(arr, f'{lay.chunk_start(k)} + {j}')};"
            ),
            valid_only=True,
        )
        return out

    def as_array(self, x: Val) -> Val:
        """`x` with every element addressable in shared memory (row-major)."""
        if x.kind == "array":
            return x
        if x.kind == "colred":
            return x.extra.get("array") or self.as_array(
                self.as_dist(x, Layout(x.shape, self.nt, x.layout.v))  # type: ignore[union-attr]
            )
        if x.kind == "frag":
            from fuseopt.backends.cuda.dot import frag_to_array

            return frag_to_array(self, x)
        ctype = op_table.c_type(x.elem)
        name = self.smem_alloc(ctype, x.n, "sm")
        out = Val("array", name, x.shape, x.elem, array_ctype=ctype)
        if self.loop_depth:
            self.barrier()
        if x.kind == "uniform":
            self.open(f"for (int fo_i = fo_tid; fo_i < {x.n}; fo_i += {self.nt})")
            self.line(f"{name}[fo_i] = {x.name};")
            self.close()
        elif x.kind == "rowred":
            lay = x.layout
            assert lay is not None
            cols = lay.shape[-1] if lay.shape else 1
            for k in range(lay.chunks):
                start = lay.chunk_start(k)
                self.line(
                    f"if ({start} < {lay.n} && {start} % {cols} == 0) "
                    f"{name}[{start} / {cols}] = {x.name}[{k}];"
                )
        elif x.kind == "dist" and x.layout is not None and x.layout.v > 1:
            lay = x.layout
            for k in range(lay.chunks):
                guard = lay.guarded and (k + 1) * lay.nt * lay.v > lay.n
                start = lay.chunk_start(k)
                text = f"fo_copy_vec<{ctype}, {lay.v}>(&{name}[{start}], &{x.name}[{k * lay.v}]);"
                self.line(f"if ({start} < {lay.n}) {text}" if guard else text)
        else:
            lay = x.layout
            assert lay is not None and x.kind in ("dist", "chunk")
            self.for_slots(
                lay,
                lambda k, j: f"{name}[{lay.chunk_start(k)} + {j}] = {self.slot(x, k, j)};",
                valid_only=True,
            )
        self.barrier()
        return out

    def as_uniform(self, x: Val) -> Val:
        """A tile of one value (one element, or uniform already) held by every thread."""
        if x.kind == "uniform":
            return x
        assert x.n == 1
        arr = self.as_array(x)
        name = self.fresh("u")
        self.line(f"const {op_table.c_type(x.elem)} {name} = {self.read(arr, '0')};")
        return Val("uniform", name, x.shape, x.elem)

    def elementwise(
        self, op: Operation, operands: list[Val], result: SSAValue, expr: Callable[[list[str]], str]
    ) -> None:
        """Bind `result` to `expr` applied slot by slot (or once, when all are uniform)."""
        t = result.type
        assert isinstance(t, TensorType)
        shape, elem = tuple(t.get_shape()), t.element_type
        ctype = op_table.c_type(elem)
        if all(x.kind == "uniform" for x in operands):
            name = self.fresh("u")
            self.line(f"const {ctype} {name} = {expr([x.name for x in operands])};")
            self.values[result] = Val("uniform", name, shape, elem)
            return
        kinds = {x.kind for x in operands if x.kind != "uniform"}
        parents = {x.layout for x in operands if x.kind != "uniform"}
        if len(kinds) == 1 and kinds <= {"chunk", "rowred", "colred"} and len(parents) == 1:
            (kind,), (lay,) = kinds, parents
            assert lay is not None
            # the form's registers: one per chunk, or (colred) one per slot of a chunk
            count = lay.v if kind == "colred" else lay.chunks
            name = self.fresh("cr" if kind == "colred" else "r")
            self.line(f"{ctype} {name}[{count}];")
            for i in range(count):
                k, j = (0, i) if kind == "colred" else (i, 0)
                self.line(f"{name}[{i}] = {expr([self.slot(x, k, j) for x in operands])};")
            self.values[result] = Val(kind, name, shape, elem, lay)
            return
        lay = next((x.layout for x in operands if x.kind == "dist"), None) or self.layout(shape)
        if lay.shape != shape:
            lay = Layout(shape, lay.nt, lay.v)
        ins = [self.as_dist(x, lay) for x in operands]
        out = self.new_dist(shape, elem, "t", lay)
        self.for_slots(
            lay, lambda k, j: f"{self.slot(out, k, j)} = {expr([self.slot(x, k, j) for x in ins])};"
        )
        self.values[result] = out


# --------------------------------------------------------------------------- core ops


def _emit_constant(em: KernelEmitter, op: nn.ConstantOp) -> None:
    t = op.result.type
    assert isinstance(t, TensorType)
    shape, elem = tuple(t.get_shape()), t.element_type
    splat = op.splat_value
    if splat is not None:
        name = em.fresh("c")
        em.line(f"const {op_table.c_type(elem)} {name} = {op_table.literal(splat, elem)};")
        em.values[op.result] = Val("uniform", name, shape, elem)
        return
    assert isinstance(op.value, DenseIntOrFPElementsAttr)
    kind = op_table.compute_kind(elem)
    store = {"float": "float", "int": "long long", "bool": "bool"}[kind]
    values = [op_table.literal(v, f32 if kind == "float" else elem) for v in op.value.get_values()]
    name = em.fresh("table")
    em.constants.append(
        f"static __device__ const {store} {name}[{len(values)}] = {{{', '.join(values)}}};"
    )
    em.values[op.result] = Val("array", name, shape, elem, array_ctype=store)


def _emit_unary(em: KernelEmitter, op: Operation) -> None:
    assert isinstance(op, nn.UnaryElementwiseOp)
    x = em.val(op.operands[0])
    em.elementwise(op, [x], op.results[0], lambda a: op_table.unary(op, a[0], x.elem))


def _emit_binary(em: KernelEmitter, op: Operation) -> None:
    assert isinstance(op, nn.BinaryElementwiseOp)
    a, b = em.val(op.operands[0]), em.val(op.operands[1])
    exponent = op.operands[1].owner
    if isinstance(op, nn.PowOp) and isinstance(exponent, nn.ConstantOp):
        c = exponent.splat_value
        if c is not None and op_table.pow_by_constant("x", c, a.elem) is not None:
            em.elementwise(
                op, [a], op.results[0], lambda s: op_table.pow_by_constant(s[0], c, a.elem) or ""
            )
            return
    em.elementwise(op, [a, b], op.results[0], lambda s: op_table.binary(op, s[0], s[1], a.elem))


def _emit_compare(em: KernelEmitter, op: nn.CompareOp) -> None:
    a, b = em.val(op.lhs), em.val(op.rhs)
    pred = op.predicate.data
    em.elementwise(op, [a, b], op.result, lambda s: op_table.compare(pred, s[0], s[1], a.elem))


def _emit_select(em: KernelEmitter, op: Operation) -> None:
    c, a, b = (em.val(v) for v in op.operands)
    em.elementwise(op, [c, a, b], op.results[0], lambda s: f"({s[0]} ? {s[1]} : {s[2]})")


def _emit_cast(em: KernelEmitter, op: Operation) -> None:
    x = em.val(op.operands[0])
    t = op.results[0].type
    assert isinstance(t, TensorType)
    em.elementwise(op, [x], op.results[0], lambda s: op_table.cast(s[0], x.elem, t.element_type))


_CORE_HANDLERS: dict[type[Operation], Handler] = {
    nn.ConstantOp: _emit_constant,  # type: ignore[dict-item]
    nn.CompareOp: _emit_compare,  # type: ignore[dict-item]
    nn.SelectOp: _emit_select,
    nn.CastOp: _emit_cast,
    **{cls: _emit_unary for cls in nn.UNARY_OPS},
    **{cls: _emit_binary for cls in nn.BINARY_OPS},
}
