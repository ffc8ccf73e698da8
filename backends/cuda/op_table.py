"""CUDA C++ for the elementwise nn ops on tiles: one table, one entry per op.

An entry is a format string over the operands' *compute values* (`float` for f32,
f16 and bf16; `long long` for i64; `bool` for i1): the printer converts operands with
`fo_f`/`fo_i`, formats the expression, and rounds the result to the tile's element
type once per op, which is the nn reference's rounding rule. A language is mostly
this table: the Triton printer has the same shape.
"""

from __future__ import annotations

from typing import Literal

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IntegerType,
)
from xdsl.ir import Attribute

from fuseopt.dialects import nn
from fuseopt.dialects.dtypes import (  # noqa: F401 - element_bytes: the table's, for the printer
    UnsupportedTypeError,
    element_bytes,
    element_info,
)

FLOAT_UNARY: dict[type[nn.UnaryElementwiseOp], str] = {
    nn.NegOp: "(-{0})",
    nn.AbsOp: "fabsf({0})",
    nn.ExpOp: "expf({0})",
    nn.LogOp: "logf({0})",
    nn.Log1pOp: "log1pf({0})",
    nn.Exp2Op: "exp2f({0})",
    nn.SqrtOp: "sqrtf({0})",
    nn.RsqrtOp: "(1.0f / sqrtf({0}))",
    nn.ReciprocalOp: "(1.0f / {0})",
    nn.TanhOp: "tanhf({0})",
    nn.SigmoidOp: "fo_sigmoid({0})",
    nn.ReluOp: "fo_relu({0})",
    nn.SiluOp: "fo_silu({0})",
    nn.ErfOp: "erff({0})",
    nn.SinOp: "sinf({0})",
    nn.CosOp: "cosf({0})",
    nn.FloorOp: "floorf({0})",
    nn.CeilOp: "ceilf({0})",
    nn.TruncOp: "truncf({0})",
}
"""Unary ops on float compute values (gelu depends on its attribute: see `unary`).

exp, sigmoid and silu are CUDA's libm and IEEE division, as eager's kernels compute them
(issue 14: no op less accurate than eager's; `ACCURACY`). The hardware approximations
cost f32 accuracy where it shows: `__expf` is ex2.approx(x * log2(e)), whose rounded
product is ~60 ulps off at |x| near 88, and `__fdividef` returns 0 for divisors above
2**126. They were faster (H100, one run, IEEE -> approximations: rmsnorm_silu_gate long
159.7 -> 125.4 us, softmax 4096x8192 59.1 -> 55.4). rsqrt stays `1 / sqrtf`: it runs once a row, and
`rsqrtf` let nvcc schedule the RMSNorm+RoPE kernel into 119 registers instead of 96
(71.6 -> 78.7 us)."""

INT_UNARY: dict[type[nn.UnaryElementwiseOp], str] = {
    nn.NegOp: "(-{0})",
    nn.AbsOp: "llabs({0})",
    nn.ReluOp: "fo_max({0}, 0LL)",
}
"""Unary ops computed on `long long` for i64 tiles (others go through float)."""

FLOAT_BINARY: dict[type[nn.BinaryElementwiseOp], str] = {
    nn.AddOp: "({0} + {1})",
    nn.SubOp: "({0} - {1})",
    nn.MulOp: "({0} * {1})",
    nn.DivOp: "({0} / {1})",
    nn.MaxOp: "fo_max({0}, {1})",
    nn.MinOp: "fo_min({0}, {1})",
    nn.PowOp: "powf({0}, {1})",
    nn.FloorDivOp: "fo_floor_div({0}, {1})",
    nn.TruncDivOp: "truncf({0} / {1})",
    nn.RemainderOp: "fo_remainder({0}, {1})",
    nn.FmodOp: "fmodf({0}, {1})",
}
"""Binary ops on float compute values."""

Accuracy = Literal["ieee", "libm"]
"""How an op's f32 result is computed, next to PyTorch eager's (issue 14): "ieee":
exact, or IEEE round-to-nearest operations (nvcc's defaults: -prec-div, -prec-sqrt, no
-ftz); "libm": the CUDA libm function eager's kernel calls, or eager's formula over such
calls and IEEE operations."""

