"""Print one `tile.kernel` as a CUDA C++ `__global__` function.

Steps of `KernelEmitter.emit()`:
1. parameters become `T* __restrict__` pointers (`const` when the kernel never writes
   them); the block has `num_warps * 32` threads; program ids are `blockIdx.x/y/z`;
2. the body is printed op by op in order (`scf.for` as a C `for` loop with its
   iter_args as variables); each tile value is held in the form of `values.Val`,
   chosen by its producer and converted on demand (`as_dist`, `as_array`), so
   layout changes cost a shared-memory round trip only where one is needed;
3. shared memory (promoted buffers, conversion scratch, matmul staging) is carved
   out of one dynamic `extern __shared__` block; its size is `smem_bytes`.

Memory ops live in `memory.py`, reductions in `reduce.py`, `tile.dot` in `dot.py`.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    Float32Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    TensorType,
    f32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from fuseopt.backends.cuda import op_table
from fuseopt.backends.cuda.names import NameTable
from fuseopt.backends.cuda.values import Buffer, Layout, Val, default_layout
from fuseopt.diagnostics import CompileError, error_at
from fuseopt.dialects import nn, tile
from fuseopt.dialects.syntax import array_values

SMEM_LIMIT = 227 * 1024
"""Most dynamic shared memory one H100 thread block may use."""
SMEM_ALIGN = 128
"""Alignment of every shared-memory buffer (WMMA needs 32 bytes; 128 keeps banks tidy)."""

Handler = Callable[["KernelEmitter", Operation], None]


class KernelEmitter:
    """Prints one kernel; owns its name table, shared-memory plan and value map."""

    def __init__(self, kernel: tile.KernelOp, c_name: str):
        self.kernel = kernel
        self.c_name = c_name
        self.names = NameTable()
        self.names.taken.update({"fo_tid", "fo_lane", "fo_warp", "fo_smem", c_name})
        attrs = kernel.attributes
        warps = _int_attr(attrs.get("num_warps"), 4)
        if warps not in (1, 2, 4, 8, 16, 32):
            raise error_at(kernel, f"num_warps must be a power of two up to 32, got {warps}")
        self.warps = warps
        self.nt = warps * 32
        widest = max(
            (op_table.element_bytes(t.element_type) for t in kernel.param_types), default=4
        )
        self.vector = _int_attr(attrs.get("vector_width"), max(1, 16 // widest))
        if self.vector & (self.vector - 1):
            self.vector = 1
        self.values: dict[SSAValue, Val | Buffer | str] = {}
        self.lines: list[str] = []
        self.decls: list[str] = []
        self.indent = 1
        self.loop_depth = 0
        self.smem_bytes = 0
        self.uses_wmma = False
        self.uses_cp_async = False
        self.deferred: dict[Operation, str] = {}
        self.skipped: set[Operation] = set()
        self.constants: list[str] = []

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

    def smem_alloc(self, ctype: str, count: int, hint: str) -> str:
        """A new shared-memory array of `count` elements of `ctype`; returns its name."""
        name = self.fresh(hint)
        size = {"float": 4, "__half": 2, "__nv_bfloat16": 2, "bool": 1, "long long": 8}[ctype]
        offset = -(-self.smem_bytes // SMEM_ALIGN) * SMEM_ALIGN
        self.smem_bytes = offset + max(1, count) * size
        if self.smem_bytes > SMEM_LIMIT:
            raise error_at(
                self.kernel,
                f"kernel needs {self.smem_bytes} bytes of shared memory; the limit is "
                f"{SMEM_LIMIT} (use smaller tile sizes)",
            )
        self.decls.append(f"{ctype}* {name} = reinterpret_cast<{ctype}*>(fo_smem + {offset});")
        return name

    # ----------------------------------------------------------------- driver

    def emit(self) -> str:
        """The kernel's C++ source (one `extern "C" __global__` function)."""
        from fuseopt.backends.cuda.dot import dot_handlers
        from fuseopt.backends.cuda.memory import memory_handlers
        from fuseopt.backends.cuda.reduce import reduce_handlers

        self.handlers: dict[type[Operation], Handler] = {
            **_CORE_HANDLERS,
            **memory_handlers(),
            **reduce_handlers(),
            **dot_handlers(),
        }
        block = self.kernel.body.block
        written = _written_params(self.kernel)
        params = []
        for i, arg in enumerate(block.args):
            t = arg.type
            assert isinstance(t, MemRefType)
            name = self.fresh(f"p{i}")
            ro = i not in written
            ctype = op_table.c_type(t.element_type)
            params.append(f"{'const ' if ro else ''}{ctype}* __restrict__ {name}")
            self.values[arg] = Buffer(name, tuple(t.get_shape()), t.element_type, False, ro)
        self.emit_block(block)
        head = [
            f'extern "C" __global__ void __launch_bounds__({self.nt})',
            f"{self.c_name}({', '.join(params)}) {{",
            "  extern __shared__ __align__(128) unsigned char fo_smem[];",
            "  const int fo_tid = threadIdx.x;",
            "  const int fo_lane = fo_tid & 31;",
            "  const int fo_warp = fo_tid >> 5;",
            "  (void)fo_smem; (void)fo_lane; (void)fo_warp;",
        ]
        return "\n".join([*head, *("  " + d for d in self.decls), *self.lines, "}"]) + "\n"

    def emit_block(self, block: Block) -> None:
        """Print every op of `block` in order."""
        for op in block.ops:
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
        """A one-element tile held by every thread."""
        assert x.n == 1
        if x.kind == "uniform":
            return x
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
        parents = {x.layout for x in operands if x.kind in ("chunk", "rowred")}
        kinds = {x.kind for x in operands if x.kind != "uniform"}
        if kinds <= {"chunk"} and len(parents) == 1 or kinds <= {"rowred"} and len(parents) == 1:
            (lay,) = parents
            assert lay is not None
            name = self.fresh("r")
            self.line(f"{ctype} {name}[{lay.chunks}];")
            for k in range(lay.chunks):
                self.line(f"{name}[{k}] = {expr([self.slot(x, k, 0) for x in operands])};")
            self.values[result] = Val(kinds.pop(), name, shape, elem, lay)
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


