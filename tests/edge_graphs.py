"""Hypothesis strategies for the edge-case property tests (tests/test_property_edges.py).

Each strategy draws an `EdgeCase`: a small PyTorch function, the tensors to call it on,
and a label that reproduces it. The classes are those an outside fuzzer found bugs in:

- `nan_inf_cases`: NaN and +-Inf through every max/min and every reduction;
- `cast_cases`: casts between every pair of nn dtypes, before and after arithmetic;
- `empty_cases`: zero-size tensors (batch 0, reductions over a size-0 axis);
- `chain_cases`: long random elementwise DAGs (hundreds of ops, values kept in [-2, 2]);
- `slice_concat_cases`: slices and concats giving odd widths, then reductions;
- `overflow_cases`: f16/bf16 inputs up to +-60 (and larger for the normalizations)
  through decomposed activations and normalizations.

Functions compute in the dtype of their inputs except where they cast explicitly, so
running them on float64 copies of the inputs gives the reference (`upcast`). Values come
from a seeded generator (`seed` in the label); the positions of special values (NaN,
Inf, extremes) are drawn by Hypothesis, so a failure shrinks to the few that matter.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

FLOATS = (torch.float32, torch.float16, torch.bfloat16)
"""The floating-point dtypes nn has (frontends/fx/types.py)."""

DTYPES = (*FLOATS, torch.bool, torch.int64)
"""Every dtype nn has: casts are drawn between each pair (int32 is outside the table)."""

REPR_ELEMENTS = 24
"""Inputs up to this many elements are printed whole in a case's repr."""

Fn = Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]


class EdgeCase:
    """A function and its inputs; `label` names the op, shapes, dtype and seed.

    `exact[i]`: float result i must equal eager's bit for bit (casts, max/min); the
    others are judged against the float64 run with a tolerance scaled by eager's error.
    `depth`: the most ops between an input and a result; each may round a few f32 ulps
    differently from eager's (another formula), and such biases add up along a chain.
    """

    def __init__(
        self,
        label: str,
        fn: Fn,
        inputs: tuple[torch.Tensor, ...],
        exact: tuple[bool, ...] = (),
        depth: int = 1,
    ):
        self.label, self.fn, self.inputs, self.exact, self.depth = label, fn, inputs, exact, depth

    def is_exact(self, result: int) -> bool:
        """Whether result `result` must equal eager's bit for bit."""
        return result < len(self.exact) and self.exact[result]

    def __repr__(self) -> str:
        """What Hypothesis prints for a failing example: the label and the inputs."""
        parts = []
        for t in self.inputs:
            if t.numel() <= REPR_ELEMENTS:
                parts.append(repr(t))
            else:
                parts.append(f"<{str(t.dtype).removeprefix('torch.')}{list(t.shape)}>")
        return f"EdgeCase({self.label}; inputs: {', '.join(parts)})"


def upcast(t: torch.Tensor) -> torch.Tensor:
    """A float64 copy of a floating-point tensor (others unchanged): the reference's input."""
    return t.to(torch.float64) if t.is_floating_point() else t


