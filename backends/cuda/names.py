"""C identifiers in generated CUDA source: generated or sanitized, never copied.

No text from the input reaches a `.cu` file except through `sanitize`, which keeps only
`[A-Za-z0-9_]`, never starts with a digit or `__`, and never yields a C++ keyword or a
name the generated code relies on or its headers declare at file scope (`fo_*` helpers,
CUDA builtins, types and runtime calls, the C math and standard library). Each
`NameTable` hands out unique names; each emit builds its own.
"""

from __future__ import annotations

import re

from fuseopt import identifiers

MAX_IDENTIFIER = 48
"""Longest identifier taken from an input name (longer ones are cut)."""

RESERVED: frozenset[str] = frozenset(
    """alignas alignof and asm auto bool break case catch char class const constexpr
    const_cast continue decltype default delete do double dynamic_cast else enum explicit
    export extern false float for friend goto if inline int long mutable namespace new
    noexcept not nullptr operator or private protected public register reinterpret_cast
    return short signed sizeof static static_assert static_cast struct switch template
    this throw true try typedef typeid typename union unsigned using virtual void volatile
    wchar_t while threadIdx blockIdx blockDim gridDim warpSize dim3 main nvcuda wmma
    half uint4 uint2 std""".split()
)
"""Names a generated identifier may never take: C++ keywords and CUDA names."""

_MATH = """acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh cospi erf erfc
    erfinv exp exp10 exp2 expm1 fabs fdim floor fma fmax fmin fmod frexp hypot ilogb ldexp
    lgamma llrint llround log log10 log1p log2 logb lrint lround modf nan nearbyint nextafter
    norm pow rcbrt remainder remquo rint round rsqrt scalbln scalbn sin sincos sinh sinpi
    sqrt tan tanh tgamma trunc""".split()
_VECTOR_BASES = "char uchar short ushort int uint long ulong longlong ulonglong float double"
LIBRARY: frozenset[str] = frozenset(
    [*_MATH, *(f"{m}f" for m in _MATH)]
    + """abs labs llabs div min max isnan isinf isfinite signbit malloc calloc realloc free
    exit abort atexit atoi atol atof rand srand qsort bsearch getenv system printf memcpy
    memset memmove memcmp strlen strcmp strcpy int8_t int16_t int32_t int64_t uint8_t
    uint16_t uint32_t uint64_t size_t ptrdiff_t intptr_t uintptr_t NULL NAN INFINITY
    HUGE_VAL HUGE_VALF EOF assert errno""".split()
    + [f"{t}{n}" for t in _VECTOR_BASES.split() for n in (1, 2, 3, 4)]
)
"""File-scope names of the headers a `.cu` file includes (C math and standard library,
CUDA vector types), which a kernel of the same name would redeclare."""

RESERVED_PREFIXES = ("fo_", "FO_", "__", "cuda", "CUDA", "nvrtc", "make_")
"""Prefixes of the printer's helpers and macros and of CUDA's runtime API (`cudaStream_t`,
`cudaGetLastError`, `make_float4`, ...); an input name with one gets a `u_` prefix."""

_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]+")


def sanitize(text: str, fallback: str = "v") -> str:
    """`text` made into a safe C identifier (a best-effort readable one)."""
    name = _NOT_IDENTIFIER.sub("_", text.encode("ascii", "replace").decode()).strip("_")
    name = name[:MAX_IDENTIFIER] or fallback
    if name[0].isdigit():
        name = f"k_{name}"
    if name in RESERVED or name in LIBRARY or name.startswith(RESERVED_PREFIXES):
        name = f"u_{name}"
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
    return name


class NameTable(identifiers.NameTable):
    """Unique C identifiers within one translation unit, from sanitized hints."""

    sanitize = staticmethod(sanitize)