def _int_attr(attr: Attribute | None, default: int) -> int:
    return attr.value.data if isinstance(attr, IntegerAttr) else default


def _written_params(kernel: tile.KernelOp) -> set[int]:
    """Indices of kernel parameters that some op writes (store, copy dest, gemm out)."""
    args = list(kernel.body.block.args)
    written: set[int] = set()
    for op in kernel.walk():
        targets: list[SSAValue] = []
        if isinstance(op, tile.StoreOp):
            targets = [op.buffer]
        elif isinstance(op, tile.CopyOp):
            targets = [op.dest]
        for v in targets:
            while isinstance(v.owner, tile.ViewOp):
                v = v.owner.source
            if v in args:
                written.add(args.index(v))
    return written


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


def _emit_reshape(em: KernelEmitter, op: Operation) -> None:
    x = em.val(op.operands[0])
    t = op.results[0].type
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    if x.kind in ("uniform", "array", "rowred"):
        em.values[op.results[0]] = Val(x.kind, x.name, shape, x.elem, x.layout, x.array_ctype)
        return
    lay = em.layout(shape)
    em.values[op.results[0]] = em.as_dist(x, lay)


def broadcast_source(
    dims: list[int], src: tuple[int, ...], dst: tuple[int, ...]
) -> list[int | None]:
    """For each result dim, the operand dim it reads (None where it is broadcast)."""
    out: list[int | None] = [None] * len(dst)
    for i, d in enumerate(dims):
        if src[i] != 1 or dst[d] == 1:
            out[d] = i
    return out