def at_least_f32(x: torch.Tensor) -> torch.Tensor:
    """`x` in float32, or float64 when it already is (so the reference stays float64)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _uniform(shape: Sequence[int], dtype: torch.dtype, seed: int, bound: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(tuple(shape), generator=g, dtype=torch.float64) * 2 - 1) * bound
    return x.to(dtype)


def _place(x: torch.Tensor, specials: Sequence[tuple[int, float]]) -> torch.Tensor:
    flat = x.flatten().clone()
    for i, v in specials:
        flat[i % flat.numel()] = v
    return flat.reshape(x.shape)


def _specials(
    draw: st.DrawFn, numel: int, values: Sequence[float], min_size: int = 0
) -> list[tuple[int, float]]:
    index = st.integers(0, max(numel - 1, 0))
    pairs = st.tuples(index, st.sampled_from(values))
    return draw(st.lists(pairs, min_size=min_size, max_size=4))


# (a) NaN / Inf through max, min and reductions ------------------------------------


def _rms_pattern(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _llama_rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = at_least_f32(x)
    return w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)


def _layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


MAX_MIN: dict[str, Fn] = {
    "amax": lambda x, y, d: x.amax(d),
    "amin": lambda x, y, d: x.amin(d),
    "max": lambda x, y, d: torch.max(x),
    "min": lambda x, y, d: torch.min(x),
    "maximum": lambda x, y, d: torch.maximum(x, y),
    "minimum": lambda x, y, d: torch.minimum(x, y),
    "clamp": lambda x, y, d: torch.clamp(x, -1.0, 1.0),
    "clamp_min": lambda x, y, d: torch.clamp_min(x, 0.5),
    "clamp_max": lambda x, y, d: torch.clamp_max(x, 0.5),
    "hardtanh": lambda x, y, d: F.hardtanh(x),
    "relu6": lambda x, y, d: F.relu6(x),
    "relu": lambda x, y, d: torch.relu(x),
}
"""Every max/min of x (and y), over axis d where it reduces. Eager propagates NaN
through all of them, and their results are exact."""

REDUCTIONS: dict[str, Fn] = {
    "sum": lambda x, y, d: x.sum(d),
    "mean": lambda x, y, d: x.mean(d),
    "softmax": lambda x, y, d: torch.softmax(x, d),
    "log_softmax": lambda x, y, d: torch.log_softmax(x, d),
    "layer_norm": lambda x, y, d: F.layer_norm(x, (x.shape[-1],)),
    "rms_norm": lambda x, y, d: F.rms_norm(x, (x.shape[-1],), None, 1e-6),
    "rms_pattern": lambda x, y, d: _rms_pattern(x, 1.0),
    "sub_amax": lambda x, y, d: x - x.amax(d, keepdim=True),
    "sum_of_maximum": lambda x, y, d: torch.maximum(x, y).sum(d),
}
"""Every reduction family of x (and y), over axis d (normalizations: the last axis)."""

SPECIAL = (math.nan, math.inf, -math.inf)


@dataclass(frozen=True)
class Several:
    """The named ops of `table` on the same (x, y), over axis `dim`: a tuple of results
    (one graph, so the ops may fuse into one multi-result kernel)."""

    names: tuple[str, ...]
    dim: int

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ops = MAX_MIN | REDUCTIONS
        return tuple(ops[n](x, y, self.dim) for n in self.names)


@st.composite
def nan_inf_cases(draw: st.DrawFn) -> EdgeCase:
    """1 to 3 max/min ops or reductions on float tensors holding NaN and/or +-Inf."""
    names = draw(st.lists(st.sampled_from([*MAX_MIN, *REDUCTIONS]), min_size=1, max_size=3))
    dtype = draw(st.sampled_from(FLOATS))
    shape = (draw(st.integers(1, 3)), draw(st.sampled_from([1, 2, 3, 5, 8, 17])))
    dim = draw(st.sampled_from([-1, 0]))
    seed = draw(st.integers(0, 2**16))
    x_specials = _specials(draw, math.prod(shape), SPECIAL, min_size=1)
    y_specials = _specials(draw, math.prod(shape), SPECIAL)
    x = _place(_uniform(shape, dtype, seed, 4.0), x_specials)
    y = _place(_uniform(shape, dtype, seed + 1, 4.0), y_specials)
    label = f"{', '.join(names)} (dim={dim}) on {_name(dtype)}{list(shape)} seed={seed} "
    label += f"x_specials={x_specials} y_specials={y_specials}"
    exact = tuple(n in MAX_MIN for n in names)
    return EdgeCase(label, Several(tuple(names), dim), (x, y), exact=exact)


# (b) casts -------------------------------------------------------------------------

CAST_VALUES: dict[torch.dtype, tuple[float, ...]] = {
    torch.float32: (
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -2.5,
        0.49999997,
        3.7,
        -3.7,
        100.25,
        -100.75,
        255.5,
        65504.0,
        65520.0,
        -70000.0,
        16777217.0,
        3.0e9,
        -1.0e15,
    ),
    torch.float16: (
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -2.5,
        3.7,
        -3.7,
        100.25,
        -100.75,
        255.5,
        2049.0,
        -8190.0,
        32752.0,
    ),
    torch.bfloat16: (
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -2.5,
        3.7,
        -3.7,
        100.25,
        -100.75,
        255.5,
        65504.0,
        3.0e9,
        -1.0e15,
    ),
    torch.int64: (
        0,
        1,
        -1,
        7,
        -7,
        255,
        256,
        1000,
        -1000,
        65504,
        65520,
        -65536,
        2**24 + 1,
        -(2**24) - 1,
        2**31 + 5,
        -(2**40) - 3,
        2**53 + 1,
        -(2**53) - 1,
    ),
    torch.bool: (0, 1),
}
"""Values per source dtype: negatives, fractions (truncation, ties), large (overflow of
f16, rounding of f32/bf16, int64 past 2**24 and 2**53). Kept where `-(2 * x)` is exact
and float -> int64 is defined (no NaN/Inf, |x| < 2**62)."""

CAST_PATTERNS: dict[str, Callable[[torch.Tensor, torch.dtype], torch.Tensor]] = {
    "cast": lambda x, to: x.to(to),
    "arith_then_cast": lambda x, to: (-(x * 2)).to(to),
    "cast_then_arith": lambda x, to: -(x.to(to) * 2),
    "round_trip": lambda x, to: x.to(to).to(x.dtype),
    "cast_arith_cast": lambda x, to: (-(x.to(to) * 2)).to(x.dtype),
}
"""Casts alone, after and before arithmetic. The arithmetic (doubling, negation) is exact
in every dtype, so every result must equal eager's bit for bit."""

