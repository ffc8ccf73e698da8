"""The `tile` dialect: fused kernels as grids of programs working on tiles.

The level both backends print. It follows Triton's programming model, which also maps
directly onto CUDA (one program = one thread block):

- **host side** (inside a `func.func`): global buffers are `memref`s (no memory space,
  or `#tile.memory_space<global>`); `tile.alloc` makes a temporary, `tile.view`
  reinterprets one under another shape, `tile.launch` runs a kernel over a grid, and
  `tile.gemm` calls a library GEMM (the `library_gemm` route). `tile.launch` and
  `tile.gemm` are host-only.
- **kernels**: `tile.kernel @name grid R (%buf: memref<...>, ...)` is a symbol whose body
  runs once per program instance of an R-dimensional grid. Inside, tiles are builtin
  ranked `tensor`s held in registers; `tile.program_id` says which program runs,
  `tile.load`/`tile.store` move a box of a buffer (the tile covers the buffer's trailing
  dims; out-of-bounds elements are masked: loads give `fill`, stores skip them),
  `tile.gather` loads element by element at flat positions a tile of i64 holds,
  `tile.mask` makes an explicit in-bounds mask, `tile.dot` (f32 accumulation),
  `tile.reduce`, `tile.broadcast` and `tile.transpose` work on tiles, and shared memory
  is `tile.alloc` of a `#tile.memory_space<shared>` memref filled by `tile.copy` and
  ordered by `tile.barrier`. These ops are kernel-only (the verifiers say so).
- **elementwise math on tiles reuses the nn ops** (`nn.add`, `nn.exp`, `nn.cast`,
  `nn.compare`, `nn.select`, splat `nn.constant`, ...) on tile tensors: one op table per
  printer serves both levels, and their semantics are the nn reference's. Only those
  elementwise ops and splat constants may appear in a kernel, except in a
  `whole_tensor` kernel (below), which applies one arbitrary nn op. Index arithmetic is
  `arith` on `index`; loops are `scf.for` with `iter_args`.

Memory spaces: buffers (memrefs) live in global memory (no space, or
`#tile.memory_space<global>`) or, inside a kernel, in shared memory
(`#tile.memory_space<shared>`). Registers hold tiles (tensors), never buffers: a memref
in `#tile.memory_space<registers>` is rejected. `registers` is a `MemorySpace` value so
that a kernel can record where its matmul operands are staged: `operand_staging` is
"shared" or "registers" (tile-promote).

Buffers are contiguous and row-major, except a kernel parameter read or written only by
`tile.load`/`tile.store`: it may be a strided view, `memref<62x224xf32, strided<[256, 1],
offset: 272>>`, whose element `(i, j)` is at `offset + 256 i + j` from the start of the
buffer the launch passes (a slice `x[1:-1, 16:-16]` of a 64 x 256 tensor read in place;
`strided_layout`). Static, non-negative strides and offset; the launch checks that the
view stays inside the buffer. Anywhere else a memref with a layout is rejected.
Masks are implicit in `tile.load`/`tile.store` (in bounds: `0 <= offset + i < dim` in
every dim the tile covers); `tile.mask` is only emitted where a value must be replaced
(reduction identities). A load's `fill` is an f64 float for float tiles (inf and NaN
allowed) and an integer of the element type for integer tiles (0 or 1 for i1). Tile
dims produced by convert-nn-to-tile are powers of two, except in `whole_tensor` kernels
(one program, whole-tensor tiles, one nn op: both backends print those specially).

Kernel attributes later stages read are declared on `tile.kernel` and typed (set by
convert-nn-to-tile, then tile-promote; `KERNEL_ATTRIBUTE_STAGES` says which); a stage
that needs one that is missing raises a located error naming the stage that sets it:
`schedule` ("pointwise", "row_reduction", "row_reduction_looped", "matmul",
"attention", "scan", "whole_tensor"), `iteration_sizes` / `block_sizes` (per iteration
dim), `reduce_dim`, `block_k` and `group_m` (matmul), `candidates` (autotuning configs as pass options),
`num_warps`, `num_stages`, `vector_width` (elements per 16-byte access), `shared_bytes`,
`row_cache` (parameters staged in shared memory) and `operand_staging`
("shared" | "registers", matmul); for a kernel over buffers of dynamic size,
`size_multiples` (generalize-sizes: per dynamic dim of the parameters, a number it is
a multiple of at run time, which a printer may tell the compiler). The verifier bounds the launch knobs
(`tile_verification.LAUNCH_KNOB_RANGES`): `num_warps` is a power of two from 1 to 32,
`num_stages` from 1 to 8, `vector_width` a power of two from 1 to 16, `shared_bytes`
from 0 to 2**31 - 1. Every integer attribute of a tile op is i64
(`N : i64` or `array<i64: ...>`). Loops are `scf.for` with any number of `iter_args`
(a dual GEMM carries one accumulator per matmul; dependent reductions one per
reduction).

See `passes/convert_nn_to_tile/convert_nn_to_tile.py` for the host calling convention and the schedules.
"""

from __future__ import annotations

import math
from abc import ABC
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
    StridedLayoutAttr,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    UnitAttr,
    f64,
    i1,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    attr_def,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_attr_def,
    opt_operand_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    Pure,
    SymbolOpInterface,
    SymbolTable,
)
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from fuseopt.diagnostics import error_at
from fuseopt.dialects.syntax import (
    BareIdentifier,
    BareInteger,
    FourOperandTypes,
    IndexOperands,
    IntList,
    MixedSizes,
    SharedType,
    SharedTypeOp,
    TwoOperandTypes,
    array_values,
    int_array,
    is_bool,
    is_float,
    mixed_sizes,
    parse_i64,
    print_subscript,
    shape_str,
    split_sizes,
    tensor_type,
)
from fuseopt.dialects.tile_verification import (
    check_fill,
    check_i64,
    check_index_operands,
    check_kernel_nn_ops,
    check_launch_knobs,
    check_mixed_sizes,
    check_tile_box,
    check_tiling_attributes,
    fill_attr,
    fill_value,
)

# --------------------------------------------------------------------------- memory spaces


class MemorySpace(StrEnum):
    """Where data lives. Buffers (memrefs) live in global memory (HBM) or the program's
    shared memory; registers hold tiles (tensors) and are never a memref's space: the
    value names a staging choice (a kernel's `operand_staging`)."""

    GLOBAL = "global"
    SHARED = "shared"
    REGISTERS = "registers"


@irdl_attr_definition
class MemorySpaceAttr(EnumAttribute[MemorySpace]):
    """A memref memory space: `#tile.memory_space<shared>`. No space means global;
    `registers` parses but no op accepts a buffer there."""

    name = "tile.memory_space"

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data.value}>")

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> MemorySpace:
        parser.parse_punctuation("<")
        space = parser.parse_str_enum(MemorySpace)
        parser.parse_punctuation(">")
        return space


SHARED = MemorySpaceAttr(MemorySpace.SHARED)
"""The shared-memory space attribute."""

OPERAND_STAGING = (MemorySpace.SHARED, MemorySpace.REGISTERS)
"""Where a matmul kernel may stage its operand tiles (its `operand_staging`)."""


class Schedule(StrEnum):
    """How convert-nn-to-tile laid a kernel out: its `schedule` attribute, which both
    printers and tile-promote dispatch on."""

    POINTWISE = "pointwise"
    ROW_REDUCTION = "row_reduction"
    ROW_REDUCTION_LOOPED = "row_reduction_looped"
    MATMUL = "matmul"
    WHOLE_TENSOR = "whole_tensor"
    ATTENTION = "attention"
    SCAN = "scan"


