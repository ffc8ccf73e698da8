"""The Triton language as a table: how each elementwise op on tiles is spelled.

Tile kernels reuse the nn ops for elementwise math (`nn.add`, `nn.exp`, `nn.cast`,
...). A backend prints them from one table of expression templates over operand names;
the CUDA printer keeps a table of the same shape (`{0}`, `{1}` are operands). Rules:

- 16-bit floats compute in f32 and round once per op (`upcast`), as PyTorch eager and
  the reference interpreter do; f32 and integers compute in their own type. Exact ops
  (neg, abs, max, min, relu, compare) upcast too: free on the GPU, and Triton's CPU
  interpreter keeps bf16 as raw uint16 bits, so it would negate and order them wrongly;
- max and min propagate NaN, as nn documents and eager does: `tl.maximum`/`tl.minimum`
  with `propagate_nan=tl.PropagateNan.ALL`, in elementwise ops and in the reduction
  combine helpers alike (the default returns the other operand on the GPU and in the
  interpreter; integer operands ignore the flag);
- f32 math is no less accurate than PyTorch eager's (issue 14; `GPU_ACCURACY` says how
  each op computes): exp, tanh, pow, sigmoid and silu are helper `@triton.jit`
  functions (`HELPERS`) that call libdevice (CUDA's libm, the functions eager's kernels
  call) on the GPU and core ops under `INTERPRETED`, since Triton's CPU interpreter has
  no libdevice (there exp is numpy's, tanh and pow a few ulps): one source runs in
  both. `tl.exp` itself is `ex2.approx(x * log2(e))` on the GPU, whose rounded product
  costs up to ~60 ulps at |x| near 88. Reciprocal is `tl.div_rn` (`div.rn.f32`);
  division, in sigmoid and silu too, is `/`, `div.full.f32`, up to 2 ulps: div_rn's
  slow-path call made row kernels spill (H100: rmsnorm_silu_gate long 98 -> 243 us);
- Triton links libdevice flush-to-zero (`nvvm-reflect-ftz`): its functions flush
  subnormal arguments (expf still returns subnormal results: it scales by a plain
  multiply). tanh returns a tiny x itself; pow's subnormal bases and results stay
  flushed (`GPU_ACCURACY`);
- nothing from `triton.language.standard` (`tl.sum`, `tl.max`, `tl.sigmoid`, ...):
  those are `@jit` functions, which the interpreter cannot call unless Triton itself
  was imported with TRITON_INTERPRET=1. Reductions are `tl.reduce` with the combine
  helpers below (the same IR as `tl.sum`/`tl.max` on the GPU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue

from fuseopt.dialects import nn
from fuseopt.dialects.dtypes import UnsupportedTypeError, element_info


@dataclass(frozen=True)
class Rule:
    """How one op prints: an expression template over its operands `{0}`, `{1}`, ...

    `upcast`: 16-bit float operands are widened to f32 and the result rounded back.
    `helpers`: helper functions (keys of HELPERS) the template calls.
    """

    template: str
    upcast: bool = True
    helpers: tuple[str, ...] = ()


TRITON_OPS: dict[type[Operation], Rule] = {
    nn.NegOp: Rule("-{0}"),
    nn.AbsOp: Rule("tl.abs({0})"),
    nn.ExpOp: Rule("fuseopt_exp({0})", helpers=("fuseopt_exp",)),
    nn.LogOp: Rule("tl.log({0})"),
    nn.Log1pOp: Rule("fuseopt_log1p({0})", helpers=("fuseopt_log1p",)),
    nn.Exp2Op: Rule("fuseopt_exp2({0})", helpers=("fuseopt_exp2",)),
    nn.SqrtOp: Rule("tl.sqrt_rn({0})"),
    nn.RsqrtOp: Rule("tl.rsqrt({0})"),
    nn.ReciprocalOp: Rule("tl.div_rn(1.0, {0})"),
    nn.TanhOp: Rule("fuseopt_tanh({0})", helpers=("fuseopt_tanh",)),
    nn.SigmoidOp: Rule("fuseopt_sigmoid({0})", helpers=("fuseopt_sigmoid",)),
    nn.ReluOp: Rule("tl.where({0} < 0, 0, {0})"),
    nn.SiluOp: Rule("fuseopt_silu({0})", helpers=("fuseopt_silu",)),
    nn.ErfOp: Rule("tl.erf({0})"),
    nn.SinOp: Rule("tl.sin({0})"),
    nn.CosOp: Rule("tl.cos({0})"),
    nn.FloorOp: Rule("tl.floor({0})"),
    nn.CeilOp: Rule("tl.ceil({0})"),
    nn.TruncOp: Rule("fuseopt_trunc({0})", helpers=("fuseopt_trunc",)),
    nn.AddOp: Rule("{0} + {1}"),
    nn.SubOp: Rule("{0} - {1}"),
    nn.MulOp: Rule("{0} * {1}"),
    nn.DivOp: Rule("{0} / {1}"),
    nn.MaxOp: Rule("tl.maximum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)"),
    nn.MinOp: Rule("tl.minimum({0}, {1}, propagate_nan=tl.PropagateNan.ALL)"),
    nn.PowOp: Rule("fuseopt_pow({0}, {1})", helpers=("fuseopt_pow",)),
    nn.FloorDivOp: Rule(
        "fuseopt_floor_div({0}, {1})", helpers=("fuseopt_floor_div", "fuseopt_fmod")
    ),
    nn.TruncDivOp: Rule("fuseopt_trunc(tl.div_rn({0}, {1}))", helpers=("fuseopt_trunc",)),
    nn.RemainderOp: Rule(
        "fuseopt_remainder({0}, {1})", helpers=("fuseopt_remainder", "fuseopt_fmod")
    ),
    nn.FmodOp: Rule("fuseopt_fmod({0}, {1})", helpers=("fuseopt_fmod",)),
    nn.SelectOp: Rule("tl.where({0}, {1}, {2})", upcast=False),
}
"""Elementwise nn ops on tiles, by op class (cast, compare, gelu, constant: below)."""

INTEGER_OPS: dict[type[Operation], Rule] = {
    nn.DivOp: Rule("{0} // {1}", upcast=False),
    nn.ReluOp: Rule("tl.where({0} < 0, 0, {0})", upcast=False),
    nn.TruncDivOp: Rule("{0} // {1}", upcast=False),
    nn.FmodOp: Rule("{0} % {1}", upcast=False),
    nn.FloorDivOp: Rule(
        "fuseopt_floor_div_int({0}, {1})", upcast=False, helpers=("fuseopt_floor_div_int",)
    ),
    nn.RemainderOp: Rule(
        "fuseopt_remainder_int({0}, {1})", upcast=False, helpers=("fuseopt_remainder_int",)
    ),
}
"""Overrides for integer element types (Triton's `//` and `%` on integers are C's:
truncating, the remainder with the dividend's sign)."""

COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
"""nn.compare predicates as Python operators."""

GELU = {
    "none": "0.5 * {0} * (1.0 + tl.erf({0} * 0.7071067811865476))",
    "tanh": (
        "0.5 * {0} * (1.0 + fuseopt_tanh(0.7978845608028654 * ({0} + 0.044715 * {0} * {0} * {0})))"
    ),
}
"""nn.gelu by approximation."""

POW_BY_EXPONENT = {
    1.0: "{0}",
    2.0: "{0} * {0}",
    3.0: "{0} * {0} * {0}",
    0.5: "tl.sqrt_rn({0})",
    -0.5: "tl.rsqrt({0})",
    -1.0: "tl.div_rn(1.0, {0})",
}
"""nn.pow with a splat-constant exponent, spelled without the general helper."""

REDUCE_COMBINE = {"sum": "fuseopt_add", "max": "fuseopt_max", "min": "fuseopt_min"}
"""tile.reduce kinds: the combine helper `tl.reduce` applies."""

HELPERS: dict[str, str] = {
    "fuseopt_bf16": """@triton.jit
def fuseopt_bf16(x):
    # f32 to bf16, rounding to nearest even. The CPU interpreter truncates `.to`, so
    # there it rounds by hand; a NaN is kept apart (the bias could carry its payload out)
    if INTERPRETED:
        bits = x.to(tl.uint32, bitcast=True)
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
        bits = tl.where(x != x, 0x7FC0, bits >> 16)
        return bits.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(tl.bfloat16)
""",
    "fuseopt_widen_bf16": """@triton.jit
def fuseopt_widen_bf16(x):
    # bf16 to f32 (exact). The CPU interpreter flushes bf16 subnormals to zero, so there
    # the bits are moved by hand
    if INTERPRETED:
        bits = x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16
        return bits.to(tl.float32, bitcast=True)
    else:
        return x.to(tl.float32)
""",
    "fuseopt_dot": """@triton.jit
def fuseopt_dot(a, b, acc):
    # 16-bit operands: tensor cores with f32 accumulation. Triton's CPU interpreter
    # multiplies 16-bit floats wrongly; there they are widened first (exact in f32).
    if INTERPRETED:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)
""",
    "fuseopt_add": """@triton.jit
def fuseopt_add(a, b):
    return a + b
""",
    "fuseopt_max": """@triton.jit
def fuseopt_max(a, b):
    # NaN wins, as in torch.amax (integers ignore `propagate_nan`)
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
""",
    "fuseopt_min": """@triton.jit
def fuseopt_min(a, b):
    # NaN wins, as in torch.amin (integers ignore `propagate_nan`)
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
""",
    "fuseopt_exp": """@triton.jit
def fuseopt_exp(x):
    # GPU: libdevice's expf, eager's own (tl.exp is ex2.approx(x * log2(e)): its rounded
    # product is ~60 ulps off at |x| near 88). The CPU interpreter has no libdevice:
    # numpy's exp there
    if INTERPRETED:
        return tl.exp(x)
    else:
        return fuseopt_libdevice.exp(x)
""",
    "fuseopt_exp2": """@triton.jit
def fuseopt_exp2(x):
    # GPU: libdevice's exp2f, eager's own (2 ulps: one ex2.approx, the subnormal range
    # scaled unless Triton links libdevice flushing to zero, as recent releases do by
    # default). The CPU interpreter has no libdevice: numpy's exp2 there
    if INTERPRETED:
        return tl.exp2(x)
    else:
        return fuseopt_libdevice.exp2(x)
""",
    "fuseopt_log1p": """@triton.jit
def fuseopt_log1p(x):
    # GPU: libdevice's log1pf, eager's own. The CPU interpreter has no libdevice: there
    # log(w) * (x / (w - 1)) with w = 1 + x rounded, which corrects w's rounding, and x
    # itself where w rounds to 1 (Goldberg's theorem 4); +inf stays +inf
    if INTERPRETED:
        w = 1.0 + x
        exact = (w == 1.0) | (w == float("inf"))
        return tl.where(exact, x, tl.log(w) * (x / tl.where(exact, 1.0, w - 1.0)))
    else:
        return fuseopt_libdevice.log1p(x)
""",
    "fuseopt_trunc": """@triton.jit
def fuseopt_trunc(x):
    # toward zero: -0.5 gives -0.0 (ceil's), NaN stays NaN
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))
""",
    "fuseopt_fmod": """@triton.jit
def fuseopt_fmod(a, b):
    # GPU: libdevice's fmodf, exact (`%` on floats lowers to a - trunc(a / b) * b, which
    # rounds). The CPU interpreter has no libdevice: `%` there is NumPy's fmod
    if INTERPRETED:
        return a % b
    else:
        return fuseopt_libdevice.fmod(a, b)
""",
    "fuseopt_floor_div": """@triton.jit
def fuseopt_floor_div(a, b):
    # PyTorch's div_floor_floating: the quotient of a less its remainder, 1 less where
    # the remainder's sign differs from b's, rounded to the nearest integer; a zero
    # quotient keeps the sign of a / b, and b = 0 gives a / b
    mod = fuseopt_fmod(a, b)
    div = tl.div_rn(a - mod, b)
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    floor = tl.floor(div)
    floor = tl.where(div - floor > 0.5, floor + 1.0, floor)
    quotient = tl.div_rn(a, b)
    out = tl.where(div != 0, floor, quotient * 0.0)
    return tl.where(b == 0, quotient, out)
""",
    "fuseopt_remainder": """@triton.jit
def fuseopt_remainder(a, b):
    # Python's %: fmod, plus b where the remainder's sign differs from b's
    r = fuseopt_fmod(a, b)
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
""",
    "fuseopt_floor_div_int": """@triton.jit
def fuseopt_floor_div_int(a, b):
    # `//` truncates: one less where the remainder's sign differs from b's
    q = a // b
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), q - 1, q)
""",
    "fuseopt_remainder_int": """@triton.jit
def fuseopt_remainder_int(a, b):
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
""",
    "fuseopt_sigmoid": """@triton.jit
def fuseopt_sigmoid(x):
    # 1 / (1 + exp(-x)), eager's formula; on the GPU with libdevice's expf and
    # div.full.f32 (2 ulps; div_rn's slow-path call made kernels spill: 2.3x slower)
    if INTERPRETED:
        return 1.0 / (1.0 + tl.exp(-x))
    else:
        return 1.0 / (1.0 + fuseopt_libdevice.exp(-x))
""",
    "fuseopt_silu": """@triton.jit
def fuseopt_silu(x):
    # x / (1 + exp(-x)), eager's formula; on the GPU with libdevice's expf and
    # div.full.f32 (2 ulps; div_rn's slow-path call made kernels spill: 2.3x slower)
    if INTERPRETED:
        return x / (1.0 + tl.exp(-x))
    else:
        return x / (1.0 + fuseopt_libdevice.exp(-x))
""",
    "fuseopt_tanh": """@triton.jit
def fuseopt_tanh(x):
    # GPU: libdevice's tanhf, eager's own, except for |x| < 2**-12, where tanh(x) rounds
    # to x and libdevice (linked flush-to-zero) would flush a subnormal x. The CPU
    # interpreter has no libdevice: tanh from exp, a series near 0
    if INTERPRETED:
        magnitude = tl.abs(x)
        e = tl.exp(-2.0 * magnitude)
        far = (1.0 - e) / (1.0 + e)
        x2 = x * x
        series = 0.13333333333333333 + x2 * -0.05396825396825397
        near = magnitude * (1.0 + x2 * (-0.3333333333333333 + x2 * series))
        t = tl.where(magnitude < 0.1, near, far)
        return tl.where(x < 0, -t, t)
    else:
        return tl.where(tl.abs(x) < 0.000244140625, x, fuseopt_libdevice.tanh(x))
""",
    "fuseopt_pow": """@triton.jit
def fuseopt_pow(a, b):
    # GPU: libdevice's powf, eager's own (its special cases are C's: 1 ** nan is 1).
    # The CPU interpreter has no libdevice: exp2/log2 with the signs of torch.pow (odd
    # integer powers of a negative base are negative, its non-integer powers NaN, x ** 0
    # is 1)
    if INTERPRETED:
        magnitude = tl.exp2(b * tl.log2(tl.abs(a)))
        is_integer = tl.floor(b) == b
        is_odd = is_integer & (tl.floor(b * 0.5) * 2.0 != b)
        signed = tl.where((a < 0) & is_odd, -magnitude, magnitude)
        signed = tl.where((a < 0) & (tl.floor(b) != b), float("nan"), signed)
        return tl.where(b == 0, 1.0, signed)
    else:
        return fuseopt_libdevice.pow(a, b)
""",
}
"""Helper jit functions, emitted once per module when a template uses them."""

Accuracy = Literal["ieee", "libm", "measured", "approx"]
"""How an op's f32 result is computed on the GPU, next to PyTorch eager's (issue 14):
"ieee": exact, or IEEE round-to-nearest operations; "libm": the CUDA libm function
eager's kernel calls (libdevice), or eager's formula over such calls and IEEE operations;
"measured": a hardware approximation Triton picks, measured no less accurate than
eager's on an H200 (issue 14's table); "approx": a hardware approximation with a
documented bound, within twice eager's error plus one ulp (tests/test_numerics_gpu.py)."""

GPU_ACCURACY: dict[type[Operation], tuple[Accuracy, str]] = {
    nn.NegOp: ("ieee", "exact"),
    nn.AbsOp: ("ieee", "exact"),
    nn.ReluOp: ("ieee", "exact"),
    nn.MaxOp: ("ieee", "exact"),
    nn.MinOp: ("ieee", "exact"),
    nn.SelectOp: ("ieee", "exact"),
    nn.AddOp: ("ieee", "one rounding (Triton may contract a * b + c into an fma: closer)"),
    nn.SubOp: ("ieee", "one rounding (as add)"),
    nn.MulOp: ("ieee", "one rounding (as add)"),
    nn.DivOp: ("approx", "`/`: div.full.f32, up to 2 ulps (div_rn's slow-path call spilled)"),
    nn.ReciprocalOp: ("ieee", "tl.div_rn(1.0, x)"),
    nn.SqrtOp: ("ieee", "tl.sqrt_rn"),
    nn.ExpOp: ("libm", "libdevice.exp"),
    nn.TanhOp: ("libm", "libdevice.tanh; x itself where |x| < 2**-12"),
    nn.PowOp: (
        "libm",
        "libdevice.pow (exponents 1, 2, 3, 0.5, -0.5, -1: products, sqrt_rn, rsqrt, "
        "div_rn); a subnormal base or result flushes to zero",
    ),
    nn.SigmoidOp: ("libm", "1 / (1 + exp(-x)), eager's formula, div.full.f32 (2 ulps)"),
    nn.SiluOp: ("libm", "x / (1 + exp(-x)), eager's formula, div.full.f32 (2 ulps)"),
    nn.GeluOp: ("libm", "eager's formulas over tl.erf or fuseopt_tanh"),
    nn.ErfOp: ("libm", "tl.erf, which Triton lowers to libdevice's erff"),
    nn.LogOp: ("libm", "tl.log, which Triton lowers to libdevice's logf"),
    nn.Log1pOp: ("libm", "libdevice.log1p"),
    nn.Exp2Op: ("libm", "libdevice.exp2"),
    nn.SinOp: ("libm", "tl.sin, which Triton lowers to libdevice's sinf"),
    nn.CosOp: ("libm", "tl.cos, which Triton lowers to libdevice's cosf"),
    nn.FloorOp: ("ieee", "exact"),
    nn.CeilOp: ("ieee", "exact"),
    nn.TruncOp: ("ieee", "exact"),
    nn.FmodOp: ("ieee", "exact: libdevice.fmod"),
    nn.RemainderOp: ("ieee", "eager's formula over libdevice.fmod: one rounding"),
    nn.TruncDivOp: ("ieee", "trunc(tl.div_rn(a, b)), eager's"),
    nn.FloorDivOp: ("ieee", "eager's div_floor_floating over libdevice.fmod and tl.div_rn"),
    nn.RsqrtOp: ("measured", "tl.rsqrt: rsqrt.approx.ftz.f32 (a subnormal x gives inf)"),
}
"""Every float elementwise op the tables above print, by how accurate its f32 GPU result
is (tests/test_backend_approximations.py keeps it complete; tests/test_numerics_gpu.py
measures it against eager)."""


def triton_dtype(t: Attribute) -> str:
    """The `tl` dtype of an element type (`dialects/dtypes.py`)."""
    try:
        return element_info(t).triton
    except UnsupportedTypeError:
        raise ValueError(f"no Triton dtype for {t}") from None


def torch_dtype(t: Attribute) -> str:
    """The `torch` dtype of an element type (as source text)."""
    return str(element_info(t).torch)


def convert(expr: str, src: Attribute, dst: Attribute) -> tuple[str, tuple[str, ...]]:
    """`expr` (of element type `src`) converted to `dst`, and the helpers it calls.

    Conversions with bf16 on either side go through f32 and a helper, because Triton's
    CPU interpreter gets them wrong where the GPU is right (the helpers are plain `.to`
    there):
    - to bf16, `fuseopt_bf16` from f32: the interpreter truncates `.to(tl.bfloat16)`
      and reinterprets the bytes of any other source (i64 and i1 give NaN or
      denormals, or fail), so other sources are widened to f32 first (exact for f16 and
      i1; for i64 the same rounding to f32 that PyTorch's casts do);
    - from bf16, `fuseopt_widen_bf16` to f32 (the interpreter flushes subnormals to
      zero), then on to the target type.
    """
    if src == dst:
        return expr, ()
    if isinstance(src, BFloat16Type):
        wide = f"fuseopt_widen_bf16({expr})"
        if isinstance(dst, Float32Type):
            return wide, ("fuseopt_widen_bf16",)
        return f"{wide}.to({triton_dtype(dst)})", ("fuseopt_widen_bf16",)
    if isinstance(dst, BFloat16Type):
        wide = expr if isinstance(src, Float32Type) else f"{expr}.to(tl.float32)"
        return f"fuseopt_bf16({wide})", ("fuseopt_bf16",)
    return f"{expr}.to({triton_dtype(dst)})", ()


def rounded_trunc_div(a: str, b: str, t: Attribute) -> tuple[str, tuple[str, ...]]:
    """nn.trunc_div of f32 operands `a`, `b` whose element type `t` is a 16-bit float,
    and the helpers it calls: the quotient rounded to `t` before it is truncated, as
    eager's 16-bit kernels round it (in f32)."""
    quotient, to_t = convert(f"tl.div_rn({a}, {b})", Float32Type(), t)
    quotient, back = convert(quotient, t, Float32Type())
    return f"fuseopt_trunc({quotient})", (*to_t, *back, "fuseopt_trunc")


def is_float_type(t: Attribute) -> bool:
    """Is `t` a floating-point element type?"""
    return isinstance(t, Float16Type | BFloat16Type | Float32Type | Float64Type)


def element_bits(t: Attribute) -> int:
    """The storage width of an element type in bits (i1 is stored as a byte)."""
    return 8 * element_info(t).bytes


def is_16bit_float(t: Attribute) -> bool:
    """Is `t` f16 or bf16 (computed in f32 by upcasting rules)?"""
    return isinstance(t, Float16Type | BFloat16Type)


def literal(value: float | int | bool, element: Attribute) -> str:
    """A Python literal for a scalar of `element` type (inf and NaN included; i1 as
    True/False, so that `tl.where(c, flag, False)` stays a boolean: with 0 it would be
    int32, and a later `tl.where` on it a non-boolean condition, which Triton deprecates)."""
    if isinstance(element, IntegerType):
        if element.width.data == 1:
            return "True" if value else "False"
        return str(int(value))
    v = float(value)
    if math.isnan(v):
        return 'float("nan")'
    if math.isinf(v):
        return 'float("inf")' if v > 0 else 'float("-inf")'
    return repr(v)


def element_type(v: SSAValue) -> Attribute:
    """The element type of a tile (tensor) value."""
    t = v.type
    assert isinstance(t, TensorType)
    return t.element_type


def splat_operand(v: SSAValue) -> float | int | None:
    """The splat value of `v` when an nn.constant defines it."""
    op = v.owner
    if isinstance(op, nn.ConstantOp):
        return op.splat_value
    return None