BACK_TO_SOURCE = ("round_trip", "cast_arith_cast")
"""The patterns that cast back to the source dtype."""


@dataclass(frozen=True)
class Casts:
    """Cast patterns (name, target dtype) applied to the same x: a tuple of results."""

    patterns: tuple[tuple[str, torch.dtype], ...]

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(CAST_PATTERNS[p](x, to) for p, to in self.patterns)


@st.composite
def cast_cases(draw: st.DrawFn) -> EdgeCase:
    """1 to 3 casts from one nn dtype to others, alone or around exact arithmetic."""
    src = draw(st.sampled_from(DTYPES))
    targets = st.sampled_from([d for d in DTYPES if d != src])
    pairs = st.tuples(st.sampled_from(list(CAST_PATTERNS)), targets)
    patterns = tuple(draw(st.lists(pairs, min_size=1, max_size=3)))
    pool = CAST_VALUES[src]
    if not src.is_floating_point and any(
        to == torch.float16 and p in BACK_TO_SOURCE for p, to in patterns
    ):
        pool = tuple(v for v in pool if abs(v) <= 16000)  # int64 -> inf -> int64 is undefined
    if any(to == torch.float16 and p == "cast_arith_cast" for p, to in patterns):
        # doubling a finite f16 past 65504 overflows in eager's f16 product but not in the
        # f32 the policy computes it in, when the product is never written or converted
        # to f16 (docs/numerics.md): only the rounding of the explicit cast is compared
        pool = tuple(v for v in pool if not 32752 < abs(v) < 65520)
    values = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=7))
    x = torch.tensor(values, dtype=torch.float64 if src.is_floating_point else torch.int64)
    label = ", ".join(f"{p} -> {_name(to)}" for p, to in patterns)
    return EdgeCase(
        f"{label} from {_name(src)}", Casts(patterns), (x.to(src),), exact=(True,) * len(patterns)
    )


# (c) zero-size tensors -----------------------------------------------------------------

