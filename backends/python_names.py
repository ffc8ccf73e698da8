"""Identifiers in generated Python source (Triton modules, host functions): generated
or sanitized, never copied.

No text from the input reaches the emitted source except through `sanitize`, which
keeps only `[A-Za-z0-9_]`, never starts with a digit, and never yields a keyword or a
name the generated module relies on (`tl`, `triton`, `torch`, builtins, `INTERPRETED`,
a launcher's `grid`, the `fuseopt_*` helper functions, ...). Each `NameTable` hands out
unique names; each `emit()` builds its own tables.
"""

from __future__ import annotations

import builtins
import keyword
import re

from fuseopt import identifiers

MAX_IDENTIFIER = 48
"""Longest identifier taken from an input name (longer ones are cut)."""

RESERVED: frozenset[str] = frozenset(
    {*keyword.kwlist, *keyword.softkwlist, *dir(builtins)}
    | {"tl", "triton", "torch", "math", "os", "sys", "device", "fuseopt", "self"}
    | {"INTERPRETED", "grid", "launch"}
)
"""Names a generated identifier may never take."""

RESERVED_PREFIXES = ("__", "fuseopt_")
"""Prefixes of names the printer keeps for itself (`fuseopt_*`: the helper functions of
`op_table.HELPERS`, present and future); an input name with one gets a `u_` prefix."""

_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]+")


def sanitize(text: str, fallback: str = "v") -> str:
    """`text` made into a safe Python identifier (a best-effort readable one).

    Every character outside `[A-Za-z0-9_]` becomes `_`; a leading digit gets a `_`
    prefix; an empty result is `fallback`; reserved names get a trailing `_`, names with
    a reserved prefix a `u_` prefix.
    """
    name = _NOT_IDENTIFIER.sub("_", text).strip("_")[:MAX_IDENTIFIER] or fallback
    if name[0].isdigit():
        name = f"_{name}"
    if name.startswith(RESERVED_PREFIXES):
        name = f"u_{name}"
    if name in RESERVED:
        name = f"{name}_"
    assert name.isidentifier() and not keyword.iskeyword(name)
    return name


class NameTable(identifiers.NameTable):
    """Unique Python identifiers within one scope, from sanitized hints (`taken`: names
    of an enclosing scope, which a local never shadows)."""

    sanitize = staticmethod(sanitize)