def emit_broadcast(em: KernelEmitter, x: Val, dims: list[int], result: SSAValue) -> None:
    """Bind `result` to `x` broadcast (operand dim i -> result dim dims[i])."""
    t = result.type
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    if x.kind == "uniform":
        em.values[result] = Val("uniform", x.name, shape, x.elem)
        return
    source = broadcast_source(dims, x.shape, shape)
    rows_only = all(s is not None for s in source[:-1]) and (not shape or source[-1] is None)
    if x.kind == "rowred" and x.layout is not None and x.layout.shape == shape and rows_only:
        em.values[result] = Val("chunk", x.name, shape, x.elem, x.layout)
        return
    lay = em.layout(shape)
    cols = shape[-1] if shape else 1
    only_last = all(s is None for s in source[:-1]) and shape and source[-1] is not None
    if (
        x.kind == "dist"
        and only_last
        and x.layout is not None
        and x.layout.v == lay.v
        and x.n == cols
        and cols % (lay.nt * lay.v) == 0
    ):
        per_row = cols // (lay.nt * lay.v)
        out = em.new_dist(shape, x.elem, "t", lay)
        em.for_slots(lay, lambda k, j: f"{em.slot(out, k, j)} = {em.slot(x, k % per_row, j)};")
        em.values[result] = out
        return
    lead = len(shape) - len(x.shape)
    if list(dims) == list(range(lead, len(shape))) and x.shape == shape[lead:]:
        from fuseopt.backends.cuda.memory import emit_broadcast_load

        out = em.new_dist(shape, x.elem, "bc", lay)
        if emit_broadcast_load(em, x, out):
            em.values[result] = out
            return
        em.lines.pop()  # the unused declaration
        em.names.taken.discard(out.name)
    arr = em.as_array(x)
    strides, acc = [0] * len(x.shape), 1
    for i in reversed(range(len(x.shape))):
        strides[i] = acc
        acc *= x.shape[i]

    def index(k: int, j: int) -> str:
        flat = f"({lay.chunk_start(k)} + {j})"
        terms, inner = [], 1
        for d in reversed(range(len(shape))):
            s = source[d]
            if s is not None:
                terms.append(f"({flat} / {inner} % {shape[d]}) * {strides[s]}")
            inner *= shape[d]
        return " + ".join(terms) or "0"

    out = em.new_dist(shape, x.elem, "t", lay)
    em.for_slots(
        lay, lambda k, j: f"{em.slot(out, k, j)} = {em.read(arr, index(k, j))};", valid_only=True
    )
    em.values[result] = out


def _emit_tile_broadcast(em: KernelEmitter, op: tile.BroadcastOp) -> None:
    emit_broadcast(em, em.val(op.input), list(array_values(op.dims)), op.result)


def _emit_nn_broadcast(em: KernelEmitter, op: nn.BroadcastOp) -> None:
    x = em.val(op.operands[0])
    t = op.results[0].type
    assert isinstance(t, TensorType)
    lead = len(t.get_shape()) - len(x.shape)
    emit_broadcast(em, x, [lead + i for i in range(len(x.shape))], op.results[0])


def emit_transpose(em: KernelEmitter, x: Val, perm: list[int], result: SSAValue) -> None:
    """Bind `result` to `x` with dims permuted (result dim i = operand dim perm[i])."""
    t = result.type
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    if x.kind == "uniform":
        em.values[result] = Val("uniform", x.name, shape, x.elem)
        return
    arr = em.as_array(x)
    strides, acc = [0] * len(x.shape), 1
    for i in reversed(range(len(x.shape))):
        strides[i] = acc
        acc *= x.shape[i]
    lay = em.layout(shape)

    def index(k: int, j: int) -> str:
        flat = f"({lay.chunk_start(k)} + {j})"
        terms, inner = [], 1
        for d in reversed(range(len(shape))):
            terms.append(f"({flat} / {inner} % {shape[d]}) * {strides[perm[d]]}")
            inner *= shape[d]
        return " + ".join(terms) or "0"

    out = em.new_dist(shape, x.elem, "t", lay)
    em.for_slots(
        lay, lambda k, j: f"{em.slot(out, k, j)} = {em.read(arr, index(k, j))};", valid_only=True
    )
    em.values[result] = out