ACCURACY: dict[type[nn.UnaryElementwiseOp | nn.BinaryElementwiseOp], tuple[Accuracy, str]] = {
    nn.NegOp: ("ieee", "exact"),
    nn.AbsOp: ("ieee", "exact"),
    nn.ReluOp: ("ieee", "exact"),
    nn.MaxOp: ("ieee", "exact"),
    nn.MinOp: ("ieee", "exact"),
    nn.AddOp: ("ieee", "one rounding (nvcc may contract a * b + c into an fma: closer)"),
    nn.SubOp: ("ieee", "one rounding (as add)"),
    nn.MulOp: ("ieee", "one rounding (as add)"),
    nn.DivOp: ("ieee", "one rounding"),
    nn.ReciprocalOp: ("ieee", "one rounding"),
    nn.SqrtOp: ("ieee", "one rounding"),
    nn.RsqrtOp: ("ieee", "1 / sqrtf: two roundings, within 1 ulp"),
    nn.ExpOp: ("libm", "expf"),
    nn.LogOp: ("libm", "logf"),
    nn.Log1pOp: ("libm", "log1pf"),
    nn.Exp2Op: ("libm", "exp2f"),
    nn.TanhOp: ("libm", "tanhf"),
    nn.ErfOp: ("libm", "erff"),
    nn.SinOp: ("libm", "sinf"),
    nn.CosOp: ("libm", "cosf"),
    nn.FloorOp: ("ieee", "exact"),
    nn.CeilOp: ("ieee", "exact"),
    nn.TruncOp: ("ieee", "exact"),
    nn.FmodOp: ("ieee", "fmodf: exact"),
    nn.RemainderOp: ("ieee", "eager's formula over fmodf: one rounding"),
    nn.TruncDivOp: ("ieee", "truncf(a / b), eager's"),
    nn.FloorDivOp: ("ieee", "eager's div_floor_floating over fmodf and IEEE division"),
    nn.PowOp: ("libm", "powf (exponents 1, 2, 3, -1: products, exact cube, division)"),
    nn.SigmoidOp: ("libm", "1 / (1 + expf(-x)) with __fdividef (2 ulps); exp(x) below -80"),
    nn.SiluOp: ("libm", "x / (1 + expf(-x)) with __fdividef (2 ulps); x * exp(x) below -80"),
    nn.GeluOp: ("libm", "eager's formulas over erff or tanhf"),
}
"""Every float op the tables above print, by how accurate its f32 result is
(tests/test_backend_approximations.py keeps it complete; tests/test_numerics_gpu.py
measures it against eager)."""

INT_BINARY: dict[type[nn.BinaryElementwiseOp], str] = {
    nn.AddOp: "({0} + {1})",
    nn.SubOp: "({0} - {1})",
    nn.MulOp: "({0} * {1})",
    nn.MaxOp: "fo_max({0}, {1})",
    nn.MinOp: "fo_min({0}, {1})",
    nn.FloorDivOp: "fo_floordiv({0}, {1})",
    nn.TruncDivOp: "({0} / {1})",
    nn.RemainderOp: "fo_remainder({0}, {1})",
    nn.FmodOp: "({0} % {1})",
}
"""Binary ops computed on `long long` for i64 tiles (div and pow go through float)."""

COMPARE: dict[str, str] = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
"""nn.compare predicates as C operators."""


def c_type(t: Attribute) -> str:
    """The C++ storage type of an element type (`dialects/dtypes.py`: every width)."""
    try:
        return element_info(t).c_type
    except UnsupportedTypeError:
        raise ValueError(f"no CUDA type for element type {t}") from None


def compute_kind(t: Attribute) -> str:
    """How values of element type `t` are computed: "float", "int" or "bool"."""
    if isinstance(t, Float32Type | Float16Type | BFloat16Type):
        return "float"
    if isinstance(t, IntegerType) and t.width.data == 1:
        return "bool"
    return "int"


def to_compute(expr: str, t: Attribute, kind: str) -> str:
    """`expr` (stored as element type `t`) as a compute value of `kind`."""
    if kind == "float":
        return expr if isinstance(t, Float32Type) else f"fo_f({expr})"
    if kind == "int":
        return f"fo_i({expr})" if compute_kind(t) != "int" else expr
    return expr if compute_kind(t) == "bool" else f"fo_to<bool>::of({expr})"


