"""Unique identifiers for generated code and IR symbols: one uniquing rule for every emitter.

What makes a name *safe* depends on the language (each backend's `names.sanitize`); what
makes it *unique* does not: `unique_name` appends `_1`, `_2`, ... until the name is free.
"""

from __future__ import annotations

from collections.abc import Iterable


def unique_name(base: str, taken: set[str]) -> str:
    """`base`, or `base_1`, `base_2`, ...: the first not in `taken`, which it then joins."""
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


class NameTable:
    """Unique identifiers within one scope, from hints made safe by `sanitize`.

    Subclasses set `sanitize(text, fallback) -> str` for their language. `taken` seeds
    names already used by an enclosing scope, so a local never shadows them.
    """

    @staticmethod
    def sanitize(text: str, fallback: str) -> str:
        """`text` as a safe identifier of the target language (set by subclasses)."""
        raise NotImplementedError

    def __init__(self, taken: Iterable[str] | None = None):
        self.taken: set[str] = set(taken or ())

    def fresh(self, hint: str, fallback: str = "v") -> str:
        """A new unique identifier based on `hint` (sanitized)."""
        return unique_name(self.sanitize(hint, fallback), self.taken)
