"""What `fuse-opt` says about passes: the `--help` listing of every pass and its options,
"did you mean" for an unknown pass name, and the hint to quote an option value that the
pipeline syntax cannot take bare (`nn-fuse{dot="g.dot"}`).

A pass's options are its dataclass fields; an option's description is the docstring
written under its field (`dot: str = ""` then `\"\"\"Write the groups as DOT to this
file.\"\"\"`), a pass's description the first sentence of its class docstring.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping
from typing import Any, get_type_hints

from xdsl.passes import ModulePass

WIDTH = 100
"""The width the listing is wrapped to."""

UPSTREAM_SUMMARIES = {
    "cse": "Eliminate common subexpressions (xDSL).",
    "dce": "Remove operations whose results are unused and that have no effects (xDSL).",
}
"""Descriptions of the upstream passes whose classes have no docstring."""


@dataclasses.dataclass(frozen=True)
class PassOption:
    """One option of a pass, as `--help` shows it: `name: type = default  description`."""

    name: str
    type: str
    default: str
    description: str

    def signature(self) -> str:
        """`name: type = default`, as written on the command line (`block-rows`)."""
        return f"{self.name}: {self.type} = {self.default}"


def passes_help(passes: Mapping[str, Callable[[], type[ModulePass]]]) -> str:
    """The `--help` listing of `passes` (flag -> factory of the pass class): each pass
    with its description, then each of its options with type, default and description."""
    lines = textwrap.wrap(
        "passes and their options (-p 'pass1,pass2{option=value other=value}'; quote a "
        'value that is not a number or a name, as in dot="g.dot"):',
        WIDTH,
    )
    for flag, factory in passes.items():
        cls = factory()
        lines += _wrapped(f"  {flag}", pass_summary(flag, cls), 26)
        options = pass_options(cls)
        column = max((len(o.signature()) for o in options), default=0) + 9
        for option in options:
            lines += _wrapped(f"      {option.signature()}", option.description, column)
    return "\n".join(lines)


def _wrapped(head: str, text: str, column: int) -> list[str]:
    """`head`, then `text` from `column` on, wrapped to WIDTH with a hanging indent
    (starting on the next line when `head` reaches the column)."""
    if not text:
        return [head]
    indent = " " * column
    on_next_line = len(head) >= column - 1
    lines = textwrap.wrap(
        text,
        WIDTH,
        initial_indent=indent if on_next_line else head.ljust(column),
        subsequent_indent=indent,
        break_on_hyphens=False,
    )
    return [head, *lines] if on_next_line else lines


def pass_summary(flag: str, cls: type[ModulePass]) -> str:
    """What pass `cls` (run as `flag`) does: the first sentence of its docstring."""
    doc = cls.__doc__ or ""
    if not doc.strip() or doc.startswith(f"{cls.__name__}("):  # a dataclass's own __doc__
        return UPSTREAM_SUMMARIES.get(flag, "")
    return first_sentence(doc)


def first_sentence(doc: str) -> str:
    """The first sentence of docstring `doc`, on one line (its first paragraph up to the
    first period that ends a word)."""
    paragraph = " ".join(inspect.cleandoc(doc).split("\n\n", 1)[0].split())
    return re.split(r"(?<=\.)\s", paragraph, maxsplit=1)[0]


def pass_options(cls: type[ModulePass]) -> list[PassOption]:
    """The options of pass `cls`, in declaration order."""
    if not dataclasses.is_dataclass(cls):
        return []
    hints = get_type_hints(cls)
    docs = attribute_docs(cls)
    return [
        PassOption(
            field.name.replace("_", "-"),
            _type_text(hints.get(field.name, field.type)),
            _value_text(field.default),
            first_sentence(docs.get(field.name, "")),
        )
        for field in dataclasses.fields(cls)
    ]


def _type_text(hint: Any) -> str:
    """A field's type as `--help` shows it: `int`, `str`, `int | None`."""
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("NoneType", "None")


def _value_text(value: Any) -> str:
    """A default as it is written in a pipeline: `true`, `"auto"`, `8`, `none`."""
    if value is dataclasses.MISSING:
        return "(required)"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def attribute_docs(cls: type) -> dict[str, str]:
    """The docstrings written under the fields of `cls` and of its base classes (a
    subclass's own win), read from their source; none for a class whose source cannot
    be read."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        if tree.body and isinstance(tree.body[0], ast.ClassDef):
            docs.update(_field_docstrings(tree.body[0].body))
    return docs


def _field_docstrings(body: list[ast.stmt]) -> Iterable[tuple[str, str]]:
    """(field, docstring) for each annotated field of a class body with a string
    literal right under it."""
    for stmt, following in zip(body, body[1:], strict=False):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            yield stmt.target.id, following.value.value


def unknown_passes(names: Iterable[str], known: Iterable[str]) -> str | None:
    """The error for the pass `names` that are not in `known`, with the closest known
    name for each (difflib) as a suggestion; None when all are known."""
    known = list(known)
    unknown = [name for name in dict.fromkeys(names) if name not in known]
    if not unknown:
        return None
    hints = []
    for name in unknown:
        if close := difflib.get_close_matches(name, known, n=1, cutoff=0.6):
            hints.append(f"'{close[0]}'" + (f" for '{name}'" if len(unknown) > 1 else ""))
    suggestion = f" (did you mean {', '.join(hints)}?)" if hints else ""
    return f"Unrecognized passes: {unknown}{suggestion}; fuse-opt --help lists the passes"


def quoting_hint(spec: str, column: int) -> str | None:
    """A hint for a pipeline syntax error at 1-based `column` of `spec` that falls in the
    value of an option (`nn-fuse{dot=g.dot}`): quote it, `dot="g.dot"`. None when the
    error is elsewhere."""
    at = column - 1
    opening = spec.rfind("{", 0, at)
    if opening < 0 or spec.rfind("}", 0, at) > opening:
        return None  # not inside a pass's options
    start = max(opening, *(spec.rfind(space, 0, at) for space in " \t")) + 1
    option = re.match(r"([A-Za-z0-9_-]+)=([^\s}]*)", spec[start:])
    if option is None or at <= start + len(option.group(1)):
        return None  # the error is in the option's name
    key, value = option.groups()
    return f'quote the value: {key}="{value}"'