def from_compute(expr: str, t: Attribute) -> str:
    """A compute value rounded to element type `t` (once)."""
    if isinstance(t, Float32Type) or compute_kind(t) == "bool":
        return expr
    return f"fo_to<{c_type(t)}>::of({expr})"


def unary(op: nn.UnaryElementwiseOp, x: str, t: Attribute) -> str:
    """C++ for unary `op` on stored element `x` of type `t`, rounded back to `t`."""
    if compute_kind(t) == "int" and type(op) in INT_UNARY:
        return INT_UNARY[type(op)].format(x)
    if isinstance(op, nn.GeluOp):
        fn = "fo_gelu_tanh" if op.approximation == "tanh" else "fo_gelu"
        expr = f"{fn}({to_compute(x, t, 'float')})"
    else:
        expr = FLOAT_UNARY[type(op)].format(to_compute(x, t, "float"))
    return from_compute(expr, t)


POW_BY_CONSTANT: dict[float, str] = {
    1.0: "{0}",
    2.0: "({0} * {0})",
    3.0: "(float)((double){0} * {0} * {0})",
    -1.0: "(1.0f / {0})",
}
"""`x ** c` for constant exponents where it is exact (powf costs ~100 instructions)."""


def pow_by_constant(a: str, exponent: float, t: Attribute) -> str | None:
    """C++ for `a ** exponent` (a stored element of float type `t`), or None."""
    form = POW_BY_CONSTANT.get(float(exponent))
    if form is None or compute_kind(t) != "float":
        return None
    return from_compute(form.format(to_compute(a, t, "float")), t)


def binary(op: nn.BinaryElementwiseOp, a: str, b: str, t: Attribute) -> str:
    """C++ for binary `op` on stored elements `a`, `b` of type `t`, rounded back to `t`."""
    if compute_kind(t) == "int" and type(op) in INT_BINARY:
        return INT_BINARY[type(op)].format(a, b)
    if isinstance(op, nn.TruncDivOp) and not isinstance(t, Float32Type):
        # eager's 16-bit kernels round the quotient to 16 bits before truncating it
        fa, fb = to_compute(a, t, "float"), to_compute(b, t, "float")
        quotient = to_compute(from_compute(f"({fa} / {fb})", t), t, "float")
        return from_compute(f"truncf({quotient})", t)
    expr = FLOAT_BINARY[type(op)].format(to_compute(a, t, "float"), to_compute(b, t, "float"))
    return from_compute(expr, t)


def compare(predicate: str, a: str, b: str, t: Attribute) -> str:
    """C++ bool for `a <predicate> b` on stored elements of type `t`."""
    kind = compute_kind(t)
    kind = "int" if kind == "bool" else kind
    return f"({to_compute(a, t, kind)} {COMPARE[predicate]} {to_compute(b, t, kind)})"


def cast(x: str, src: Attribute, dst: Attribute) -> str:
    """C++ converting stored element `x` from type `src` to type `dst`."""
    if c_type(src) == c_type(dst):
        return x
    if isinstance(src, Float32Type | IntegerType):
        return f"fo_to<{c_type(dst)}>::of({x})"
    return f"fo_to<{c_type(dst)}>::of({x})"


INT64_MIN = -(2**63)


def int_literal(value: int) -> str:
    """A C++ `long long` literal of `value`. INT64_MIN has none (`9223372036854775808LL`
    does not fit before the minus applies), so it is spelled as an expression."""
    if value == INT64_MIN:
        return "(-9223372036854775807LL - 1)"
    return f"{value}LL"


def literal(value: float | int, t: Attribute) -> str:
    """A C++ literal of stored element type `t` (inf and NaN included)."""
    kind = compute_kind(t)
    if kind == "bool":
        return "true" if value else "false"
    if kind == "int":
        return int_literal(int(value))
    v = float(value)
    if v != v:
        f = "__int_as_float(0x7fc00000)"
    elif v in (float("inf"), float("-inf")):
        f = "__int_as_float(0x7f800000)" if v > 0 else "__int_as_float(0xff800000)"
    else:
        f = f"{v!r}f"
    return from_compute(f, t)
