"""`fuse-opt`: fuseopt's pass-pipeline driver, used like `mlir-opt` / `xdsl-opt`.

    fuse-opt input.mlir -p 'nn-decompose,canonicalize,cse' [-t mlir] [-o out]
    fuse-opt input.mlir --pipeline standard

It is xDSL's opt main with fuseopt's dialects, passes and targets registered, and with
errors for people: a parse error, verifier failure or pass failure prints
`file:line:col: error: message` on stderr and exits 1. With `--split-input-file` every
chunk is processed and every chunk's error reported (exit 1 if any failed); for a
target that prints Python (`-t triton`) the chunks are separated by `# -----`, so the
output stays one Python file. `--verify-diagnostics` checks the errors against the
input's `// expected-error {{...}}` annotations instead, as `mlir-opt` does (see
`fuseopt.verify_diagnostics`): exit 0 when they match, 1 with each mismatch reported.
Bad command lines (an unknown or empty target, an unknown pass, which gets a "did you
mean", an empty pass name as in `-p 'cse,'`, an option value to quote) print one
error and exit non-zero. No input produces a Python traceback; set `FUSEOPT_DEBUG=1` to
see one for an internal error.

`--help` lists every pass with its options (`fuseopt.pass_help`). `--time-passes`
(`--mlir-timing`) prints each pass's wall-clock time on stderr; mlir-opt's names
`--mlir-print-op-generic` and `--mlir-print-debuginfo` are aliases of xDSL's flags, and
`--mlir-print-ir-after-all` prints the IR after every pass on stderr.

Output (`-o FILE`), as `mlir-opt` does it: all input is read before anything is written,
so `-o` may name the input file; the result goes to a temporary file beside FILE that is
renamed over it once every chunk succeeded, so an error leaves FILE as it was (and a
reader never sees half a file). A FILE that is not a regular file (`/dev/null`, a pipe)
is written directly.
"""

from __future__ import annotations

import argparse
import io
import os
import secrets
import stat
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, ClassVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.arg_spec import parse_pipeline, parse_spec
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException
from xdsl.xdsl_opt_main import xDSLOptMain

from fuseopt import __version__, registry
from fuseopt.diagnostics import CompileError, parse_module, verify_module
from fuseopt.pass_help import passes_help, quoting_hint, unknown_passes
from fuseopt.passes.generalize_sizes import has_dynamic_functions, lower_dynamic, replace_body
from fuseopt.pipelines import PIPELINES, describe_bad_option, empty_pass_name, pipeline_passes
from fuseopt.verify_diagnostics import verify_chunk

PYTHON_TARGETS = frozenset({"triton"})
"""Targets whose output is Python: their chunks are separated by `# -----` (a Python
comment), so that `--split-input-file -t triton -o x.py` writes one valid Python file."""

MLIR_OPT_ALIASES = {
    "--mlir-timing": "--time-passes",
    "--mlir-print-op-generic": "--print-op-generic",
    "--mlir-print-debuginfo": "--print-debuginfo",
}
"""mlir-opt's names for flags that xDSL has under other names, alias -> xDSL's flag."""

HELP_TEXTS = {
    "--verify-diagnostics": "check the errors against the input's `// expected-error "
    "{{message}}` annotations (also @+N, @-N, @above, @below, @unknown), as mlir-opt "
    "does: exit 1 and report each mismatch, 0 when all match",
    "--time-passes": "print each pass's wall-clock time on stderr",
    "--version": "print fuse-opt's version and exit",
    "--split-input-file": "split the input at `// -----` lines and process every chunk "
    "alone, reporting each one's errors (outputs separated by `// -----`, `# -----` for "
    "Python targets)",
}
"""fuse-opt's help for xDSL flags whose meaning it changes, by flag."""


class CommandLineError(Exception):
    """A bad command line or an unwritable output, printed as `fuse-opt: error: ...`."""


class PassHelpAction(argparse.Action):
    """`-h/--help`: argparse's help, then every pass and its options (built only when
    asked: listing them imports every pass)."""

    def __init__(
        self,
        option_strings: Sequence[str],
        passes: dict[str, Callable[[], type[ModulePass]]],
        dest: str = argparse.SUPPRESS,
        help: str | None = None,
    ):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)
        self.passes = passes

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: Any = None
    ) -> None:
        parser.epilog = passes_help(self.passes)
        parser.print_help()
        parser.exit()


