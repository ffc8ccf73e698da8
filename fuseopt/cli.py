"""`fuse-opt`: fuseopt's pass-pipeline driver, used like `mlir-opt` / `xdsl-opt`.

    fuse-opt input.mlir -p 'nn-decompose,canonicalize,cse' [-t mlir] [-o out]
    fuse-opt input.mlir --pipeline standard

It is xDSL's opt main with fuseopt's dialects, passes and targets registered, and with
errors for people: a parse error, verifier failure or pass failure prints
`file:line:col: error: message` on stderr and exits 1; with `--verify-diagnostics` the
diagnostic goes to stdout and the exit code is 0 (for FileCheck tests). Bad command
lines print one line and exit non-zero. No input produces a Python traceback; set
`FUSEOPT_DEBUG=1` to see one for an internal error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException
from xdsl.xdsl_opt_main import xDSLOptMain

from fuseopt import registry
from fuseopt.diagnostics import CompileError, parse_module
from fuseopt.pipelines import PIPELINES, describe_bad_option


class FuseOptMain(xDSLOptMain):
    """xDSL's opt main with fuseopt's registry and located diagnostics."""

    def __init__(self, args: Sequence[str] | None = None):
        super().__init__(description="fuseopt's pass-pipeline driver", args=args)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--pipeline",
            choices=sorted(PIPELINES),
            help="run a named pipeline from fuseopt.pipelines (before any -p passes): "
            + "; ".join(f"{name} = {spec}" for name, spec in sorted(PIPELINES.items())),
        )

    def setup_pipeline(self) -> None:
        if self.args.pipeline:
            named = PIPELINES[self.args.pipeline]
            self.args.passes = f"{named},{self.args.passes}" if self.args.passes else named
        try:
            super().setup_pipeline()
        except ValueError as e:  # a bad option value: say which pass and option
            why = describe_bad_option(self.args.passes or "")
            if why is None:
                raise
            raise ValueError(why) from e

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
        """Process every input chunk; return the process exit code."""
        chunks, file_extension = self.prepare_input()
        output = self.prepare_output()
        status = 0
        try:
            for i, (chunk, offset) in enumerate(chunks):
                if i > 0:
                    output.write("// -----\n")
                try:
                    module = self.parse_chunk(chunk, file_extension, offset)
                    if module is not None:
                        self.apply_passes(module)
                        output.write(self.output_resulting_program(module))
                except DiagnosticException as e:
                    if self.args.verify_diagnostics:
                        output.write(f"{_as_compile_error(e)}\n")
                    else:
                        print(_as_compile_error(e), file=sys.stderr)
                        status = 1
                        break
                finally:
                    chunk.close()
                output.flush()
        finally:
            if output is not sys.stdout:
                output.close()
        return status


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
    """The pass-pipeline syntax error `e` as one message plus xDSL's caret lines."""
    lines = [line for line in str(e).split("\n") if line.strip()]
    # xDSL: "Error parsing ...", "pass-pipeline:L:C", the spec, the caret, the message.
    if len(lines) >= 5 and lines[1].startswith("pass-pipeline:"):
        where, spec, caret, message = lines[1], lines[2], lines[3], lines[4].strip()
        hint = ""
        if "space" in message:
            hint = " (pass options are separated by spaces: -p 'pass{a=1 b=2}')"
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
