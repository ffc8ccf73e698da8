"""C identifiers in generated CUDA source: generated or sanitized, never copied.

No text from the input reaches a `.cu` file except through `sanitize`, which keeps only
`[A-Za-z0-9_]`, never starts with a digit or `__`, and never yields a C++ keyword or a
name the generated code relies on (`fo_*` helpers, CUDA builtins). Each `NameTable`
hands out unique names; each emit builds its own.
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
"""Names a generated identifier may never take."""

_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]+")


def sanitize(text: str, fallback: str = "v") -> str:
    """`text` made into a safe C identifier (a best-effort readable one)."""
    name = _NOT_IDENTIFIER.sub("_", text.encode("ascii", "replace").decode()).strip("_")
    name = name[:MAX_IDENTIFIER] or fallback
    if name[0].isdigit():
        name = f"k_{name}"
    if name in RESERVED or name.startswith(("fo_", "__", "FO_")):
        name = f"u_{name}"
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
    return name


class NameTable(identifiers.NameTable):
    """Unique C identifiers within one translation unit, from sanitized hints."""

    sanitize = staticmethod(sanitize)