def _emit_tile_transpose(em: KernelEmitter, op: tile.TransposeOp) -> None:
    from fuseopt.backends.cuda.dot import only_feeds_dots

    perm = list(array_values(op.permutation))
    if only_feeds_dots(op.result) and perm == [1, 0]:
        em.values[op.result] = Val(
            "lazy",
            "",
            tuple(op.result.type.get_shape()),  # type: ignore[union-attr]
            op.result.type.element_type,  # type: ignore[union-attr]
            extra={"materialize": lambda: _transpose_now(em, op), "transpose_of": op.input},
        )
        return
    emit_transpose(em, em.val(op.input), perm, op.result)


def _transpose_now(em: KernelEmitter, op: tile.TransposeOp) -> Val:
    emit_transpose(em, em.val(op.input), list(array_values(op.permutation)), op.result)
    got = em.values[op.result]
    assert isinstance(got, Val)
    return got


def _emit_nn_transpose(em: KernelEmitter, op: Operation) -> None:
    perm = list(array_values(op.attributes["permutation"]))
    emit_transpose(em, em.val(op.operands[0]), perm, op.results[0])


# ----------------------------------------------------------------- scalars and loops


_ARITH_BINARY = {
    arith.AddiOp: "({0} + {1})",
    arith.SubiOp: "({0} - {1})",
    arith.MuliOp: "({0} * {1})",
    arith.DivSIOp: "({0} / {1})",
    arith.RemSIOp: "({0} % {1})",
    arith.MinSIOp: "min({0}, {1})",
    arith.MaxSIOp: "max({0}, {1})",
    arith.FloorDivSIOp: "fo_floordiv({0}, {1})",
    arith.CeilDivSIOp: "fo_ceildiv({0}, {1})",
    arith.AndIOp: "({0} & {1})",
    arith.OrIOp: "({0} | {1})",
}


def _emit_arith_constant(em: KernelEmitter, op: arith.ConstantOp) -> None:
    v = op.value
    if not isinstance(v, IntegerAttr) or not isinstance(op.result.type, IndexType | type(v.type)):
        raise error_at(op, "the CUDA backend prints integer and index arith.constant only")
    em.values[op.result] = f"{v.value.data}LL"


def _emit_arith_binary(em: KernelEmitter, op: Operation) -> None:
    a, b = (em.scalar(v) for v in op.operands)
    name = em.fresh("i")
    em.line(f"const long long {name} = {_ARITH_BINARY[type(op)].format(a, b)};")
    em.values[op.results[0]] = name


def _emit_index_cast(em: KernelEmitter, op: Operation) -> None:
    em.values[op.results[0]] = em.scalar(op.operands[0])


def _emit_for(em: KernelEmitter, op: scf.ForOp) -> None:
    from fuseopt.backends.cuda.dot import carried_frag
    from fuseopt.backends.cuda.pipeline import try_pipelined_matmul

    if try_pipelined_matmul(em, op):
        return

    from fuseopt.backends.cuda.reduce import IDENTITY, deferred_reductions

    lb, ub, step = em.scalar(op.lb), em.scalar(op.ub), em.scalar(op.step)
    body = op.body.block
    carried: list[Val] = []
    deferred = deferred_reductions(op)
    for i, (init, arg) in enumerate(zip(op.iter_args, body.args[1:], strict=True)):
        x = em.val(init)
        frag = None if i in deferred else carried_frag(em, op, arg, x)
        if i in deferred:
            red, comb = deferred[i]
            part = em.fresh("part")
            em.line(f"float {part} = {IDENTITY[(red.kind.data, 'float')]};")
            em.deferred[red] = part
            em.skipped.add(comb)
            c = Val(
                "deferred",
                part,
                x.shape,
                x.elem,
                extra={"init": em.as_uniform(x), "kind": red.kind.data},
            )
            em.values[red.result] = c
            em.values[comb.results[0]] = c
            carried.append(c)
        elif frag is not None:
            carried.append(frag)
        elif x.n == 1:
            u = em.as_uniform(x)
            name = em.fresh("acc")
            em.line(f"{op_table.c_type(x.elem)} {name} = {u.name};")
            carried.append(Val("uniform", name, x.shape, x.elem))
        else:
            lay = em.layout(x.shape)
            src = em.as_dist(x, lay)
            out = em.new_dist(x.shape, x.elem, "acc", lay)
            em.for_slots(
                lay, lambda k, j, o=out, s=src: f"{em.slot(o, k, j)} = {em.slot(s, k, j)};"
            )
            carried.append(out)
    for arg, c in zip(body.args[1:], carried, strict=True):
        em.values[arg] = c
    iv = em.fresh("iv")
    em.values[body.args[0]] = iv
    em.open(f"for (long long {iv} = {lb}; {iv} < {ub}; {iv} += {step})")
    em.loop_depth += 1
    em.loop_carried = carried
    for inner in body.ops:
        if isinstance(inner, scf.YieldOp):
            _emit_yield(em, inner, carried)
        elif inner not in em.skipped:
            em.emit_op(inner)
    em.loop_depth -= 1
    em.close()
    for res, c in zip(op.results, carried, strict=True):
        em.values[res] = _finish_deferred(em, c) if c.kind == "deferred" else c


