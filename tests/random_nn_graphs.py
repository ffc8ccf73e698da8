"""Random valid nn graphs for property-based tests (hypothesis).

`nn_graphs()` is a hypothesis strategy that draws a `RandomGraph`: the MLIR text of one
function `@main` of 1 to 40 primitive nn ops (by default), plus the argument types, so a
test can parse it, make random inputs and compare two pipelines with
`fuseopt.interpret`. The ops cover what fusion and tiling care about:

- unary and binary elementwise ops (the rounding ones too: floor, ceil, trunc,
  floor_div, trunc_div, remainder, fmod), compare + select, casts (f32 <-> bf16);
- broadcasts (new leading dims, size-1 dims expanded), splat constants, index vectors
  (an arange along one axis, broadcast);
- reductions (sum, reduce_max, reduce_min, mean) over random axes, with or without keepdim;
- argmax / argmin along a random axis as the frontend builds them (the extreme, the
  positions holding it or NaN, their least), the index cast back to f32;
- matmuls (fresh weight arguments, optional transpose_b, batched or not);
- shape ops: reshape, transpose, slice, concat;
- prefix sums (`nn.cumsum`) along a random axis;
- gathers (`nn.take`) at random in-range positions (a dense constant), or as an
  embedding builds them: a row id times the row length plus a column index vector;
- several results: the function returns 1 to 3 values, intermediates included.

Shapes are tiny (dims 1 to 4, rank 1 to 3) so the reference interpreter stays fast. The
graphs are in f32 except where a cast makes bf16. Use:

    from hypothesis import given
    from tests.random_nn_graphs import nn_graphs

    @given(nn_graphs())
    def test_something(graph):
        module = fuseopt.parse(graph.text)
        args = graph.random_inputs(seed=0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

import fuseopt

UNARY = (
    "neg",
    "abs",
    "exp",
    "tanh",
    "sigmoid",
    "relu",
    "gelu",
    "silu",
    "sin",
    "cos",
    "sqrt",
    "log",
    "rsqrt",
    "reciprocal",
    "erf",
    "floor",
    "ceil",
    "trunc",
)
BINARY = (
    "add",
    "sub",
    "mul",
    "div",
    "max",
    "min",
    "floor_div",
    "trunc_div",
    "remainder",
    "fmod",
)
REDUCTIONS = ("sum", "reduce_max", "reduce_min", "mean")
COMPARES = ("lt", "le", "gt", "ge", "eq", "ne")
FLOATS = ("f32", "bf16")
"""The element types drawn ops compute on (i1 and i64 values only feed selects and takes)."""


def type_str(shape: tuple[int, ...], dtype: str = "f32") -> str:
    """`tensor<2x3xf32>` for a shape and element type (rank 0: `tensor<f32>`)."""
    dims = "".join(f"{d}x" for d in shape)
    return f"tensor<{dims}{dtype}>"


@dataclass
class RandomGraph:
    """A drawn graph: MLIR text of `@main` and the shapes of its arguments."""

    text: str
    arg_shapes: list[tuple[int, ...]] = field(default_factory=list)
    num_ops: int = 0

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Random f32 inputs in [-2, 2] for the arguments (never all ones)."""
        rng = np.random.default_rng(seed)
        return [rng.uniform(-2, 2, size=s).astype(np.float32) for s in self.arg_shapes]


@dataclass
class _Builder:
    draw: st.DrawFn
    lines: list[str] = field(default_factory=list)
    args: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    values: list[tuple[str, tuple[int, ...], str]] = field(default_factory=list)
    count: int = 0

    def fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def arg(self, shape: tuple[int, ...]) -> str:
        name = f"%a{len(self.args)}"
        self.args.append((name, shape))
        self.values.append((name, shape, "f32"))
        return name

    def emit(self, text: str, shape: tuple[int, ...], dtype: str = "f32") -> str:
        name = self.fresh()
        self.lines.append(f"    {name} = {text}")
        self.values.append((name, shape, dtype))
        return name

    def pick(self, dtype: str | None = "f32") -> tuple[str, tuple[int, ...], str]:
        pool = [v for v in self.values if v[2] == dtype or (dtype is None and v[2] in FLOATS)]
        return self.draw(st.sampled_from(pool))

    def same_shaped(self, shape: tuple[int, ...], dtype: str) -> str:
        pool = [v[0] for v in self.values if v[1] == shape and v[2] == dtype]
        if pool and self.draw(st.booleans()):
            return self.draw(st.sampled_from(pool))
        if dtype == "f32":
            return self.arg(shape)
        return self.emit(
            f"nn.cast {self.arg(shape)} : {type_str(shape)} -> {type_str(shape, dtype)}",
            shape,
            dtype,
        )