KERNEL_ATTRIBUTE_STAGES: dict[str, str] = {
    **dict.fromkeys(
        (
            "schedule",
            "iteration_sizes",
            "block_sizes",
            "reduce_dim",
            "block_k",
            "group_m",
            "candidates",
        ),
        "convert-nn-to-tile",
    ),
    **dict.fromkeys(
        (
            "num_warps",
            "num_stages",
            "vector_width",
            "shared_bytes",
            "row_cache",
            "operand_staging",
        ),
        "tile-promote",
    ),
    "size_multiples": "generalize-sizes (a function of dynamic size)",
}
"""The attributes `tile.kernel` declares besides its name and grid, and the stage that
sets each (named in the error when a later stage needs one that is missing)."""


def memory_space(t: MemRefType) -> MemorySpace:
    """The memory space of a memref type (global when it has none)."""
    space = t.memory_space
    return space.data if isinstance(space, MemorySpaceAttr) else MemorySpace.GLOBAL


OUTPUT_ATTR = "tile.output"
"""The argument attribute that marks a host function's out-param buffers."""


DIMS_FROM_ATTR = "tile.dims_from"
"""The argument attribute of an out-param of dynamic size that says where its sizes
come from: `array<i64: p0, d0, p1, d1, ...>`, for each `?` of its type in order, dim
`d` of parameter `p` (an input). The host function allocates it with those sizes."""


SAME_SIZE_ATTR = "tile.same_size"
"""The attribute of a host function whose inputs' dynamic dims are one size (lowered from
an nn function, where every `?` is one size): `array<i64: p0, d0, p1, d1, ...>`, dim `d`
of input parameter `p` for each. A call whose sizes differ there is an error."""


def _dim_pairs(attr: Attribute | None, name: str) -> tuple[tuple[int, int], ...]:
    """Attribute `name` (`array<i64: p0, d0, p1, d1, ...>`) as (parameter, dim) pairs;
    empty when absent, VerifyException when not such an array."""
    if attr is None:
        return ()
    if not isinstance(attr, DenseArrayBase) or len(array_values(attr)) % 2:
        raise VerifyException(f"{name} must be an array<i64: parameter, dim, ...>, got {attr}")
    v = array_values(attr)
    return tuple((v[i], v[i + 1]) for i in range(0, len(v), 2))


def same_size_dims(f: func.FuncOp) -> tuple[tuple[int, int], ...]:
    """`f`'s `tile.same_size` as (parameter, dim) pairs (empty without one)."""
    return _dim_pairs(f.attributes.get(SAME_SIZE_ATTR), SAME_SIZE_ATTR)


def output_params(f: func.FuncOp) -> list[bool]:
    """For each argument of host function `f`: is it an out-param (`{tile.output}`)?"""
    n = len(f.function_type.inputs.data)
    if f.arg_attrs is None:
        return [False] * n
    return [OUTPUT_ATTR in d.data for d in f.arg_attrs.data]


def output_dims_from(f: func.FuncOp) -> list[tuple[tuple[int, int], ...]]:
    """For each argument of host function `f`: its `tile.dims_from` as (parameter, dim)
    pairs (empty without one). VerifyException for an odd-length array."""
    if f.arg_attrs is None:
        return [()] * len(f.function_type.inputs.data)
    return [_dim_pairs(d.data.get(DIMS_FROM_ATTR), DIMS_FROM_ATTR) for d in f.arg_attrs.data]


def strided_layout(t: MemRefType) -> tuple[tuple[int, ...], int] | None:
    """(strides, offset) in elements of a strided view type, None for a contiguous
    buffer (no layout). Raises VerifyException for any other layout, or for strides or
    an offset that are dynamic, negative or of the wrong rank."""
    layout = t.layout
    if isinstance(layout, NoneAttr):
        return None
    if not isinstance(layout, StridedLayoutAttr):
        raise VerifyException(f"a buffer's layout must be strided<[...], offset: n>, got {t}")
    strides, offset = layout.get_strides(), layout.get_offset()
    if (
        len(strides) != len(t.get_shape())
        or offset is None
        or offset < 0
        or any(s is None or s < 0 for s in strides)
    ):
        raise VerifyException(
            f"a strided view needs one static, non-negative stride per dim and a static, "
            f"non-negative offset, got {t}"
        )
    return tuple(int(s) for s in strides), int(offset)  # type: ignore[arg-type]


def row_major_strides(dims: Sequence[int]) -> tuple[int, ...]:
    """The strides in elements of a contiguous row-major buffer of shape `dims`."""
    out, acc = [], 1
    for n in reversed(dims):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def row_major_exprs(dims: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """Row-major strides of dims that may be names of sizes (Python or C expressions): each
    the product of the later dims, a number when they all are."""
    out: list[int | str] = []
    for d in range(len(dims)):
        later = dims[d + 1 :]
        number = math.prod(n for n in later if isinstance(n, int))
        names = [n for n in later if isinstance(n, str)]
        if not names:
            out.append(number)
        else:
            out.append(" * ".join(names + ([str(number)] if number != 1 else [])))
    return tuple(out)


def buffer_strides(t: MemRefType) -> tuple[int, ...]:
    """The strides in elements of a buffer or strided view (row-major for a buffer)."""
    layout = strided_layout(t)
    return row_major_strides(t.get_shape()) if layout is None else layout[0]


def buffer_offset(t: MemRefType) -> int:
    """Where a strided view starts in the buffer passed for it (0 for a buffer)."""
    layout = strided_layout(t)
    return 0 if layout is None else layout[1]


def memref_type(
    value: SSAValue | Attribute, what: str, strided: bool = False, dynamic: bool = False
) -> MemRefType:
    """The static memref type of `value`, or a VerifyException naming `what`.
    `strided`: a strided view (a kernel parameter that loads and stores address) is
    accepted too; otherwise a layout is rejected. `dynamic`: dims of dynamic size (`?`,
    read with `tile.dim`) are accepted too, in a contiguous buffer only."""
    t = value.type if isinstance(value, SSAValue) else value
    if not isinstance(t, MemRefType):
        raise VerifyException(f"{what} must be a memref, got {t}")
    if any(d < 0 for d in t.get_shape()):
        if not dynamic:
            raise VerifyException(f"{what} must have a static shape, got {t}")
        if not isinstance(t.layout, NoneAttr):
            raise VerifyException(f"{what}: a strided view must have a static shape, got {t}")
    if strided and not isinstance(t.layout, NoneAttr):
        strided_layout(t)
    elif not isinstance(t.layout, NoneAttr):
        raise VerifyException(f"{what} must be a contiguous row-major buffer (no layout), got {t}")
    if memory_space(t) == MemorySpace.REGISTERS:
        raise VerifyException(
            f"{what} cannot live in registers: registers hold tiles (tensors), not buffers; got {t}"
        )
    return t


def is_dynamic(t: MemRefType) -> bool:
    """Does buffer type `t` have a dim of dynamic size (`?`)?"""
    return any(d < 0 for d in t.get_shape())


def enclosing_kernel(op: Operation) -> KernelOp | None:
    """The `tile.kernel` that contains `op`, if any."""
    node = op.parent_op()
    while node is not None and not isinstance(node, KernelOp):
        node = node.parent_op()
    return node


def require_kernel(op: Operation) -> KernelOp:
    """The `tile.kernel` that contains kernel-only op `op` (VerifyException if none)."""
    kernel = enclosing_kernel(op)
    if kernel is None:
        raise VerifyException(f"{op.name} must be inside a tile.kernel")
    return kernel


def _parse_offsets(parser: Parser) -> list[SSAValue]:
    return parser.parse_comma_separated_list(
        Parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
    )


# --------------------------------------------------------------------------- kernels


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """Terminator of a `tile.kernel` body. Example: `tile.return`."""

    name = "tile.return"
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(KernelOp), Pure()))
    assembly_format = "attr-dict"


