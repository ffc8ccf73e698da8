"""The frontend's typed errors.

An ATen op outside the op table, or an op whose arguments the table cannot take, raises
`UnsupportedOpError`. It names the FX node, the ATen target and the user's source line;
the partitioner catches it and runs the node eagerly instead (see `partition.py`),
while `fuseopt.export` reports it to the user as a located `CompileError`.
"""

from __future__ import annotations

import linecache
import os
import re

import torch
from torch.fx import Node

from fuseopt.diagnostics import CompileError, SourceLocation

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)\n(?P<rest>.*)')
_TORCH_DIR = os.path.dirname(torch.__file__)


def node_location(node: Node) -> SourceLocation | None:
    """The user's source position that produced `node`, from its recorded stack trace.

    Frames inside PyTorch itself (`nn.Linear.forward`, ...) are skipped in favour of
    the innermost frame of the user's code; the column comes from the caret line
    Python prints under the expression, when there is one.
    """
    trace = node.meta.get("stack_trace") or ""
    frames = []
    lines = trace.splitlines()
    for i, line in enumerate(lines):
        m = _FRAME.search(line.strip() + "\n")
        if m:
            frames.append((m.group("file"), int(m.group("line")), lines[i + 1 :]))
    if not frames:
        return None
    user = [f for f in frames if not f[0].startswith(_TORCH_DIR)]
    file, line, rest = (user or frames)[-1]
    return SourceLocation(file, line, _column(file, line, rest))


def _column(file: str, line: int, following: list[str]) -> int:
    """1-based column of the expression, from Python's `^^^` marker line."""
    if len(following) < 2 or "^" not in following[1] or following[1].strip("^~ ") != "":
        return 1
    source = linecache.getline(file, line)
    indent = len(source) - len(source.lstrip())
    printed = following[0]
    printed_indent = len(printed) - len(printed.lstrip())
    return indent + following[1].index("^") - printed_indent + 1


def describe_target(target: object) -> str:
    """A readable name for an FX node target: `aten.add.Tensor`, `operator.getitem`."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or str(target)
    return f"{module.split('.')[-1]}.{name}" if module else name


class UnsupportedOpError(CompileError):
    """An FX node the importer cannot turn into nn ops (the op or its arguments).

    Attributes: `node` (the FX node), `target` (its readable ATen name), `reason`.
    """

    def __init__(self, node: Node, reason: str):
        self.node = node
        self.target = describe_target(node.target)
        self.reason = reason
        super().__init__(
            f"cannot import {self.target} (node '{node.name}'): {reason}", node_location(node)
        )


class RegionFallback(Exception):  # noqa: N818 - a signal, not an error to the user
    """Raised by a region compiler to say "run this region eagerly" (the backend
    failed on it); `reason` goes into the fallback log line and record."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def first_line(error: BaseException) -> str:
    """The first line of `error`'s message (its type's name when it has none): what a
    fallback log line quotes."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