EMPTY_OPS: dict[str, tuple[Fn, Sequence[tuple[int, ...]]]] = {
    "gelu_add": (lambda x: F.gelu(x) + 1, [(0, 5), (2, 0, 3)]),
    "mul_relu": (lambda x: torch.relu(x * x), [(0, 7), (0,)]),
    "sum_last": (lambda x: x.sum(-1), [(0, 5), (3, 0), (2, 0, 3)]),
    "sum_middle": (lambda x: x.sum(1), [(2, 0, 3), (0, 4, 3)]),
    "sum_all": (lambda x: x.sum(), [(0,), (3, 0)]),
    "mean_last": (lambda x: x.mean(-1), [(0, 5), (3, 0)]),
    "amax_nonempty_axis": (lambda x: x.amax(-1), [(0, 5)]),
    "logsumexp": (lambda x: torch.logsumexp(x, -1), [(0, 5), (3, 0)]),
    "softmax": (lambda x: torch.softmax(x, -1), [(0, 5), (3, 0), (2, 0, 3)]),
    "log_softmax": (lambda x: torch.log_softmax(x, -1), [(0, 5), (3, 0)]),
    "softmax_middle": (lambda x: torch.softmax(x, 1), [(2, 0, 3)]),
    "layer_norm": (lambda x: F.layer_norm(x, (x.shape[-1],)), [(0, 5)]),
    "rms_pattern": (lambda x: _rms_pattern(x, 1.0), [(0, 5), (3, 0)]),
    "var": (lambda x: x.var(-1), [(0, 5), (3, 0)]),
    "sum_then_add": (lambda x: x.sum(-1, keepdim=True) + x.shape[-1], [(3, 0)]),
}
"""Ops on zero-size tensors, each with the shapes where eager defines a result (a sum
over a size-0 axis is 0, a mean NaN, a logsumexp -inf, a softmax an empty tensor)."""


@st.composite
def empty_cases(draw: st.DrawFn) -> EdgeCase:
    """An op of EMPTY_OPS on a tensor with a zero-size axis."""
    name = draw(st.sampled_from(list(EMPTY_OPS)))
    fn, shapes = EMPTY_OPS[name]
    shape = draw(st.sampled_from(list(shapes)))
    dtype = draw(st.sampled_from(FLOATS))
    x = torch.empty(shape, dtype=dtype)
    return EdgeCase(f"{name} {_name(dtype)}{list(shape)}", fn, (x,))


# (d) long elementwise chains -------------------------------------------------------

CHAIN_UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "tanh": torch.tanh,
    "sin": torch.sin,
    "cos": torch.cos,
    "sigmoid": torch.sigmoid,
    "neg": torch.neg,
    "abs": torch.abs,
    "relu": torch.relu,
    "erf": torch.erf,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "affine": lambda x: x * 0.75 + 0.125,
    "softsign": lambda x: x / (1 + x.abs()),
    "exp_neg_abs": lambda x: torch.exp(-x.abs()),
    "sqrt1p": lambda x: torch.sqrt(x * x + 1) - 1,
    "clamp": lambda x: torch.clamp(x, -1.5, 1.5),
    "hardtanh": F.hardtanh,
}
"""Unary ops mapping [-2, 2] into itself with slopes near 1 at most (errors stay tame)."""

CHAIN_BINARY: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mean2": lambda a, b: (a + b) * 0.5,
    "half_product": lambda a, b: a * b * 0.5,
    "half_diff": lambda a, b: (a - b) * 0.5,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "where_half_gap": lambda a, b: torch.where(a > b, a - b, b - a) * 0.5,
}
"""Binary ops mapping [-2, 2]^2 into [-2, 2], all continuous: a rounding difference near
a compare must not flip a result by O(1)."""