def _add_op(b: _Builder) -> None:
    draw = b.draw
    kind = draw(
        st.sampled_from(
            [
                "unary",
                "unary",
                "binary",
                "binary",
                "broadcast",
                "reduce",
                "matmul",
                "reshape",
                "transpose",
                "slice",
                "concat",
                "select",
                "cast",
                "constant",
                "index_vector",
                "take",
                "cumsum",
                "argmax",
            ]
        )
    )
    x, shape, dtype = b.pick(None if kind in ("unary", "binary", "cast") else "f32")
    t = type_str(shape, dtype)
    rank = len(shape)
    if kind == "unary":
        op = draw(st.sampled_from(UNARY))
        b.emit(f"nn.{op} {x} : {t}", shape, dtype)
    elif kind == "binary":
        y = b.same_shaped(shape, dtype)
        b.emit(f"nn.{draw(st.sampled_from(BINARY))} {x}, {y} : {t}", shape, dtype)
    elif kind == "cast":
        to = "bf16" if dtype == "f32" else "f32"
        b.emit(f"nn.cast {x} : {t} -> {type_str(shape, to)}", shape, to)
    elif kind == "broadcast":
        out = tuple(draw(st.integers(1, 3)) if d == 1 else d for d in shape)
        if rank < 3 and draw(st.booleans()):
            out = (draw(st.integers(1, 3)), *out)
        b.emit(f"nn.broadcast {x} : {t} -> {type_str(out)}", out)
    elif kind == "reduce" and rank >= 1:
        axes = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank)))
        keep = draw(st.booleans())
        out = tuple((1 if i in axes else d) for i, d in enumerate(shape) if keep or i not in axes)
        kw = " keepdim" if keep else ""
        b.emit(
            f"nn.{draw(st.sampled_from(REDUCTIONS))} {x} {axes}{kw} : {t} -> {type_str(out)}", out
        )
    elif kind == "matmul" and rank >= 2:
        k, n = shape[-1], draw(st.integers(1, 4))
        tb = draw(st.booleans())
        w_shape = (n, k) if tb else (k, n)
        if rank == 3 and draw(st.booleans()):
            w_shape = (shape[0], *w_shape)
        w = b.same_shaped(w_shape, "f32")
        out = (*shape[:-1], n)
        flag = " transpose_b" if tb else ""
        b.emit(f"nn.matmul {x}, {w}{flag} : {t}, {type_str(w_shape)} -> {type_str(out)}", out)
    elif kind == "reshape":
        size = math.prod(shape)
        divisors = [d for d in range(1, size + 1) if size % d == 0]
        first = draw(st.sampled_from(divisors))
        out = (first, size // first) if draw(st.booleans()) else (size,)
        b.emit(f"nn.reshape {x} : {t} -> {type_str(out)}", out)
    elif kind == "transpose" and rank >= 2:
        perm = draw(st.permutations(range(rank)))
        out = tuple(shape[p] for p in perm)
        b.emit(f"nn.transpose {x} {list(perm)} : {t} -> {type_str(out)}", out)
    elif kind == "slice" and rank >= 1:
        parts, out = [], []
        for d in shape:
            lo = draw(st.integers(0, d - 1))
            hi = draw(st.integers(lo + 1, d))
            step = draw(st.integers(1, 2))
            parts.append(f"{lo}:{hi}" + (f":{step}" if step != 1 else ""))
            out.append(-(-(hi - lo) // step))
        b.emit(f"nn.slice {x} [{', '.join(parts)}] : {t} -> {type_str(tuple(out))}", tuple(out))
    elif kind == "concat" and rank >= 1:
        axis = draw(st.integers(0, rank - 1))
        y = b.same_shaped(shape, "f32")
        out = tuple(d * 2 if i == axis else d for i, d in enumerate(shape))
        b.emit(f"nn.concat {x}, {y} axis {axis} : {t}, {t} -> {type_str(out)}", out)
    elif kind == "select":
        y = b.same_shaped(shape, "f32")
        pred = draw(st.sampled_from(COMPARES))
        c = b.emit(f"nn.compare {pred}, {x}, {y} : {t}", shape, "i1")
        b.emit(f"nn.select {c}, {x}, {y} : {t}", shape)
    elif kind == "index_vector" and any(d > 1 for d in shape):
        # start + step * i along one axis (an arange: kernels compute it, tile.iota)
        axis = draw(st.sampled_from([i for i, d in enumerate(shape) if d > 1]))
        start, step = draw(st.integers(-3, 3)), draw(st.sampled_from([-2, -1, 1, 3]))
        n = shape[axis]
        values = ", ".join(f"{float(start + step * i)}" for i in range(n))
        c = b.emit(f"nn.constant dense<[{values}]> : {type_str((n,))}", (n,))
        along = tuple(d if i == axis else 1 for i, d in enumerate(shape))
        r = b.emit(f"nn.reshape {c} : {type_str((n,))} -> {type_str(along)}", along)
        v = b.emit(f"nn.broadcast {r} : {type_str(along)} -> {t}", shape)
        b.emit(f"nn.add {x}, {v} : {t}", shape)
    elif kind == "take":
        _add_take(b, x, shape)
    elif kind == "argmax" and rank >= 1:
        _add_argmax(b, x, shape, draw(st.integers(0, rank - 1)), draw(st.booleans()))
    elif kind == "cumsum" and rank >= 1:
        axis = draw(st.integers(0, rank - 1))
        b.emit(f"nn.cumsum {x} axis {axis} : {t} -> {t}", shape)
    else:  # constant (and kinds that did not apply to this rank)
        c = b.emit(f"nn.constant {draw(st.sampled_from([0.5, -1.5, 2.0]))} : {t}", shape)
        b.emit(f"nn.mul {x}, {c} : {t}", shape)


def _add_argmax(b: _Builder, x: str, shape: tuple[int, ...], axis: int, largest: bool) -> None:
    """The frontend's argmax (argmin) of f32 `x` along `axis`, keepdim: the least
    position holding the extreme, or the first NaN; cast to f32."""
    t, it = type_str(shape), type_str(shape, "i64")
    kept = tuple(1 if i == axis else d for i, d in enumerate(shape))
    kind = "reduce_max" if largest else "reduce_min"
    m = b.emit(f"nn.{kind} {x} [{axis}] keepdim : {t} -> {type_str(kept)}", kept)
    n = shape[axis]
    positions = b.emit(
        f"nn.constant dense<[{', '.join(map(str, range(n)))}]> : {type_str((n,), 'i64')}",
        (n,),
        "i64",
    )
    along = tuple(n if i == axis else 1 for i in range(len(shape)))
    if along != (n,):
        reshape = f"nn.reshape {positions} : {type_str((n,), 'i64')} -> {type_str(along, 'i64')}"
        positions = b.emit(reshape, along, "i64")
    if along != shape:
        broadcast = f"nn.broadcast {positions} : {type_str(along, 'i64')} -> {it}"
        positions = b.emit(broadcast, shape, "i64")
    past = b.emit(f"nn.constant {n} : {it}", shape, "i64")
    extreme = b.emit(f"nn.broadcast {m} : {type_str(kept)} -> {t}", shape)
    hit = b.emit(f"nn.compare eq, {x}, {extreme} : {t}", shape, "i1")
    candidate = b.emit(f"nn.select {hit}, {positions}, {past} : {it}", shape, "i64")
    nan = b.emit(f"nn.compare ne, {x}, {x} : {t}", shape, "i1")
    candidate = b.emit(f"nn.select {nan}, {positions}, {candidate} : {it}", shape, "i64")
    first = b.emit(
        f"nn.reduce_min {candidate} [{axis}] keepdim : {it} -> {type_str(kept, 'i64')}",
        kept,
        "i64",
    )
    b.emit(f"nn.cast {first} : {type_str(kept, 'i64')} -> {type_str(kept)}", kept)


def _add_take(b: _Builder, x: str, shape: tuple[int, ...]) -> None:
    """`nn.take` of `x`: at random positions (a dense i64 constant of a random shape),
    or row by row as an embedding reads (row ids times the row length, plus a column
    index vector; `x` viewed as rows of its last dim)."""
    draw, numel = b.draw, math.prod(shape)
    t = type_str(shape)
    if draw(st.booleans()) or not shape:
        out = tuple(draw(st.integers(1, 4)) for _ in range(draw(st.integers(1, 3))))
        positions = draw(
            st.lists(st.integers(0, numel - 1), min_size=math.prod(out), max_size=math.prod(out))
        )
        dense = np.array(positions).reshape(out).tolist()
        p = b.emit(f"nn.constant dense<{dense}> : {type_str(out, 'i64')}", out, "i64")
    else:
        cols, rows = shape[-1], numel // shape[-1]
        k = draw(st.integers(1, 4))
        ids = draw(st.lists(st.integers(0, rows - 1), min_size=k, max_size=k))
        out = (k, cols)
        r = b.emit(
            f"nn.constant dense<{[[i * cols] for i in ids]}> : {type_str((k, 1), 'i64')}",
            (k, 1),
            "i64",
        )
        rb = b.emit(
            f"nn.broadcast {r} : {type_str((k, 1), 'i64')} -> {type_str(out, 'i64')}", out, "i64"
        )
        c = b.emit(
            f"nn.constant dense<{list(range(cols))}> : {type_str((cols,), 'i64')}", (cols,), "i64"
        )
        cb = b.emit(
            f"nn.broadcast {c} : {type_str((cols,), 'i64')} -> {type_str(out, 'i64')}", out, "i64"
        )
        p = b.emit(f"nn.add {rb}, {cb} : {type_str(out, 'i64')}", out, "i64")
    b.emit(f"nn.take {x}, {p} : {t}, {type_str(out, 'i64')} -> {type_str(out)}", out)


@st.composite
def nn_graphs(draw: st.DrawFn, min_ops: int = 1, max_ops: int = 40) -> RandomGraph:
    """A random valid nn function `@main` with `min_ops`..`max_ops` drawn ops (a few
    draws add a helper op: a cast, a compare or a constant) and 1 to 3 results."""
    b = _Builder(draw)
    rank = draw(st.integers(1, 3))
    b.arg(tuple(draw(st.integers(1, 4)) for _ in range(rank)))
    for _ in range(draw(st.integers(min_ops, max_ops))):
        _add_op(b)
    computed = [v for v in b.values if v[0].startswith("%v") and v[2] in FLOATS] or [
        v for v in b.values if v[2] in FLOATS
    ]
    results = [computed[-1]]
    extra = draw(st.lists(st.sampled_from(computed), max_size=2))
    results += [v for v in extra if v not in results]
    args = ", ".join(f"{n}: {type_str(s)}" for n, s in b.args)
    rtypes = ", ".join(type_str(s, d) for _, s, d in results)
    text = "\n".join(
        [
            f"func.func @main({args}) -> ({rtypes}) {{",
            *b.lines,
            f"    func.return {', '.join(r[0] for r in results)} : {rtypes}",
            "}",
        ]
    )
    return RandomGraph(text, [s for _, s in b.args], len(b.lines))


def assert_same_results(
    expected: tuple[np.ndarray, ...], actual: tuple[np.ndarray, ...], rtol: float, atol: float
) -> None:
    """Equal shapes and dtypes; booleans exactly equal, numbers within `rtol`/`atol`."""
    for e, a in zip(expected, actual, strict=True):
        assert e.shape == a.shape and e.dtype == a.dtype
        if e.dtype == np.bool_:
            assert np.array_equal(e, a)
        else:
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)


def interpret_both_ways(module, name: str, *args: np.ndarray) -> list[tuple[np.ndarray, ...]]:  # noqa: ANN001
    """`module`'s function `name` run by the interpreter twice: with fresh buffers
    holding NaN / 0, then 1e30 / 1 (`unwritten`). Both runs must match the reference:
    an output element no kernel writes fails one of them even where the expected value
    is NaN."""
    first = fuseopt.interpret(module, name, *args)
    second = fuseopt.interpret(module, name, *args, unwritten=(1.0e30, 1))
    return [first, second]
