"""The op reference of fuseopt's dialects, rendered from the ops' own docstrings.

`python -m fuseopt.op_reference > docs/op-reference.md` writes it; a test checks that the
committed file is what this renders, so an op's docstring is the one place its syntax
and meaning are written.
"""

from __future__ import annotations

import inspect

from xdsl.ir import Dialect

from fuseopt.dialects.nn import NN
from fuseopt.dialects.tile import TILE

HEADER = """# Op reference

Generated from the ops' docstrings by `python -m fuseopt.op_reference`; do not edit by
hand. [dialects.md](dialects.md) shows the two dialects at work on one example.
"""


def _markdown(doc: str) -> list[str]:
    """A docstring as Markdown lines: its indented blocks (the IR examples) fenced."""
    lines: list[str] = []
    block: list[str] = []
    for line in [*inspect.cleandoc(doc).splitlines(), ""]:
        if line.startswith("    "):
            block.append(line[4:])
            continue
        if block:
            lines += ["", "```mlir", *block, "```"]
            block = []
        lines.append(line)
    return lines


def _section(dialect: Dialect) -> list[str]:
    """One `##` section per dialect, one `###` entry per op, then its attributes."""
    lines = [f"## The `{dialect.name}` dialect", ""]
    for op in sorted(dialect.operations, key=lambda o: o.name):
        lines += [f"### `{op.name}`", "", *_markdown(op.__doc__ or "(undocumented)")]
    for attr in sorted(dialect.attributes, key=lambda a: a.name):
        lines += [f"### attribute `{attr.name}`", "", *_markdown(attr.__doc__ or "")]
    return lines


def render() -> str:
    """The whole reference as Markdown."""
    lines = [HEADER]
    for dialect in (NN, TILE):
        lines += _section(dialect)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
