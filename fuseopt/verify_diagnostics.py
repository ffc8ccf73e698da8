"""`fuse-opt --verify-diagnostics`: check the errors an input gets against its annotations.

As in `mlir-opt`, a test file says which diagnostics it expects in comments:

    %0 = nn.exp %a : tensor<4xi64>  // expected-error {{needs a floating-point tensor}}
    // expected-error@+1 {{axis 2 is out of range}}
    %1 = nn.sum %a [2] : tensor<4x8xf32> -> tensor<4xf32>

`expected-error {{text}}` expects an error on its own line whose message contains
`text`; `@+N` / `@-N` move the line by N, `@below` / `@above` name the next / previous
line that holds no annotation, `@unknown` expects an error without a location.
`expected-error-re {{...}}` reads `{{regex}}` blocks inside the text as regular
expressions. `expected-warning`, `-note` and `-remark` are read too (fuse-opt emits
errors only, so they can never be produced).

Every diagnostic must match an expectation, and every expectation a diagnostic: each
mismatch, and each annotation that cannot be read, is reported as a located error
(`file:line:col: error: ...`). With `--split-input-file` each chunk is checked against
its own annotations.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fuseopt.diagnostics import CompileError, SourceLocation

KINDS = ("error", "warning", "note", "remark")
"""The diagnostic kinds an annotation may expect (`expected-KIND`)."""

_DIRECTIVE = re.compile(r"expected-(?:error|warning|note|remark)(?:-re)?(?=@|\s*\{\{)")
"""Where a line holds an annotation (well-formed or not): `expected-KIND` followed by a
designator or the opening `{{`. A mere mention (`// expected-error annotations`) is not
one."""

_ANNOTATION = re.compile(
    r"expected-(?P<kind>error|warning|note|remark)(?P<regex>-re)?[ \t]*"
    r"(?:@(?P<at>\S*))?[ \t]*\{\{(?P<text>.*)\}\}[ \t]*$"
)
"""A whole annotation, up to the end of its line (the text may itself hold `{{...}}`)."""

_OFFSET = re.compile(r"[+-][0-9]+")
"""A relative line designator, `@+N` or `@-N`."""

_REGEX_BLOCK = re.compile(r"\{\{(.*?)\}\}")
"""A `{{regex}}` block inside the text of an `expected-KIND-re` annotation."""


@dataclass
class Expectation:
    """One annotation: a diagnostic of `kind` expected at `line` (None: without a
    location) whose message `pattern` finds; `location` is where the annotation is."""

    kind: str
    line: int | None
    text: str
    pattern: re.Pattern[str]
    location: SourceLocation
    matched: bool = False

    def accepts(self, kind: str, diagnostic: CompileError, file: str) -> bool:
        """Whether `diagnostic`, of `kind`, is this expectation's (from input `file`)."""
        if kind != self.kind or self.pattern.search(diagnostic.message) is None:
            return False
        where = diagnostic.location
        if where is None or self.line is None:
            return where is None and self.line is None
        return where.line == self.line and where.file == file


def verify_chunk(
    text: str, file: str, line_offset: int, diagnostics: Sequence[CompileError]
) -> list[CompileError]:
    """The mismatches between the `diagnostics` (errors) that one input chunk got and
    its annotations: unreadable annotations, unexpected diagnostics, then expectations
    no diagnostic met. `text` is the chunk, `file` the input's name, `line_offset` the
    number of lines before the chunk. An empty list means the chunk passed."""
    expectations, problems = parse_expectations(text, file, line_offset)
    for diagnostic in diagnostics:
        problems += unexpected(diagnostic, "error", expectations, file)
    problems += [not_produced(e) for e in expectations if not e.matched]
    return problems


def parse_expectations(
    text: str, file: str, line_offset: int = 0
) -> tuple[list[Expectation], list[CompileError]]:
    """The annotations of chunk `text` (see the module docstring) and a located error
    for each one that cannot be read."""
    chunk = _Chunk.of(text, file, line_offset)
    expectations: list[Expectation] = []
    problems: list[CompileError] = []
    for index in sorted(chunk.annotated):
        try:
            expectations.append(chunk.expectation(index))
        except ValueError as e:
            problems.append(CompileError(str(e), chunk.where(index)))
    return expectations, problems