@irdl_op_definition
class KernelOp(IRDLOperation):
    """A kernel: a symbol whose body runs once per program of a `grid`-dimensional grid.

    The entry block's arguments are the kernel's buffers (global memrefs). Declared,
    verified attributes record the schedule and tuning decisions (`schedule`, a
    Schedule; block sizes, `num_warps`, `num_stages`, `vector_width`, `candidates`,
    `operand_staging` = "shared" | "registers", ...; see the module docstring);
    `require_schedule`, `require_int` and `require_launch_knobs` read them for stages
    that cannot go on without them. Unless `schedule` is
    "whole_tensor", the only nn ops in the body are elementwise ones and splat
    `nn.constant`s (and, with schedule "scan", `nn.cumsum` along a tile's axis). The launch knobs must be in range (`num_warps` a power of two up to
    32, `num_stages` 1 to 8; see the module docstring).

    Example:
        tile.kernel @add grid 1 (%x: memref<64xf32>, %y: memref<64xf32>) {
          %p = tile.program_id 0
          %c16 = arith.constant 16 : index
          %o = arith.muli %p, %c16 : index
          %t = tile.load %x[%o] : memref<64xf32> -> tensor<16xf32>
          tile.store %t, %y[%o] : tensor<16xf32>, memref<64xf32>
          tile.return
        }
    """

    name = "tile.kernel"
    sym_name = attr_def(StringAttr)
    grid = attr_def(IntegerAttr)
    # set by convert-nn-to-tile
    schedule = opt_attr_def(StringAttr)
    iteration_sizes = opt_attr_def(DenseArrayBase)
    block_sizes = opt_attr_def(DenseArrayBase)
    reduce_dim = opt_attr_def(IntegerAttr)
    block_k = opt_attr_def(IntegerAttr)
    group_m = opt_attr_def(IntegerAttr)
    candidates = opt_attr_def(ArrayAttr)
    # set by tile-promote
    num_warps = opt_attr_def(IntegerAttr)
    num_stages = opt_attr_def(IntegerAttr)
    vector_width = opt_attr_def(IntegerAttr)
    shared_bytes = opt_attr_def(IntegerAttr)
    row_cache = opt_attr_def(ArrayAttr)
    operand_staging = opt_attr_def(StringAttr)
    # set by generalize-sizes
    size_multiples = opt_attr_def(DenseArrayBase)
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())
    RESERVED: ClassVar[tuple[str, ...]] = ("sym_name", "grid")

    def __init__(
        self,
        name: str,
        grid_rank: int,
        param_types: Sequence[Attribute],
        attributes: dict[str, Attribute] | None = None,
    ):
        body = Region(Block(arg_types=param_types))
        attrs: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "grid": IntegerAttr(grid_rank, i64),
        }
        attrs.update(attributes or {})
        super().__init__(regions=[body], attributes=attrs)

    @property
    def grid_rank(self) -> int:
        """How many grid dimensions (1 to 3)."""
        return self.grid.value.data

    @property
    def param_types(self) -> list[MemRefType]:
        """The kernel's buffer parameter types."""
        return [a.type for a in self.body.block.args]  # type: ignore[misc]

    @property
    def schedule_kind(self) -> Schedule | None:
        """The `schedule` attribute as a Schedule (None when there is none)."""
        return None if self.schedule is None else Schedule(self.schedule.data)

    def require_schedule(self) -> Schedule:
        """The schedule, or a CompileError located at the kernel when it has none: a
        stage that dispatches on it never guesses one."""
        return Schedule(self.require("schedule").data)  # type: ignore[attr-defined]

    def require_int(self, name: str) -> int:
        """The value of integer attribute `name`, or a located CompileError."""
        return self.require(name).value.data  # type: ignore[attr-defined]

    def require_launch_knobs(self) -> tuple[int, int]:
        """(`num_warps`, `num_stages`), or a located CompileError when tile-promote has
        not set them."""
        return self.require_int("num_warps"), self.require_int("num_stages")

    def require(self, name: str) -> Attribute:
        """Declared attribute `name`, or a CompileError located at the kernel that names
        the stage that sets it (KERNEL_ATTRIBUTE_STAGES)."""
        attr = getattr(self, name)
        if attr is None:
            raise error_at(
                self,
                f"tile.kernel @{self.sym_name.data} has no `{name}` attribute "
                f"({KERNEL_ATTRIBUTE_STAGES[name]} sets it)",
            )
        return attr

    def int_attr(self, name: str) -> int | None:
        """The value of integer attribute `name` (one of the declared ones), or None."""
        attr = getattr(self, name)
        return None if attr is None else attr.value.data

    def array_attr(self, name: str) -> tuple[int, ...] | None:
        """The values of i64 array attribute `name` (`iteration_sizes`, `block_sizes`)."""
        attr = getattr(self, name)
        return None if attr is None else array_values(attr)

    def verify_(self) -> None:
        check_i64(self.grid, "grid")
        if not 1 <= self.grid_rank <= 3:
            raise VerifyException(f"grid rank must be 1, 2 or 3, got {self.grid_rank}")
        for i, a in enumerate(self.body.block.args):
            t = memref_type(a, f"kernel parameter {i}", strided=True, dynamic=True)
            if memory_space(t) != MemorySpace.GLOBAL:
                raise VerifyException(f"kernel parameter {i} must be a global buffer, got {t}")
        if not isinstance(self.body.block.last_op, ReturnOp):
            raise VerifyException("tile.kernel body must end in tile.return")
        if enclosing_kernel(self) is not None:
            raise VerifyException("tile.kernel cannot be nested in another kernel")
        staging = self.operand_staging
        if staging is not None and staging.data not in OPERAND_STAGING:
            raise VerifyException(f'operand_staging must be "shared" or "registers", got {staging}')
        if self.schedule is not None and self.schedule.data not in Schedule.__members__.values():
            known = ", ".join(f'"{k.value}"' for k in Schedule)
            raise VerifyException(f"schedule must be one of {known}, got {self.schedule}")
        check_launch_knobs(self)
        check_tiling_attributes(self, len(self.body.block.args))
        self._check_size_multiples()
        check_kernel_nn_ops(self, self.schedule.data if self.schedule is not None else None)

    def dynamic_dims(self) -> list[tuple[int, int]]:
        """(parameter, dim) of every dynamic dim of the parameters, in order."""
        return [
            (i, d)
            for i, t in enumerate(self.param_types)
            for d, n in enumerate(t.get_shape())
            if n < 0
        ]

    def _check_size_multiples(self) -> None:
        """`size_multiples`: one positive i64 per dynamic dim of the parameters (each
        such dim is a multiple of it at run time)."""
        if self.size_multiples is None:
            return
        check_i64(self.size_multiples, "size_multiples")
        values, dims = array_values(self.size_multiples), self.dynamic_dims()
        if len(values) != len(dims) or any(v < 1 for v in values):
            raise VerifyException(
                f"size_multiples needs one positive number per dynamic dim of the "
                f"parameters ({len(dims)}), got {list(values)}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name().data
        parser.parse_keyword("grid")
        rank = parse_i64(parser)
        args = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, lambda: parser.parse_argument()
        )
        attrs = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region(args)
        op = cls.build(
            regions=[region],
            attributes={"sym_name": StringAttr(name), "grid": IntegerAttr(rank, i64)},
        )
        if attrs is not None:
            op.attributes.update(attrs.data)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(f" grid {self.grid_rank} (")
        printer.print_list(self.body.block.args, printer.print_block_argument)
        printer.print_string(")")
        printer.print_op_attributes(
            self.attributes, reserved_attr_names=self.RESERVED, print_keyword=True
        )
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Host side: run kernel `@k` over a grid of the given sizes with buffer arguments.

    A grid size is a positive number or an index value computed on the host (from
    `tile.dim` of a buffer of dynamic size; zero programs launch nothing). Each argument
    must have the element type and element count of the kernel's parameter; a
    different shape is a free row-major reinterpretation (a view). A strided parameter
    (`strided_layout`) is a view of the argument's elements: it must stay inside them.
    A parameter of dynamic size takes a buffer of its very type (the kernel reads the
    argument's sizes).

    Example:
        tile.launch @add grid [4] (%x, %y) : memref<64xf32>, memref<64xf32>
        tile.launch @rows grid [%g] (%a, %b) : memref<?x64xf32>, memref<?x64xf32>
    """

    name = "tile.launch"
    custom_directives = (MixedSizes,)
    assembly_format = (
        "$kernel `grid` custom<MixedSizes>($grid, $dynamic_grid, type($dynamic_grid)) ` ` "
        "`(` $args `)` attr-dict (`:` type($args)^)?"
    )
    kernel = attr_def(SymbolRefAttr)
    grid = attr_def(DenseArrayBase)
    dynamic_grid = var_operand_def()
    args = var_operand_def(MemRefType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(self, kernel: str, grid: Sequence[int | SSAValue], args: Sequence[SSAValue]):
        static, dynamic = split_sizes(grid)
        super().__init__(
            operands=[dynamic, args],
            attributes={"kernel": SymbolRefAttr(kernel), "grid": int_array(static)},
        )

    @property
    def grid_sizes(self) -> tuple[int | SSAValue, ...]:
        """The number of programs along each grid dimension: a number, or the index
        value of a size computed on the host."""
        return tuple(mixed_sizes(array_values(self.grid), list(self.dynamic_grid)))

    def callee(self) -> KernelOp:
        """The launched kernel (VerifyException when it does not exist)."""
        k = SymbolTable.lookup_symbol(self, self.kernel)
        if not isinstance(k, KernelOp):
            raise VerifyException(f"@{self.kernel.root_reference.data} is not a tile.kernel")
        return k

    def verify_(self) -> None:
        if enclosing_kernel(self) is not None:
            raise VerifyException("tile.launch is a host op; it cannot appear in a kernel")
        check_i64(self.grid, "grid")
        check_mixed_sizes(array_values(self.grid), self.dynamic_grid, "grid sizes")
        sizes = self.grid_sizes
        if any(isinstance(s, int) and s < 1 for s in sizes):
            raise VerifyException(f"grid sizes must be positive, got {list(sizes)}")
        k = self.callee()
        if len(sizes) != k.grid_rank:
            raise VerifyException(
                f"@{k.sym_name.data} has a grid of rank {k.grid_rank}, launched with {list(sizes)}"
            )
        params = k.param_types
        if len(params) != len(self.args):
            raise VerifyException(
                f"@{k.sym_name.data} takes {len(params)} buffers, {len(self.args)} were given"
            )
        for i, (a, p) in enumerate(zip(self.args, params, strict=True)):
            t = memref_type(a, f"argument {i}", dynamic=True)
            if is_dynamic(t) or is_dynamic(p):
                if t != p:
                    raise VerifyException(
                        f"argument {i} of type {t} cannot be passed as {p}: a buffer of "
                        f"dynamic size is passed as its very type"
                    )
            elif t.element_type != p.element_type or not _passable(t, p):
                raise VerifyException(f"argument {i} of type {t} cannot be passed as {p}")


def _passable(arg: MemRefType, param: MemRefType) -> bool:
    """Whether buffer type `arg` can be passed for kernel parameter type `param`: the same
    element count (a row-major reinterpretation), or a strided view whose elements all
    lie inside the buffer."""
    layout = strided_layout(param)
    if layout is None:
        return math.prod(arg.get_shape()) == math.prod(param.get_shape())
    strides, offset = layout
    sizes = param.get_shape()
    if math.prod(sizes) == 0:
        return True
    last = offset + sum((n - 1) * s for n, s in zip(sizes, strides, strict=True))
    return last < math.prod(arg.get_shape())


@irdl_op_definition
class ProgramIdOp(IRDLOperation):
    """The index of the running program along grid dimension `axis`.

    Example: `%p = tile.program_id 0`
    """

    name = "tile.program_id"
    custom_directives = (BareInteger,)
    assembly_format = "custom<BareInteger>($axis) attr-dict"
    axis = attr_def(IntegerAttr)
    result = result_def(IndexType)
    traits = traits_def(Pure())

    def __init__(self, axis: int):
        super().__init__(attributes={"axis": IntegerAttr(axis, i64)}, result_types=[IndexType()])

    def verify_(self) -> None:
        k = require_kernel(self)
        check_i64(self.axis, "axis")
        if not 0 <= self.axis.value.data < k.grid_rank:
            raise VerifyException(
                f"axis {self.axis.value.data} is out of range for a grid of rank {k.grid_rank}"
            )


@irdl_op_definition
class DimOp(IRDLOperation):
    """The size of dim `dim` of a buffer, as an index: how host functions and kernels
    read a dynamic size (`?`); on a static dim it is that number. Host or kernel.

    Example: `%n = tile.dim %x, 0 : memref<?x4096xbf16>`
    """

    name = "tile.dim"
    custom_directives = (BareInteger,)
    assembly_format = "$buffer `,` custom<BareInteger>($dim) attr-dict `:` type($buffer)"
    buffer = operand_def(MemRefType)
    dim = attr_def(IntegerAttr)
    result = result_def(IndexType)
    traits = traits_def(Pure())

    def __init__(self, buffer: SSAValue, dim: int):
        super().__init__(
            operands=[buffer], attributes={"dim": IntegerAttr(dim, i64)}, result_types=[IndexType()]
        )

    @property
    def index(self) -> int:
        """Which dim."""
        return self.dim.value.data

    def verify_(self) -> None:
        check_i64(self.dim, "dim")
        t = memref_type(self.buffer, "buffer", strided=True, dynamic=True)
        if not 0 <= self.index < len(t.get_shape()):
            raise VerifyException(f"dim {self.index} is out of range for {t}")


# --------------------------------------------------------------------------- memory


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Load a tile from a buffer at per-dim offsets, masked at the buffer's bounds.

    The tile covers the trailing dims of the buffer; a leading dim the tile does not
    cover contributes only its offset. Elements outside the buffer read as `fill`
    (default 0): for float tiles an f64 float (`inf`, `-inf` and `nan` allowed), for
    integer tiles an integer of the element type (0 or 1 for i1). The element type is
    the buffer's. Kernel-only.

    Example:
        %t = tile.load %x[%r, %c] : memref<6x100xf32> -> tensor<2x128xf32>
        %u = tile.load %x[%r, %c] fill -inf : memref<6x100xf32> -> tensor<128xf32>
        %v = tile.load %i[%r] fill -1 : memref<6xi64> -> tensor<8xi64>
    """

    name = "tile.load"
    buffer = operand_def(MemRefType)
    offsets = var_operand_def()  # index: verify_ says so more clearly than IRDL would
    result = result_def(TensorType)
    fill = opt_attr_def(FloatAttr | IntegerAttr)

    def __init__(
        self,
        buffer: SSAValue,
        offsets: Sequence[SSAValue],
        tile: Sequence[int],
        fill: float | int = 0,
    ):
        t = memref_type(buffer, "buffer", strided=True, dynamic=True)
        attrs: dict[str, Attribute] = {}
        if fill != 0:
            attrs["fill"] = fill_attr(fill, t.element_type)
        super().__init__(
            operands=[buffer, offsets],
            result_types=[TensorType(t.element_type, list(tile))],
            attributes=attrs,
        )

    @property
    def fill_value(self) -> float | int:
        """The value read for out-of-bounds elements (an int for integer tiles)."""
        return fill_value(self.fill)

    def verify_(self) -> None:
        require_kernel(self)
        buf = memref_type(self.buffer, "buffer", strided=True, dynamic=True)
        tile = tensor_type(self.result, "result")
        check_index_operands(self.offsets, "offsets")
        check_tile_box(tile.get_shape(), buf, len(self.offsets), "tile.load")
        if tile.element_type != buf.element_type:
            raise VerifyException(f"the tile's element type must be the buffer's: {tile}, {buf}")
        if self.fill is not None:
            check_fill(self.fill, tile.element_type)

    @classmethod
    def parse(cls, parser: Parser) -> LoadOp:
        buf_ref = parser.parse_unresolved_operand()
        offsets = _parse_offsets(parser)
        fill: tuple[float | int, int, int] | None = None
        if parser.parse_optional_keyword("fill") is not None:
            start = parser.pos
            fill = (_parse_fill_literal(parser), start, parser.pos)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        buf = parser.resolve_operand(buf_ref, parser.parse_type())
        parser.parse_punctuation("->")
        t = parser.parse_type()
        if fill is not None:
            value, start, end = fill
            element = t.element_type if isinstance(t, TensorType) else f64  # IRDL rejects t
            try:
                attrs["fill"] = fill_attr(value, element)
            except ValueError as e:
                parser.raise_error(str(e), start, end)
        return cls.build(operands=[buf, offsets], result_types=[t], attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.buffer)
        print_subscript(printer, self.offsets)
        if self.fill is not None:
            printer.print_string(" fill ")
            _print_fill(printer, self.fill_value)
        printer.print_op_attributes(self.attributes, reserved_attr_names=("fill",))
        printer.print_string(" : ")
        printer.print_attribute(self.buffer.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)


def _parse_fill_literal(parser: Parser) -> float | int:
    """An optionally negated number, `inf` or `nan` (integers stay ints)."""
    neg = parser.parse_optional_punctuation("-") is not None
    value: float | int
    if parser.parse_optional_keyword("inf") is not None:
        value = math.inf
    elif parser.parse_optional_keyword("nan") is not None:
        value = math.nan
    else:
        value = parser.parse_number()
    return -value if neg else value


def _print_fill(printer: Printer, value: float | int) -> None:
    if isinstance(value, int):
        printer.print_string(str(value))
    elif math.isinf(value):
        printer.print_string("-inf" if value < 0 else "inf")
    elif math.isnan(value):
        printer.print_string("nan")
    else:
        printer.print_float(value, f64)


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Store a tile into a buffer at per-dim offsets; out-of-bounds elements are skipped.

    Kernel-only.

    Example:
        tile.store %t, %y[%r, %c] : tensor<2x128xf32>, memref<6x100xf32>
    """

    name = "tile.store"
    custom_directives = (IndexOperands, TwoOperandTypes)
    assembly_format = (
        "$value `,` $buffer `` custom<IndexOperands>($offsets, type($offsets)) attr-dict `:` "
        "custom<TwoOperandTypes>(type($value), type($buffer))"
    )
    value = operand_def(TensorType)
    buffer = operand_def(MemRefType)
    offsets = var_operand_def()  # index: verify_ says so more clearly than IRDL would

    def __init__(self, value: SSAValue, buffer: SSAValue, offsets: Sequence[SSAValue]):
        super().__init__(operands=[value, buffer, offsets])

    def verify_(self) -> None:
        require_kernel(self)
        buf = memref_type(self.buffer, "buffer", strided=True, dynamic=True)
        tile = tensor_type(self.value, "value")
        check_index_operands(self.offsets, "offsets")
        check_tile_box(tile.get_shape(), buf, len(self.offsets), "tile.store")
        if tile.element_type != buf.element_type:
            raise VerifyException(f"the tile's element type must be the buffer's: {tile}, {buf}")


@irdl_op_definition
class GatherOp(IRDLOperation):
    """Load by address: element i of the result is the buffer's element at flat
    (row-major) position `index[i]`; a position outside [0, numel) reads 0 and touches
    no memory. The result has the index tile's shape and the buffer's element type;
    the index is i64. What `nn.take` becomes in a kernel (embeddings, gathers,
    advanced indexing). Kernel-only.

    Example:
        %t = tile.gather %w[%pos] : memref<64x32xf32>, tensor<16x32xi64> -> tensor<16x32xf32>
    """

    name = "tile.gather"
    assembly_format = (
        "$buffer `[` $index `]` attr-dict `:` type($buffer) `,` type($index) `->` type($result)"
    )
    buffer = operand_def(MemRefType)
    index = operand_def(TensorType)
    result = result_def(TensorType)

    def __init__(self, buffer: SSAValue, index: SSAValue):
        b, i = memref_type(buffer, "buffer", dynamic=True), tensor_type(index, "index")
        super().__init__(
            operands=[buffer, index], result_types=[TensorType(b.element_type, i.get_shape())]
        )

    def verify_(self) -> None:
        require_kernel(self)
        b = memref_type(self.buffer, "buffer", dynamic=True)
        i = tensor_type(self.index, "index")
        if not (isinstance(i.element_type, IntegerType) and i.element_type.width.data == 64):
            raise VerifyException(f"the index must be a tile of i64, got {i}")
        r = tensor_type(self.result, "result")
        if r.get_shape() != i.get_shape() or r.element_type != b.element_type:
            raise VerifyException(
                f"the result must have the index's shape and the buffer's element type: "
                f"{r}, {i}, {b}"
            )


@irdl_op_definition
class MaskOp(IRDLOperation):
    """An i1 tile, true where `offset[d] + i_d < bound[d]` in every dim d. A bound is a
    number or an index value (a dynamic size, from `tile.dim`). Kernel-only.

    Example:
        %m = tile.mask [%r, %c] bounds [6, 100] : tensor<2x128xi1>
        %n = tile.dim %x, 0 : memref<?x100xf32>
        %k = tile.mask [%r, %c] bounds [%n, 100] : tensor<2x128xi1>
    """

    name = "tile.mask"
    custom_directives = (IndexOperands, MixedSizes)
    assembly_format = (
        "custom<IndexOperands>($offsets, type($offsets)) `bounds` "
        "custom<MixedSizes>($bounds, $dynamic_bounds, type($dynamic_bounds)) "
        "attr-dict `:` type($result)"
    )
    offsets = var_operand_def()  # index: verify_ says so more clearly than IRDL would
    dynamic_bounds = var_operand_def()
    bounds = attr_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        offsets: Sequence[SSAValue],
        bounds: Sequence[int | SSAValue],
        tile: Sequence[int],
    ):
        static, dynamic = split_sizes(bounds)
        super().__init__(
            operands=[offsets, dynamic],
            result_types=[TensorType(i1, list(tile))],
            attributes={"bounds": int_array(static)},
        )

    @property
    def bound_sizes(self) -> list[int | SSAValue]:
        """The bound of each dim: a number, or the index value of a dynamic one."""
        return mixed_sizes(array_values(self.bounds), list(self.dynamic_bounds))

    def verify_(self) -> None:
        require_kernel(self)
        check_i64(self.bounds, "bounds")
        t = tensor_type(self.result, "result")
        check_index_operands(self.offsets, "offsets")
        check_mixed_sizes(array_values(self.bounds), self.dynamic_bounds, "bounds")
        rank = len(t.get_shape())
        if len(self.offsets) != rank or len(array_values(self.bounds)) != rank:
            raise VerifyException(f"tile.mask needs {rank} offsets and bounds for {t}")
        if not is_bool(t.element_type):
            raise VerifyException(f"tile.mask produces an i1 tile, got {t}")


@irdl_op_definition
class IotaOp(IRDLOperation):
    """A tile of `start + step * (offset + i)` at position i of its one dim (a 0-d tile
    holds `start + step * offset`), in the result's element type: an index vector
    computed in the kernel instead of read from memory. Kernel-only.

    Example:
        %i = tile.iota %c start 0 step 1 : tensor<128xi64>
    """

    name = "tile.iota"
    custom_directives = (BareInteger,)
    assembly_format = (
        "$offset `start` custom<BareInteger>($start) `step` custom<BareInteger>($step) "
        "attr-dict `:` type($result)"
    )
    offset = operand_def(IndexType)
    start = attr_def(IntegerAttr)
    step = attr_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, offset: SSAValue, start: int, step: int, t: TensorType):
        super().__init__(
            operands=[offset],
            result_types=[t],
            attributes={"start": IntegerAttr(start, i64), "step": IntegerAttr(step, i64)},
        )

    @property
    def start_value(self) -> int:
        """The value at offset 0."""
        return self.start.value.data

    @property
    def step_value(self) -> int:
        """The difference between neighbours."""
        return self.step.value.data

    def verify_(self) -> None:
        require_kernel(self)
        check_i64(self.start, "start")
        check_i64(self.step, "step")
        t = tensor_type(self.result, "result")
        if len(t.get_shape()) > 1:
            raise VerifyException(f"tile.iota makes a tile of at most one dim, got {t}")
        if is_bool(t.element_type):
            raise VerifyException(f"tile.iota makes numbers, not {t}")


@irdl_op_definition
class AllocOp(IRDLOperation):
    """Allocate a buffer: a global temporary on the host, shared memory in a kernel.

    Contents are undefined until written. On the host a buffer may have dims of dynamic
    size (`?`): one index operand each, in order, gives their sizes.

    Example:
        %t = tile.alloc : memref<64xf32>
        %u = tile.alloc(%n) : memref<?x64xf32>
        %s = tile.alloc : memref<2x512xf32, #tile.memory_space<shared>>
    """

    name = "tile.alloc"
    dynamic_sizes = var_operand_def(IndexType)
    result = result_def(MemRefType)
    assembly_format = "(`(` $dynamic_sizes^ `)`)? attr-dict `:` type($result)"

    def __init__(self, t: MemRefType, dynamic_sizes: Sequence[SSAValue] = ()):
        super().__init__(operands=[dynamic_sizes], result_types=[t])

    def verify_(self) -> None:
        kernel = enclosing_kernel(self)
        t = memref_type(self.result, "the allocated buffer", dynamic=kernel is None)
        check_index_operands(self.dynamic_sizes, "sizes")
        dynamic = sum(1 for d in t.get_shape() if d < 0)
        if len(self.dynamic_sizes) != dynamic:
            raise VerifyException(
                f"tile.alloc of {t} takes {dynamic} sizes (one per dynamic dim), "
                f"got {len(self.dynamic_sizes)}"
            )
        want = MemorySpace.SHARED if enclosing_kernel(self) else MemorySpace.GLOBAL
        if memory_space(t) != want:
            raise VerifyException(
                f"tile.alloc {'in a kernel' if want == MemorySpace.SHARED else 'on the host'} "
                f"allocates {want} memory, got {t}"
            )


@irdl_op_definition
class CopyOp(IRDLOperation):
    """Copy a box of `shape` from a global buffer into a shared one. Kernel-only.

    The box covers the trailing dims of each buffer, like a tile. Elements outside the
    source are not read and outside the destination are not written. On CUDA it is an
    asynchronous copy completed by the next `tile.barrier`; a backend without explicit
    shared memory may read the source wherever the destination is read.

    Example:
        tile.copy %x[%r, %c] to %s[%z, %c] [2, 128] : memref<6x500xf32> to memref<2x500xf32, #tile.memory_space<shared>>
    """

    name = "tile.copy"
    custom_directives = (
        IndexOperands,
        IntList,
    )
    assembly_format = (
        "$source `` custom<IndexOperands>($src_offsets, type($src_offsets)) `to` $dest "
        "`` custom<IndexOperands>($dst_offsets, type($dst_offsets)) custom<IntList>($shape) "
        "attr-dict `:` type($source) `to` type($dest)"
    )
    source = operand_def(MemRefType)
    dest = operand_def(MemRefType)
    src_offsets = var_operand_def()  # index: verify_ says so more clearly than IRDL would
    dst_offsets = var_operand_def()
    shape = attr_def(DenseArrayBase)
    irdl_options = (AttrSizedOperandSegments(as_property=False),)

    def __init__(
        self,
        source: SSAValue,
        src_offsets: Sequence[SSAValue],
        dest: SSAValue,
        dst_offsets: Sequence[SSAValue],
        shape: Sequence[int],
    ):
        super().__init__(
            operands=[source, dest, src_offsets, dst_offsets],
            attributes={"shape": int_array(shape)},
        )

    def verify_(self) -> None:
        require_kernel(self)
        check_i64(self.shape, "shape")
        src, dst = memref_type(self.source, "source"), memref_type(self.dest, "dest")
        if memory_space(src) != MemorySpace.GLOBAL:
            raise VerifyException(f"tile.copy reads a global buffer, got {src}")
        if memory_space(dst) != MemorySpace.SHARED:
            raise VerifyException(f"tile.copy writes a shared buffer, got {dst}")
        box = array_values(self.shape)
        check_index_operands([*self.src_offsets, *self.dst_offsets], "offsets")
        check_tile_box(box, src, len(self.src_offsets), "tile.copy source")
        check_tile_box(box, dst, len(self.dst_offsets), "tile.copy dest")
        if src.element_type != dst.element_type:
            raise VerifyException(f"tile.copy keeps the element type: {src}, {dst}")


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """Synchronize the threads of one program (`__syncthreads()`); orders shared memory.

    Example: `tile.barrier`
    """

    name = "tile.barrier"
    assembly_format = "attr-dict"

    def verify_(self) -> None:
        if enclosing_kernel(self) is None:
            raise VerifyException("tile.barrier must be inside a tile.kernel")


@irdl_op_definition
class ViewOp(IRDLOperation):
    """Reinterpret a contiguous buffer under another shape with the same element count,
    or, with `offset`, the contiguous run of the buffer's elements that starts `offset`
    elements in (in row-major order) as a smaller buffer: a host-side view, as a slice
    that keeps whole trailing rows of a buffer is (`x[:, 1:]` of a 1 x n tensor).

    A buffer of dynamic size views as a shape with exactly one dynamic dim, whose size
    follows from the element count (as `view(-1, n)` in PyTorch): the result's static
    dims must divide the source's.

    Example:
        %v = tile.view %x : memref<4x8xf32> -> memref<32xf32>
        %s = tile.view %x {offset = 8 : i64} : memref<4x8xf32> -> memref<2x8xf32>
        %d = tile.view %y : memref<?x4x8xf32> -> memref<?x32xf32>
    """

    name = "tile.view"
    source = operand_def(MemRefType)
    result = result_def(MemRefType)
    offset = opt_attr_def(IntegerAttr)
    traits = traits_def(Pure())
    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"

    def __init__(self, source: SSAValue, t: MemRefType, offset: int | None = None):
        attributes = {} if offset is None else {"offset": IntegerAttr(offset, i64)}
        super().__init__(operands=[source], result_types=[t], attributes=attributes)

    @property
    def element_offset(self) -> int:
        """Where the view starts in its source, in elements (0 without `offset`)."""
        return 0 if self.offset is None else self.offset.value.data

    def verify_(self) -> None:
        a = memref_type(self.source, "source", dynamic=True)
        r = memref_type(self.result, "result", dynamic=True)
        if a.element_type != r.element_type:
            raise VerifyException(f"tile.view keeps the element type: {a} -> {r}")
        if is_dynamic(a) or is_dynamic(r):
            _check_dynamic_view(a, r, self.offset is not None)
            return
        count, available = math.prod(r.get_shape()), math.prod(a.get_shape())
        if self.offset is None and count != available:
            raise VerifyException(f"tile.view keeps the element count: {a} -> {r}")
        if self.offset is not None and not 0 <= self.element_offset <= available - count:
            raise VerifyException(
                f"tile.view at offset {self.element_offset} reads past its source: {a} -> {r}"
            )
        if memory_space(a) != memory_space(r):
            raise VerifyException(f"tile.view keeps the memory space: {a} -> {r}")


def _check_dynamic_view(a: MemRefType, r: MemRefType, offset: bool) -> None:
    """A view of a buffer of dynamic size: no offset, exactly one dynamic dim in the
    result (its size follows from the element count; the dynamic dims of the two may be
    different multiples of the size, as a batch flattened with its tokens is), static
    dims of the result that are not empty."""
    static = [n for n in a.get_shape() if n >= 0]
    kept = [n for n in r.get_shape() if n >= 0]
    if offset or not is_dynamic(a) or len(kept) != len(r.get_shape()) - 1:
        raise VerifyException(
            f"a view of dynamic size has no offset, and views a buffer of dynamic size as a "
            f"shape with one dynamic dim: {a} -> {r}"
        )
    if math.prod(kept) == 0 or math.prod(static) == 0:
        raise VerifyException(f"tile.view keeps the element count: {a} -> {r}")
    if memory_space(a) != memory_space(r):
        raise VerifyException(f"tile.view keeps the memory space: {a} -> {r}")


@irdl_op_definition
class TorchCallOp(IRDLOperation):
    """Host side: run a PyTorch op on buffers (`nn.torch_call` lowered): the call reads
    `ins`, and its results are copied into `outs` (one buffer per result, of the
    result's shape and element type). The call text is `nn.torch_call`'s.

    Example:
        tile.torch_call "aten.flip.default"(%x) into (%s) {call = "{'args':[{'operand':0},[1]],'kwargs':{}}"} : (memref<4x8xf32>) -> (memref<4x8xf32>)
    """

    name = "tile.torch_call"
    target = attr_def(StringAttr)
    call = attr_def(StringAttr)
    ins = var_operand_def(MemRefType)
    outs = var_operand_def(MemRefType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$target `(` $ins `)` `into` ` ` `(` $outs `)` attr-dict `:` "
        "`(` type($ins) `)` `->` `(` type($outs) `)`"
    )

    def __init__(self, target: str, call: str, ins: Sequence[SSAValue], outs: Sequence[SSAValue]):
        super().__init__(
            operands=[ins, outs],
            attributes={"target": StringAttr(target), "call": StringAttr(call)},
        )

    def verify_(self) -> None:
        from fuseopt.dialects import torch_call

        if enclosing_kernel(self) is not None:
            raise VerifyException("tile.torch_call is a host op; it cannot appear in a kernel")
        if not self.outs:
            raise VerifyException("tile.torch_call needs at least one output buffer")
        try:
            torch_call.check(self.target.data, self.call.data, len(self.ins))
        except ValueError as e:
            raise VerifyException(str(e)) from None


@irdl_op_definition
class GemmOp(IRDLOperation):
    """Host side: `c = a @ b (+ bias)` by a library GEMM (cuBLAS), f32 accumulation.

    Shapes follow `nn.matmul` (batched, `b` may be rank 2, transpose flags). The
    optional `bias` is a vector of c's last dim, added to every row before the single
    rounding to c's type (cuBLAS's bias epilogue, what `torch.addmm` and eager's
    `F.linear` run); it needs a rank-2 `b` and no `transpose_a`. `a` and `c` may have
    dims of dynamic size (rows, batch), never the contraction; `b` and `bias` are static.

    Example:
        tile.gemm %a, %w into %c transpose_b : memref<64x32xbf16>, memref<16x32xbf16>, memref<64x16xbf16>
        tile.gemm %a, %w into %c bias %b transpose_b : memref<64x32xbf16>, memref<16x32xbf16>, memref<64x16xbf16>, memref<16xbf16>
    """

    name = "tile.gemm"
    custom_directives = (FourOperandTypes,)
    assembly_format = (
        "$lhs `,` $rhs `into` $out (`bias` $bias^)? (`transpose_a` $transpose_a^)? "
        "(`transpose_b` $transpose_b^)? "
        "attr-dict `:` custom<FourOperandTypes>(type($lhs), type($rhs), type($out), type($bias))"
    )
    lhs = operand_def(MemRefType)
    rhs = operand_def(MemRefType)
    out = operand_def(MemRefType)
    bias = opt_operand_def(MemRefType)
    transpose_a = opt_attr_def(UnitAttr)
    transpose_b = opt_attr_def(UnitAttr)
    FLAGS: ClassVar[tuple[str, ...]] = ("transpose_a", "transpose_b")

    def __init__(
        self,
        lhs: SSAValue,
        rhs: SSAValue,
        out: SSAValue,
        transpose_a: bool,
        transpose_b: bool,
        bias: SSAValue | None = None,
    ):
        flags = {
            f: UnitAttr()
            for f, on in zip(self.FLAGS, (transpose_a, transpose_b), strict=True)
            if on
        }
        super().__init__(
            operands=[lhs, rhs, out, [bias] if bias is not None else []], attributes=flags
        )

    def verify_(self) -> None:
        from fuseopt.dialects.nn import matmul_shape

        if enclosing_kernel(self) is not None:
            raise VerifyException("tile.gemm is a host op; it cannot appear in a kernel")
        a, c = (
            memref_type(self.lhs, "lhs", dynamic=True),
            memref_type(self.out, "out", dynamic=True),
        )
        b = memref_type(self.rhs, "rhs")
        contraction = a.get_shape()[-2 if self.transpose_a is not None else -1]
        if contraction < 0:
            raise VerifyException(f"tile.gemm needs a static contraction dim, got {a}")
        if not is_float(a.element_type) or {a.element_type, b.element_type, c.element_type} != {
            a.element_type
        }:
            raise VerifyException(f"tile.gemm needs one floating-point element type: {a}, {b}, {c}")
        try:
            want = matmul_shape(
                a.get_shape(),
                b.get_shape(),
                self.transpose_a is not None,
                self.transpose_b is not None,
            )
        except ValueError as e:
            raise VerifyException(str(e)) from None
        if tuple(c.get_shape()) != want:
            raise VerifyException(f"out must have shape {shape_str(want)}, got {c}")
        if self.bias is None:
            return
        bias = memref_type(self.bias, "bias")
        if bias.element_type != c.element_type or tuple(bias.get_shape()) != want[-1:]:
            raise VerifyException(
                f"bias must be a vector of out's last dim and type, {c.element_type} "
                f"x{want[-1]}, got {bias}"
            )
        if len(b.get_shape()) != 2 or self.transpose_a is not None:
            raise VerifyException("a bias needs a rank-2 rhs and no transpose_a (torch.addmm)")


# --------------------------------------------------------------------------- tile math


@irdl_op_definition
class DotOp(SharedTypeOp, IRDLOperation):
    """`acc + a @ b` on tiles, accumulated and returned in f32.

    `a` is [..., M, K], `b` [..., K, N] of one floating-point type; `acc` and the
    result are [..., M, N] f32. Kernel-only.

    Example:
        %d = tile.dot %a, %b, %acc : tensor<64x32xbf16>, tensor<32x64xbf16>, tensor<64x64xf32>
    """

    name = "tile.dot"
    custom_directives = (SharedType,)
    assembly_format = (
        "$lhs `,` $rhs `,` $acc attr-dict `:` type($lhs) `,` type($rhs) `,` "
        "custom<SharedType>(type($acc), type($result))"
    )
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    acc = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, lhs: SSAValue, rhs: SSAValue, acc: SSAValue):
        super().__init__(operands=[lhs, rhs, acc], result_types=[acc.type])

    def verify_(self) -> None:
        from xdsl.dialects.builtin import Float32Type

        require_kernel(self)
        a, b = tensor_type(self.lhs, "lhs"), tensor_type(self.rhs, "rhs")
        c = tensor_type(self.acc, "acc")
        if not is_float(a.element_type) or a.element_type != b.element_type:
            raise VerifyException(f"tile.dot needs floating-point tiles of one type: {a}, {b}")
        if not isinstance(c.element_type, Float32Type) or self.result.type != c:
            raise VerifyException(
                f"tile.dot accumulates in f32: acc and result must be f32, got {c}"
            )
        sa, sb, sc = a.get_shape(), b.get_shape(), c.get_shape()
        if not (len(sa) == len(sb) == len(sc) >= 2) or sa[:-2] != sb[:-2] or sa[:-2] != sc[:-2]:
            raise VerifyException(
                f"tile.dot operands need one rank >= 2 and batch dims: {a}, {b}, {c}"
            )
        if sa[-1] != sb[-2] or sc[-2:] != (sa[-2], sb[-1]):
            raise VerifyException(f"tile.dot shapes do not chain: {a}, {b}, {c}")


REDUCE_KINDS = ("sum", "max", "min")


class TileShapeOp(IRDLOperation, ABC):
    """Base of tile ops `%r = tile.<op> %x <extra> : tensor<A> -> tensor<B>`; subclasses
    declare their assembly formats."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())


@irdl_op_definition
class ReduceOp(TileShapeOp):
    """Reduce a tile along one axis with sum, max or min (the axis is dropped).

    Sums of f16/bf16 tiles accumulate in f32 and round once. Kernel-only.

    Example:
        %s = tile.reduce sum %x axis 1 : tensor<2x128xf32> -> tensor<2xf32>
    """

    name = "tile.reduce"
    kind = attr_def(StringAttr)
    axis = attr_def(IntegerAttr)
    custom_directives = (BareIdentifier, BareInteger)
    assembly_format = (
        "custom<BareIdentifier>($kind) $input `axis` custom<BareInteger>($axis) attr-dict `:` "
        "type($input) `->` type($result)"
    )

    def __init__(self, kind: str, input: SSAValue, axis: int):
        t = tensor_type(input, "input")
        shape = [d for i, d in enumerate(t.get_shape()) if i != axis]
        super().__init__(
            operands=[input],
            result_types=[TensorType(t.element_type, shape)],
            attributes={"kind": StringAttr(kind), "axis": IntegerAttr(axis, i64)},
        )

    @property
    def axis_index(self) -> int:
        """The reduced axis."""
        return self.axis.value.data

    def verify_(self) -> None:
        require_kernel(self)
        check_i64(self.axis, "axis")
        x, r = tensor_type(self.input, "input"), tensor_type(self.result, "result")
        if self.kind.data not in REDUCE_KINDS:
            raise VerifyException(f"kind must be one of {REDUCE_KINDS}, got '{self.kind.data}'")
        shape = x.get_shape()
        if not 0 <= self.axis_index < len(shape):
            raise VerifyException(f"axis {self.axis_index} is out of range for {x}")
        want = tuple(d for i, d in enumerate(shape) if i != self.axis_index)
        if r.get_shape() != want or r.element_type != x.element_type:
            raise VerifyException(
                f"result must be tensor<{shape_str(want)}x{x.element_type}>, got {r}"
            )


@irdl_op_definition
class BroadcastOp(TileShapeOp):
    """Broadcast a tile: operand dim i becomes result dim `dims[i]` (size 1 or equal).

    Kernel-only.

    Example:
        %b = tile.broadcast %r dims [0] : tensor<2xf32> -> tensor<2x128xf32>
    """

    name = "tile.broadcast"
    dims = attr_def(DenseArrayBase)
    custom_directives = (IntList,)
    assembly_format = (
        "$input `dims` custom<IntList>($dims) attr-dict `:` type($input) `->` type($result)"
    )

    def __init__(self, input: SSAValue, dims: Sequence[int], result_type: TensorType):
        super().__init__(
            operands=[input], result_types=[result_type], attributes={"dims": int_array(dims)}
        )

    def verify_(self) -> None:
        require_kernel(self)
        check_i64(self.dims, "dims")
        x, r = tensor_type(self.input, "input"), tensor_type(self.result, "result")
        dims = array_values(self.dims)
        xs, rs = x.get_shape(), r.get_shape()
        if x.element_type != r.element_type:
            raise VerifyException(f"tile.broadcast keeps the element type: {x} -> {r}")
        if (
            len(dims) != len(xs)
            or list(dims) != sorted(set(dims))
            or any(not 0 <= d < len(rs) for d in dims)
        ):
            raise VerifyException(
                f"dims {list(dims)} must be increasing result dims, one per operand dim of {x}"
            )
        for i, d in enumerate(dims):
            if xs[i] not in (1, rs[d]):
                raise VerifyException(f"operand dim {i} (size {xs[i]}) cannot broadcast to {rs[d]}")


@irdl_op_definition
class TransposeOp(TileShapeOp):
    """Permute the dims of a tile: result dim i is operand dim `permutation[i]`.

    Kernel-only.

    Example:
        %t = tile.transpose %x [1, 0] : tensor<32x64xf32> -> tensor<64x32xf32>
    """

    name = "tile.transpose"
    permutation = attr_def(DenseArrayBase)
    custom_directives = (IntList,)
    assembly_format = (
        "$input custom<IntList>($permutation) attr-dict `:` type($input) `->` type($result)"
    )

    def __init__(self, input: SSAValue, permutation: Sequence[int]):
        t = tensor_type(input, "input")
        shape = [t.get_shape()[p] for p in permutation]
        super().__init__(
            operands=[input],
            result_types=[TensorType(t.element_type, shape)],
            attributes={"permutation": int_array(permutation)},
        )

    def verify_(self) -> None:
        require_kernel(self)
        check_i64(self.permutation, "permutation")
        x, r = tensor_type(self.input, "input"), tensor_type(self.result, "result")
        perm = array_values(self.permutation)
        if sorted(perm) != list(range(len(x.get_shape()))):
            raise VerifyException(f"{list(perm)} is not a permutation of {len(x.get_shape())} dims")
        want = tuple(x.get_shape()[p] for p in perm)
        if r.get_shape() != want or r.element_type != x.element_type:
            raise VerifyException(
                f"result must be tensor<{shape_str(want)}x{x.element_type}>, got {r}"
            )


TILE = Dialect(
    "tile",
    [
        KernelOp,
        ReturnOp,
        LaunchOp,
        ProgramIdOp,
        DimOp,
        LoadOp,
        GatherOp,
        StoreOp,
        MaskOp,
        AllocOp,
        CopyOp,
        BarrierOp,
        ViewOp,
        IotaOp,
        GemmOp,
        TorchCallOp,
        DotOp,
        ReduceOp,
        BroadcastOp,
        TransposeOp,
    ],
    [MemorySpaceAttr],
)
"""The tile dialect object registered with xDSL contexts."""

__all__ = [
    "SHARED",
    "TILE",
    "AllocOp",
    "BarrierOp",
    "DimOp",
    "BroadcastOp",
    "CopyOp",
    "DotOp",
    "GatherOp",
    "GemmOp",
    "IotaOp",
    "KernelOp",
    "LaunchOp",
    "LoadOp",
    "MaskOp",
    "MemorySpace",
    "MemorySpaceAttr",
    "ProgramIdOp",
    "ReduceOp",
    "ReturnOp",
    "StoreOp",
    "TorchCallOp",
    "TransposeOp",
    "ViewOp",
    "memory_space",
]