class FuseOptMain(xDSLOptMain):
    """xDSL's opt main with fuseopt's registry and located diagnostics."""

    version_format: ClassVar[str] = f"fuse-opt {__version__}"

    def __init__(self, args: Sequence[str] | None = None):
        self.pass_times: list[tuple[str, float]] = []
        self.pass_started = time.perf_counter()
        super().__init__(description="fuseopt's pass-pipeline driver", args=args)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.prog = "fuse-opt"
        arg_parser.formatter_class = argparse.RawDescriptionHelpFormatter  # the pass list
        arg_parser.add_argument(
            "--pipeline",
            choices=sorted(PIPELINES),
            help="run a named pipeline from fuseopt.pipelines (before any -p passes): "
            + "; ".join(f"{name} = {spec}" for name, spec in sorted(PIPELINES.items())),
        )
        self.register_mlir_opt_names(arg_parser)
        for action in arg_parser._actions:  # argparse keeps no public handle on an option
            if "--target" in action.option_strings:
                action.type = self.check_target
            for flag in set(action.option_strings) & set(HELP_TEXTS):
                action.help = HELP_TEXTS[flag]
        options = arg_parser._optionals  # the group -h/--help is in: replace it there
        options.conflict_handler = "resolve"
        options.add_argument(
            "-h",
            "--help",
            action=PassHelpAction,
            passes=self.available_passes,
            help="show this help, every pass and its options, and exit",
        )
        options.conflict_handler = "error"

    def register_mlir_opt_names(self, arg_parser: argparse.ArgumentParser) -> None:
        """Add mlir-opt's names: the aliases of MLIR_OPT_ALIASES and
        `--mlir-print-ir-after-all`."""
        for alias, flag in MLIR_OPT_ALIASES.items():
            dest = flag.removeprefix("--").replace("-", "_")
            arg_parser.add_argument(
                alias, dest=dest, action="store_true", help=f"{flag} (mlir-opt's name)"
            )
        arg_parser.add_argument(
            "--mlir-print-ir-after-all",
            action="store_true",
            help="print the IR after every pass on stderr, as mlir-opt does "
            "(--print-between-passes prints it between passes on stdout)",
        )

    def check_target(self, text: str) -> str:
        """The `-t` value, checked while argparse reads it: an empty or unknown target is
        an error about the target that lists the targets (xDSL would blame the pass
        pipeline for an empty one)."""
        name = text.split("{", 1)[0].strip()
        targets = ", ".join(self.available_targets)
        if not name:
            raise argparse.ArgumentTypeError(f"empty target name (choose from {targets})")
        if name not in self.available_targets:
            raise argparse.ArgumentTypeError(f"invalid choice: '{name}' (choose from {targets})")
        try:
            parse_spec(text)
        except ArgSpecParseError as e:
            where = _pipeline_error(e).replace("pass-pipeline:", "target:", 1)
            raise argparse.ArgumentTypeError(f"bad target options: {where}") from None
        return text

    def setup_pipeline(self) -> None:
        if not self.args.passes.strip():
            self.args.passes = ""
        check_pass_names(self.args.passes, self.available_passes)
        try:
            super().setup_pipeline()
        except ValueError as e:  # a bad option value: say which pass and option
            why = describe_bad_option(self.args.passes or "")
            if why is None:
                raise
            raise ValueError(why) from e
        named = pipeline_passes(self.args.pipeline) if self.args.pipeline else []
        # the named pipeline's pass objects run first
        self.pipeline = PassPipeline((*named, *self.pipeline.passes), self.between_passes)

    def between_passes(
        self, previous: ModulePass | None, module: ModuleOp, following: ModulePass | None
    ) -> None:
        """Called before the first pass (`previous` None), between passes, and after the
        last (`following` None): time the pass that ran, verify the module (a located
        error), print the IR as the flags ask."""
        if previous is None:
            self.pass_started = time.perf_counter()
            return
        self.pass_times.append((previous.name, time.perf_counter() - self.pass_started))
        if not self.args.disable_verify:
            verify_module(module)
        if self.args.mlir_print_ir_after_all:
            print(f"// -----// IR Dump After {previous.name} //----- //", file=sys.stderr)
            Printer(stream=sys.stderr).print_op(module)
            print(file=sys.stderr)
        if following is not None and self.args.print_between_passes:
            print(f"IR after {previous.name}:")
            Printer(stream=sys.stdout).print_op(module)
            print("\n\n\n")
        self.pass_started = time.perf_counter()

    def apply_passes(self, prog: ModuleOp) -> None:
        """Run the pipeline on `prog`; with `--time-passes`, print the passes' times on
        stderr afterwards (also those run before a pass failed)."""
        self.pass_times = []
        try:
            if has_dynamic_functions(prog) and any(
                p.name == "convert-nn-to-tile" for p in self.pipeline.passes
            ):  # lowered at size hints, then made of dynamic size
                tiled, _ = lower_dynamic(prog, self._lowered, self._parse)
                replace_body(prog, tiled)
            else:
                super().apply_passes(prog)
        finally:
            if self.args.time_passes and self.pass_times:
                print(timing_report(self.pass_times), file=sys.stderr, end="")

    def _lowered(self, module: ModuleOp) -> ModuleOp:
        super().apply_passes(module)
        return module

    def _parse(self, text: str) -> ModuleOp:
        return parse_module(self.ctx, text, self.get_input_name())

    def register_all_dialects(self) -> None:
        for name, factory in registry.all_dialects().items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        for name, factory in registry.all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        self.available_targets.update(registry.all_targets())

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        if file_extension != "mlir":
            raise CompileError(f"unsupported input extension '.{file_extension}' (expected .mlir)")
        return parse_module(self.ctx, chunk.read(), self.get_input_name(), start_offset)

    def run(self) -> int:
        """Process every input chunk, report every chunk's errors on stderr; return the
        process exit code (see the module docstring for how `-o` is written)."""
        inputs, file_extension = self.read_chunks()
        to_file = self.args.output_file is not None
        output: IO[str] = io.StringIO() if to_file else sys.stdout
        failed = False
        for i, (data, offset) in enumerate(inputs):
            if i > 0:
                output.write(self.chunk_separator())
                output.flush()  # before what the chunk prints on stderr
            problems = self.process_chunk(data, file_extension, offset, output)
            output.flush()
            for problem in problems:
                print(problem, file=sys.stderr)
            failed = failed or bool(problems)
        if to_file and not failed:
            assert isinstance(output, io.StringIO)
            write_atomically(self.args.output_file, output.getvalue())
        return 1 if failed else 0

    def read_chunks(self) -> tuple[list[tuple[bytes, int]], str]:
        """The input's chunks (one without `--split-input-file`), each as its bytes and
        the number of lines before it, and the input's file extension."""
        chunks, file_extension = self.prepare_input()
        inputs: list[tuple[bytes, int]] = []
        for chunk, offset in chunks:
            try:
                inputs.append((chunk.read(), offset))
            finally:
                chunk.close()
        return inputs, file_extension

    def process_chunk(
        self, data: bytes, file_extension: str, offset: int, output: IO[str]
    ) -> list[CompileError]:
        """Parse chunk `data`, run the passes and write the result to `output` (nothing
        when it fails); return the errors to report: the chunk's diagnostic, or with
        `--verify-diagnostics` the mismatches with the chunk's annotations."""
        diagnostics: list[CompileError] = []
        try:
            module = self.parse_chunk(io.BytesIO(data), file_extension, offset)
            if module is not None:
                self.apply_passes(module)
                output.write(self.output_resulting_program(module))
        except DiagnosticException as e:
            diagnostics.append(_as_compile_error(e))
        if not self.args.verify_diagnostics:
            return diagnostics
        text = data.decode("utf-8", errors="replace")
        return verify_chunk(text, self.get_input_name(), offset, diagnostics)

    def chunk_separator(self) -> str:
        """The line between two chunks' outputs: `// -----`, or `# -----` for a target
        that prints Python."""
        target = parse_spec(self.args.target).name
        return "# -----\n" if target in PYTHON_TARGETS else "// -----\n"