@dataclass(frozen=True)
class _Chunk:
    """An input chunk as lines, which of them hold annotations (their indices), and
    where it is: its file and the number of lines before it."""

    lines: list[str]
    annotated: frozenset[int]
    file: str
    line_offset: int

    @staticmethod
    def of(text: str, file: str, line_offset: int) -> _Chunk:
        """Chunk `text` of `file`, after `line_offset` lines."""
        lines = text.split("\n")
        annotated = frozenset(i for i, line in enumerate(lines) if _DIRECTIVE.search(line))
        return _Chunk(lines, annotated, file, line_offset)

    def where(self, index: int) -> SourceLocation:
        """The location of the annotation on line `index` of the chunk."""
        start = _DIRECTIVE.search(self.lines[index])
        assert start is not None
        return SourceLocation(self.file, self.line_offset + index + 1, start.start() + 1)

    def expectation(self, index: int) -> Expectation:
        """The expectation written on line `index`; a ValueError says why it cannot be
        read."""
        where = self.where(index)
        match = _ANNOTATION.match(self.lines[index], where.column - 1)
        if match is None:
            raise ValueError(
                "malformed annotation: write expected-error {{message}}, optionally with "
                "@+N, @-N, @above, @below or @unknown after 'expected-error'"
            )
        line = self.target_line(index, match.group("at"))
        text = match.group("text")
        return Expectation(match["kind"], line, text, _pattern(text, match["regex"]), where)

    def target_line(self, index: int, at: str | None) -> int | None:
        """The line the annotation on line `index` refers to through its designator `at`
        (None: its own line; "unknown": no line)."""
        line = self.line_offset + index + 1
        if at is None:
            return line
        if at == "unknown":
            return None
        if _OFFSET.fullmatch(at):
            if line + int(at) < 1:
                raise ValueError(f"@{at} points before the first line of the file")
            return line + int(at)
        if at not in ("above", "below"):
            raise ValueError(
                f"unknown designator '@{at}' (expected @+N, @-N, @above, @below or @unknown)"
            )
        step = -1 if at == "above" else 1
        target = index + step
        while target in self.annotated:
            target += step
        if not 0 <= target < len(self.lines):
            raise ValueError(f"@{at}: there is no line without an annotation {at} this one")
        return line + (target - index)


def _pattern(text: str, regex: str | None) -> re.Pattern[str]:
    """What a message must contain: `text` itself, or for an `-re` annotation the text
    with its `{{...}}` blocks read as regular expressions."""
    if not regex:
        return re.compile(re.escape(text))
    parts = _REGEX_BLOCK.split(text)  # literal, regex, literal, regex, ..., literal
    source = "".join(p if i % 2 else re.escape(p) for i, p in enumerate(parts))
    try:
        return re.compile(source)
    except re.error as e:
        raise ValueError(f"invalid regular expression in {{{{{text}}}}}: {e}") from None


def unexpected(
    diagnostic: CompileError, kind: str, expectations: Sequence[Expectation], file: str
) -> list[CompileError]:
    """Mark an expectation that `diagnostic` (of `kind`) meets; when there is none, the
    diagnostic is unexpected: it is returned as `unexpected KIND: ...` at its location."""
    met = [e for e in expectations if e.accepts(kind, diagnostic, file)]
    if met:  # the first one not met yet (two equal errors need two annotations)
        next((e for e in met if not e.matched), met[0]).matched = True
        return []
    message = f"unexpected {kind}: {diagnostic.message}"
    return [CompileError(message, diagnostic.location, diagnostic.context)]


def not_produced(expectation: Expectation) -> CompileError:
    """The error for an expectation that no diagnostic met, at the annotation."""
    return CompileError(
        f'expected {expectation.kind} "{expectation.text}" was not produced',
        expectation.location,
    )
