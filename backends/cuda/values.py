"""How the CUDA printer holds tile values: register layouts, shared arrays, fragments.

One program is one thread block of `nt` threads (`fo_tid` = threadIdx.x). A tile of
shape S (n elements) is held in one of these forms (`Val.kind`):

- **dist** (`Layout`): the tile's row-major elements split into chunks of `v`
  consecutive elements (a 16-byte vector at most, never crossing a row); thread t
  holds chunks t, t + nt, t + 2 nt, ... in a register array of `slots` elements, so
  element (k, j) of thread t is flat index ((k * nt + t) * v + j). Coalesced and
  vectorizable; elementwise ops run slot by slot with no communication;
- **uniform**: every element equals one value that every thread holds (splat
  constants, broadcasts of them, reductions to one element);
- **chunk**: a dist tile whose chunks are each constant: one register per chunk
  (a per-row value broadcast along rows);
- **rowred**: per chunk of a parent dist layout, the value of that chunk's row of
  the parent tile: what a row reduction leaves in registers, ready to broadcast back;
- **colred**: a tile whose element at flat index f depends only on its column
  f % C, where `layout` is a dist layout of C elements whose round of chunks covers
  whole rows (nt * v a multiple of C): thread t holds columns (t * v) % C .. + v in v
  registers, which are its slots in every chunk of any such layout; what a
  reduction over a leading axis leaves (`reduce.py`'s columns strategy), kept through
  elementwise ops and broadcasts along new rows (`columns_fit`);
- **array**: every element addressable in memory (shared memory or a `__device__`
  constant table), row-major; broadcasts, transposes and generic reductions read it;
- **frag**: a matmul accumulator in WMMA fragments, each warp owning 16x16 blocks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute

from fuseopt.dialects import tile


@dataclass(frozen=True)
class Layout:
    """The dist layout of a tile shape over `nt` threads with chunks of `v` elements."""

    shape: tuple[int, ...]
    nt: int
    v: int

    @property
    def n(self) -> int:
        """Elements in the tile."""
        return math.prod(self.shape)

    @property
    def chunks(self) -> int:
        """Chunks per thread."""
        return max(1, -(-self.n // (self.nt * self.v)))

    @property
    def slots(self) -> int:
        """Register slots per thread."""
        return self.chunks * self.v

    @property
    def guarded(self) -> bool:
        """Whether some threads' last chunks lie past the end of the tile."""
        return self.n % (self.nt * self.v) != 0

    def chunk_start(self, k: int) -> str:
        """C expression: the flat index of the first element of chunk `k`."""
        base = k * self.nt * self.v
        return f"({base} + fo_tid * {self.v})" if base else f"(fo_tid * {self.v})"


def columns_fit(x: Val, lay: Layout) -> bool:
    """Whether colred tile `x` reads as dist layout `lay` of its shape with no data
    movement: `lay` has x's threads and chunk length, and its rounds of chunks cover
    whole rows of x's columns, so slot j of every chunk is the column x holds in j."""
    per = x.layout
    return (
        x.kind == "colred"
        and per is not None
        and lay.nt == per.nt
        and lay.v == per.v
        and lay.n == x.n
        and (lay.nt * lay.v) % per.n == 0
    )


def default_layout(shape: tuple[int, ...], nt: int, vector: int) -> Layout:
    """The layout tiles of `shape` get by default: chunks of gcd(vector, last dim)."""
    last = shape[-1] if shape else 1
    return Layout(tuple(shape), nt, math.gcd(vector, last) or 1)


@dataclass
class Val:
    """A tile value in the generated code (see the module docstring for `kind`)."""

    kind: str
    name: str
    shape: tuple[int, ...]
    elem: Attribute
    layout: Layout | None = None
    array_ctype: str | None = None
    frag: FragInfo | None = None
    extra: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Elements in the tile."""
        return math.prod(self.shape)


@dataclass(frozen=True)
class FragInfo:
    """WMMA accumulator fragments of an [m, n] f32 tile.

    The warps form a `wm` x `wn` grid (warps past it idle); each owns an `fm` x `fn`
    rectangle of 16x16 blocks, so one A fragment serves `fn` products and one B
    fragment `fm`.
    """

    m: int
    n: int
    wm: int
    wn: int
    fm: int
    fn: int

    @property
    def count(self) -> int:
        """Fragments per warp."""
        return self.fm * self.fn

    def row(self, i: int) -> str:
        """C expression: first row of the warp's i-th block row."""
        return f"((fo_warp / {self.wn}) * {self.fm} + {i}) * 16"

    def col(self, j: int) -> str:
        """C expression: first column of the warp's j-th block column."""
        return f"((fo_warp % {self.wn}) * {self.fn} + {j}) * 16"


def c_size(n: int | str) -> str:
    """A buffer dim or stride as a C `long long` expression: a number with its `LL`
    suffix, or a dynamic size's expression in parentheses."""
    return f"{n}LL" if isinstance(n, int) else f"({n})"


@dataclass
class Buffer:
    """A memref in a kernel: a global parameter or a shared-memory buffer. A dim of
    dynamic size (`?`) is the C name of the kernel's `long long` parameter holding it."""

    name: str
    shape: tuple[int | str, ...]
    elem: Attribute
    shared: bool
    readonly: bool = False
    view: tuple[tuple[int, ...], int] | None = None
    """(strides, offset) of a strided view parameter (`tile.strided_layout`); None for a
    contiguous row-major buffer."""

    @classmethod
    def parameter(
        cls, name: str, t: MemRefType, readonly: bool, fresh: Callable[[str], str]
    ) -> Buffer:
        """The kernel parameter `name` of type `t`: each dynamic dim (`?`) is named by
        `fresh("<name>_n<dim>")` (the kernel's `long long` parameter holding it). A
        ValueError for a strided view of dynamic size."""
        view = tile.strided_layout(t)
        if view is not None and tile.is_dynamic(t):
            raise ValueError("a strided view of dynamic size (?)")
        dims = tuple(n if n >= 0 else fresh(f"{name}_n{d}") for d, n in enumerate(t.get_shape()))
        return cls(name, dims, t.element_type, False, readonly, view)

    def strides(self) -> tuple[int | str, ...]:
        """Strides in elements (row-major unless a strided view): numbers, or C
        expressions of the dynamic dims after them."""
        return tile.row_major_exprs(self.shape) if self.view is None else self.view[0]

    @property
    def numel(self) -> str:
        """The number of elements as a C `long long` expression."""
        static = math.prod(n for n in self.shape if isinstance(n, int))
        names = [n for n in self.shape if isinstance(n, str)]
        return " * ".join([*names, f"{static}LL"]) if names else f"{static}LL"

    @property
    def offset(self) -> int:
        """Where the elements start in the pointer passed (0 but for a strided view)."""
        return 0 if self.view is None else self.view[1]

    @property
    def unit_last(self) -> bool:
        """Whether consecutive elements of the last dim are adjacent (chunks of a row can
        move as one vector)."""
        return not self.shape or self.strides()[-1] == 1