def timing_report(times: Sequence[tuple[str, float]]) -> str:
    """`--time-passes` output: each pass's wall-clock time (in ms, to 0.1 ms, aligned)
    and the total, as lines."""
    rows = [*times, ("total", sum(seconds for _, seconds in times))]
    width = max(len(f"{seconds * 1e3:.1f}") for _, seconds in rows)
    lines = [f"  {seconds * 1e3:{width}.1f} ms  {name}" for name, seconds in rows]
    return "pass timing (wall clock):\n" + "\n".join(lines) + "\n"


def check_pass_names(spec: str, known: dict[str, Callable[[], type[ModulePass]]]) -> None:
    """Raise a CommandLineError at the first empty pass name of `spec` (see
    `fuseopt.pipelines.empty_pass_name`), or for the pass names that are not in `known`
    (with a "did you mean"). A syntax error is left for xDSL to report."""
    message = empty_pass_name(spec)
    if message is not None:
        raise CommandLineError(f"pass-pipeline:{message}")
    try:
        names = [pass_spec.name for pass_spec in parse_pipeline(spec)]
    except ArgSpecParseError:
        return
    message = unknown_passes(names, known)
    if message is not None:
        raise CommandLineError(message)


def write_atomically(path: str, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same directory, renamed
    over `path` (the file a symbolic link names is replaced; its mode is kept). A path
    that exists and is not a regular file is written directly."""
    target = Path(path).resolve()
    try:
        if target.exists() and not target.is_file():
            with open(target, "w", encoding="utf-8") as f:
                f.write(text)
            return
        mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else None
        while True:  # created by os.open, so a new file gets the umask's permissions
            tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                break
            except FileExistsError:
                continue
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as e:
        raise CommandLineError(f"cannot write '{path}': {e.strerror or e}") from None


def _as_compile_error(e: DiagnosticException) -> CompileError:
    if isinstance(e, CompileError):
        return e
    return CompileError(str(e).removeprefix("Operation does not verify: ").split("\n", 1)[0])


def main(args: Sequence[str] | None = None) -> int:
    """Entry point of the `fuse-opt` console script."""
    try:
        code = FuseOptMain(args).run()
    except CompileError as e:
        print(e, file=sys.stderr)
        code = 1
    except CommandLineError as e:
        print(f"fuse-opt: error: {e}", file=sys.stderr)
        code = 1
    except OSError as e:
        name = e.filename if e.filename is not None else ""
        print(f"fuse-opt: error: cannot open '{name}': {e.strerror}", file=sys.stderr)
        code = 1
    except ArgSpecParseError as e:  # a BaseException in xDSL, not an Exception
        print(f"fuse-opt: error: {_pipeline_error(e)}", file=sys.stderr)
        code = 1
    except (ValueError, KeyError, DiagnosticException) as e:
        # Raised while reading the command line: unknown pass, bad pass option, ...
        print(f"fuse-opt: error: {_one_line(e)}", file=sys.stderr)
        code = 1
    except RecursionError:
        # the parser reports nesting it cannot take as a located error, so this came
        # from a pass or a printer: fuseopt's fault, not the input's
        if os.environ.get("FUSEOPT_DEBUG"):
            raise
        print(
            "fuse-opt: internal error: a pass or printer exceeded Python's recursion limit "
            "on this input (set FUSEOPT_DEBUG=1 for a traceback; please report it)",
            file=sys.stderr,
        )
        code = 2
    except Exception as e:  # an internal error: say so plainly, keep the trace opt-in
        if os.environ.get("FUSEOPT_DEBUG"):
            raise
        print(
            f"fuse-opt: internal error: {type(e).__name__}: {_one_line(e)} "
            "(set FUSEOPT_DEBUG=1 for a traceback; please report it)",
            file=sys.stderr,
        )
        code = 2
    if __name__ == "__main__":
        sys.exit(code)
    return code


def _pipeline_error(e: ArgSpecParseError) -> str:
    """The pass-pipeline syntax error `e` as one message with a hint, plus xDSL's caret
    lines."""
    lines = [line for line in str(e).split("\n") if line.strip()]
    # xDSL: "Error parsing ...", "pass-pipeline:L:C", the spec, the caret, the message.
    if len(lines) >= 5 and lines[1].startswith("pass-pipeline:"):
        where, spec, caret, message = lines[1], lines[2], lines[3], lines[4].strip()
        hint = quoting_hint(spec, int(where.rsplit(":", 1)[1]))
        if "space" in message:
            hint = "pass options are separated by spaces: -p 'pass{a=1 b=2}'"
        hint = f" ({hint})" if hint else ""
        return f"{where}: {message}{hint}\n  {spec}\n  {caret}"
    return _one_line(e)


def _one_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return " ".join(text.split("\n")[:1])


def console_main() -> None:
    """`fuse-opt` console script: run `main` and exit with its code."""
    sys.exit(main())


if __name__ == "__main__":
    console_main()