@dataclass(frozen=True)
class Chain:
    """A drawn DAG: step i applies `ops[i]` (name, operand indices) to earlier values;
    values 0..2 are the inputs x, y (rows x cols) and a bias (cols) that broadcasts."""

    ops: tuple[tuple[str, tuple[int, ...]], ...]

    def __call__(self, x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor) -> tuple:
        values = [x, y, bias]
        for name, operands in self.ops:
            args = [values[i] for i in operands]
            op = CHAIN_UNARY.get(name) or CHAIN_BINARY[name]
            values.append(op(*args))
        return values[-1], values[len(values) // 2]

    def __repr__(self) -> str:
        return f"Chain[{len(self.ops)} ops: {', '.join(f'{n}{list(a)}' for n, a in self.ops)}]"


def random_chain(length: int, seed: int) -> Chain:
    """`length` ops picked by a generator seeded with `seed`; the first operand of each
    is the latest value (so the DAG is `length` deep), the second a random earlier one."""
    rng = random.Random(seed)
    names = [*CHAIN_UNARY, *CHAIN_BINARY]
    ops: list[tuple[str, tuple[int, ...]]] = []
    for i in range(length):
        latest = i + 2
        name = rng.choice(names)
        operands = (latest,) if name in CHAIN_UNARY else (latest, rng.randint(0, latest))
        ops.append((name, operands))
    return Chain(tuple(ops))


@st.composite
def chain_cases(draw: st.DrawFn, min_ops: int = 360, max_ops: int = 450) -> EdgeCase:
    """A random elementwise DAG of `min_ops`..`max_ops` ops on small tensors.

    The ops come from a seeded generator rather than one draw each: even the simplest
    example (seed 0), which Hypothesis tries first, mixes every op, and a failure shrinks
    to the shortest length and smallest seed that fail.
    """
    length = draw(st.integers(min_ops, max_ops))
    seed = draw(st.integers(0, 2**16))
    chain = random_chain(length, seed)
    dtype = draw(st.sampled_from(FLOATS))
    rows, cols = draw(st.integers(1, 3)), draw(st.sampled_from([1, 3, 8, 13]))
    shapes = [(rows, cols), (rows, cols), (cols,)]
    inputs = tuple(_uniform(s, dtype, seed + i, 2.0) for i, s in enumerate(shapes))
    label = f"{chain!r} (random_chain({length}, seed={seed})) {_name(dtype)}[{rows}, {cols}]"
    return EdgeCase(label, chain, inputs, depth=length)


# (e) slices and concats with odd widths, then reductions ----------------------------------

AFTER_RESHAPE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sum": lambda x: x.sum(-1),
    "amax": lambda x: x.amax(-1),
    "mean": lambda x: x.mean(-1),
    "softmax": lambda x: torch.softmax(x, -1),
    "log_softmax": lambda x: torch.log_softmax(x, -1),
    "rms_pattern": lambda x: _rms_pattern(x, 1.0),
    "llama_rms": lambda x: _llama_rms(x, 1.0),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
}
"""Row reductions applied after the slice or concat (over the last axis)."""

ODD_WIDTHS = (1, 3, 7, 682, 1000)
"""Result widths the fuzzer found tiling bugs at (non-powers of two)."""


@st.composite
def slice_concat_cases(draw: st.DrawFn) -> EdgeCase:
    """A slice (last or middle axis, step 1 or 2) or a concat (last or middle axis) giving
    an odd width, then a row reduction, softmax or normalization over the last axis."""
    kind = draw(st.sampled_from(["slice_last", "slice_middle", "cat_last", "cat_middle"]))
    after = draw(st.sampled_from(list(AFTER_RESHAPE)))
    dtype = draw(st.sampled_from(FLOATS))
    width = draw(st.sampled_from(ODD_WIDTHS))
    rows = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    reduce = AFTER_RESHAPE[after]
    if kind.startswith("slice"):
        step = draw(st.sampled_from([1, 2]))
        lo = draw(st.integers(0, 5))
        full = lo + width * step + draw(st.integers(0, 3))
        if kind == "slice_last":
            x = _uniform((rows, full), dtype, seed, 3.0)

            def fn(x: torch.Tensor) -> torch.Tensor:
                return reduce(x[:, lo : lo + width * step : step])
        else:
            cols = draw(st.sampled_from([3, 7, 16]))
            x = _uniform((rows, full, cols), dtype, seed, 3.0)
            kind += draw(st.sampled_from(["", " transposed"]))
            swap = kind.endswith("transposed")

            def fn(x: torch.Tensor) -> torch.Tensor:
                part = x[:, lo : lo + width * step : step, :]
                return reduce(part.transpose(1, 2) if swap else part)

        label = f"{kind}[{lo}:{lo + width * step}:{step}] of {_name(dtype)}{list(x.shape)}"
        return EdgeCase(f"{label} then {after}, seed={seed}", fn, (x,))
    split = draw(st.integers(1, max(width - 1, 1))) if width > 1 else 1
    if kind == "cat_last":
        shapes = [(rows, split), (rows, max(width - split, 1))]

        def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return reduce(torch.cat([a, b], -1))
    else:
        cols = draw(st.sampled_from([3, 7, 16]))
        shapes = [(rows, split, cols), (rows, max(width - split, 1), cols)]
        kind += draw(st.sampled_from(["", " transposed"]))
        swap = kind.endswith("transposed")

        def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            joined = torch.cat([a, b], 1)
            return reduce(joined.transpose(1, 2) if swap else joined)

    inputs = tuple(_uniform(s, dtype, seed + i, 3.0) for i, s in enumerate(shapes))
    label = f"{kind} {_name(dtype)}{list(shapes[0])} + {list(shapes[1])} then {after}"
    return EdgeCase(f"{label}, seed={seed}", fn, inputs)