def _finish_deferred(em: KernelEmitter, c: Val) -> Val:
    """After the loop: combine the threads' partials, then the loop's initial value."""
    from fuseopt.backends.cuda.reduce import COMBINE, block_allreduce

    block_allreduce(em, [c.name], c.extra["kind"], "float")
    init = c.extra["init"]
    name = em.fresh("red")
    value = COMBINE[c.extra["kind"]].format(init.name, c.name)
    em.line(f"const float {name} = {value};")
    return Val("uniform", name, c.shape, c.elem)


def _emit_yield(em: KernelEmitter, op: scf.YieldOp, carried: list[Val]) -> None:
    from fuseopt.backends.cuda.dot import assign_frag

    news = [em.val(v) for v in op.operands]
    staged: list[Val] = []
    for new, c in zip(news, carried, strict=True):
        if c.kind in ("frag", "deferred"):
            staged.append(new)
        elif c.kind == "uniform":
            staged.append(em.as_uniform(new))
        else:
            assert c.layout is not None
            staged.append(em.as_dist(new, c.layout))
    for new, c in zip(staged, carried, strict=True):
        if new.name == c.name or c.kind == "deferred":
            continue
        if c.kind == "frag":
            assign_frag(em, c, new)
        elif c.kind == "uniform":
            em.line(f"{c.name} = {new.name};")
        else:
            assert c.layout is not None
            em.for_slots(
                c.layout, lambda k, j, c=c, new=new: f"{em.slot(c, k, j)} = {em.slot(new, k, j)};"
            )


def _emit_program_id(em: KernelEmitter, op: tile.ProgramIdOp) -> None:
    axis = op.axis.value.data
    name = em.fresh(f"pid{axis}")
    em.line(f"const long long {name} = (long long)blockIdx.{'xyz'[axis]};")
    em.values[op.result] = name


def _emit_return(em: KernelEmitter, op: Operation) -> None:
    """The kernel's end: nothing to print (an early `return` would skip barriers)."""


_CORE_HANDLERS: dict[type[Operation], Handler] = {
    nn.ConstantOp: _emit_constant,  # type: ignore[dict-item]
    nn.CompareOp: _emit_compare,  # type: ignore[dict-item]
    nn.SelectOp: _emit_select,
    nn.CastOp: _emit_cast,
    nn.ReshapeOp: _emit_reshape,
    nn.BroadcastOp: _emit_nn_broadcast,  # type: ignore[dict-item]
    nn.TransposeOp: _emit_nn_transpose,
    tile.BroadcastOp: _emit_tile_broadcast,  # type: ignore[dict-item]
    tile.TransposeOp: _emit_tile_transpose,  # type: ignore[dict-item]
    tile.ProgramIdOp: _emit_program_id,  # type: ignore[dict-item]
    tile.ReturnOp: _emit_return,
    arith.ConstantOp: _emit_arith_constant,  # type: ignore[dict-item]
    arith.IndexCastOp: _emit_index_cast,
    scf.ForOp: _emit_for,  # type: ignore[dict-item]
    **{cls: _emit_unary for cls in nn.UNARY_OPS},
    **{cls: _emit_binary for cls in nn.BINARY_OPS},
    **{cls: _emit_arith_binary for cls in _ARITH_BINARY},
}
_ = Float32Type