# (f) f16/bf16 overflow in decompositions ---------------------------------------------

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softplus": F.softplus,
    "mish": F.mish,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "softmax": lambda x: torch.softmax(x, -1),
    "log_softmax": lambda x: torch.log_softmax(x, -1),
    "elu": F.elu,
    "tanh": torch.tanh,
}
"""Decomposed activations whose textbook forms overflow in f16/bf16 (exp of 60)."""

NORMALIZATIONS: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "layer_norm": _layer_norm,
    "rms_norm": lambda x, w, b: F.rms_norm(x, (x.shape[-1],), w, 1e-6),
    "rms_pattern": lambda x, w, b: _rms_pattern(x, w),
    "llama_rms": lambda x, w, b: _llama_rms(x, w),
}
"""Normalizations; rows are drawn random, constant or a large offset plus small noise."""

MAGNITUDES = {torch.float16: (1.0, 60.0, 300.0, 1.0e4), torch.bfloat16: (1.0, 60.0, 1.0e4, 1.0e15)}
"""Row magnitudes per dtype for the normalizations (f16 tops out at 65504)."""


@st.composite
def overflow_cases(draw: st.DrawFn) -> EdgeCase:
    """An activation on f16/bf16 values up to +-60, or a normalization of rows of large
    magnitude (random, constant, or offset plus noise: variance cancellation)."""
    dtype = draw(st.sampled_from([torch.float16, torch.bfloat16]))
    rows, cols = draw(st.integers(1, 3)), draw(st.sampled_from([1, 2, 5, 8, 33]))
    seed = draw(st.integers(0, 2**16))
    extremes = (60.0, -60.0, 30.0, -30.0, 11.5, -11.5)
    if draw(st.booleans()):
        name = draw(st.sampled_from(list(ACTIVATIONS)))
        bound = draw(st.sampled_from([4.0, 20.0, 60.0]))
        specials = _specials(draw, rows * cols, extremes)
        x = _place(_uniform((rows, cols), dtype, seed, bound), specials)
        act = ACTIVATIONS[name]
        label = f"{name} {_name(dtype)}[{rows}, {cols}] bound={bound} seed={seed}"
        return EdgeCase(f"{label} specials={specials}", act, (x,))
    name = draw(st.sampled_from(list(NORMALIZATIONS)))
    magnitude = draw(st.sampled_from(MAGNITUDES[dtype]))
    row = draw(st.sampled_from(["random", "constant", "offset"]))
    g = torch.Generator().manual_seed(seed)
    noise = torch.rand((rows, cols), generator=g, dtype=torch.float64) * 2 - 1
    if row == "random":
        x64 = noise * magnitude
    elif row == "constant":
        x64 = torch.full((rows, cols), magnitude, dtype=torch.float64)
    else:
        x64 = magnitude + noise * max(magnitude * 1e-2, 1.0)
    x = x64.to(dtype)
    w, b = _uniform((cols,), dtype, seed + 1, 2.0), _uniform((cols,), dtype, seed + 2, 1.0)
    label = f"{name} {_name(dtype)}[{rows}, {cols}] rows={row} magnitude={magnitude} seed={seed}"
    return EdgeCase(label, NORMALIZATIONS[name], (x, w, b))
