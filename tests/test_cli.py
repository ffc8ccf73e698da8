"""fuse-opt and fuseopt.parse on good and malformed input: located errors, no tracebacks."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fuseopt
from fuseopt import registry
from fuseopt.cli import main, timing_report
from fuseopt.diagnostics import CompileError, SourceLocation
from fuseopt.pass_help import pass_options, pass_summary, quoting_hint
from fuseopt.verify_diagnostics import parse_expectations, verify_chunk

VALID = """func.func @f(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %1 = nn.softmax %0 axis 1 : tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}
"""

MALFORMED = {
    "truncated": (VALID[:150], "error:"),
    "unknown_op": (
        VALID.replace("nn.softmax", "nn.softmaxx"),
        "Operation nn.softmaxx is not registered",
    ),
    "wrong_type": (VALID.replace("axis 1 : tensor<4x8xf32>", "axis 1 : tensor<4x9xf32>"), "error:"),
    # the assembly format checks attribute kinds while parsing: located at the op
    "bad_attribute": (
        VALID.replace("eps = 1.0e-06 : f64", 'eps = "small"'),
        '"small" should be of base attribute float',
    ),
    "verifier": (
        VALID.replace("axis 1", "axis 5"),
        "'nn.softmax' op axis 5 is out of range for rank 2",
    ),
    "garbage": ("this is not mlir at all", "error:"),
    "empty_op": ("func.func @f() {\n  %0 = \n}\n", "error:"),
}


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fuseopt.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_input_gives_located_error(case: str, tmp_path: Path) -> None:
    text, message = MALFORMED[case]
    path = tmp_path / f"{case}.mlir"
    path.write_text(text)
    result = run_cli(str(path))
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"{path}:"), first  # file:line:col: error: ...
    assert ": error: " in first
    assert message in result.stderr


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_parse_api_raises_compile_error(case: str) -> None:
    text, message = MALFORMED[case]
    with pytest.raises(fuseopt.CompileError) as info:
        fuseopt.parse(text, "model.mlir")
    assert info.value.location is not None and info.value.location.file == "model.mlir"
    assert message in str(info.value)


def test_verifier_error_points_at_the_op(tmp_path: Path) -> None:
    path = tmp_path / "v.mlir"
    path.write_text(MALFORMED["verifier"][0])
    result = run_cli(str(path))
    assert result.stderr.startswith(f"{path}:3:3: error: 'nn.softmax' op axis 5")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-p", "no-such-pass"], "Unrecognized passes: ['no-such-pass']"),
        (["-p", "canonicalize{nope=1}"], "nope"),
        (["-t", "nonsense"], "invalid choice: 'nonsense'"),
        (["-p", "nn-fuse{report=true,dot=x}"], "pass options are separated by spaces"),
        (["-p", "nn-fuse{"], "pass-pipeline:1:9: Expected argument name here"),
        (["-p", ",,"], "pass-pipeline:1:1: empty pass name"),
        (["-p", "canonicalize,"], "pass-pipeline:1:13: empty pass name in the pipeline"),
        (["-p", "canonicalize,,cse"], "pass-pipeline:1:14: empty pass name in the pipeline"),
        (["-t", ""], "argument -t/--target: empty target name (choose from mlir, triton, cuda)"),
        (["-t", "mlir{"], "argument -t/--target: bad target options: target:1:6:"),
    ],
)
def test_bad_command_line(args: list[str], message: str, tmp_path: Path) -> None:
    path = tmp_path / "ok.mlir"
    path.write_text(VALID)
    result = run_cli(str(path), *args)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert message in result.stderr
    if "-t" in args:  # the target is at fault, not the passes
        error = result.stderr.splitlines()[-1] if ": error: " in result.stderr else ""
        assert "pass pipeline" not in result.stderr and "pass-pipeline" not in error


def test_pass_options_may_hold_commas(tmp_path: Path) -> None:
    path = tmp_path / "ok.mlir"
    path.write_text(VALID)
    dot = tmp_path / "a,b.dot"
    assert main([str(path), "-p", f'nn-fuse{{dot="{dot}"}}', "-o", str(tmp_path / "o.mlir")]) == 0
    assert dot.is_file()


def test_output_file_may_be_the_input(tmp_path: Path) -> None:
    """mlir-opt reads all input before writing: `-o` naming the input must not empty it."""
    path = tmp_path / "in.mlir"
    path.write_text(VALID)
    assert main([str(path), "-p", "nn-decompose", "-o", str(path)]) == 0
    text = path.read_text()
    assert "nn.rsqrt" in text and "nn.rms_norm" not in text
    fuseopt.parse(text)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mlir"]  # no temporary left


def test_an_error_writes_nothing(tmp_path: Path) -> None:
    bad = MALFORMED["verifier"][0]
    path = tmp_path / "in.mlir"
    path.write_text(bad)
    result = run_cli(str(path), "-o", str(path))
    assert result.returncode == 1 and ": error: " in result.stderr
    assert path.read_text() == bad  # the input survives its own failed rewrite
    result = run_cli(str(path), "-o", str(tmp_path / "new.mlir"))
    assert result.returncode == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mlir"]
    split = VALID + "// -----\n" + bad
    path.write_text(split)
    old = tmp_path / "old.mlir"
    old.write_text("previous output\n")
    result = run_cli("--split-input-file", str(path), "-o", str(old))
    assert result.returncode == 1
    assert old.read_text() == "previous output\n"  # not the first chunk's output alone


def test_output_replaces_the_file_a_link_names_and_keeps_its_mode(tmp_path: Path) -> None:
    path, real, link = tmp_path / "in.mlir", tmp_path / "real.mlir", tmp_path / "link.mlir"
    path.write_text(VALID)
    real.write_text("old\n")
    real.chmod(0o640)
    link.symlink_to(real)
    assert main([str(path), "-o", str(link)]) == 0
    assert link.is_symlink() and "nn.softmax" in real.read_text()
    assert real.stat().st_mode & 0o777 == 0o640


def test_output_to_a_device_is_written_directly(tmp_path: Path) -> None:
    path = tmp_path / "in.mlir"
    path.write_text(VALID)
    assert main([str(path), "-o", os.devnull]) == 0
    assert Path(os.devnull).exists() and not Path(os.devnull).is_file()


def test_unwritable_output_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "in.mlir"
    path.write_text(VALID)
    result = run_cli(str(path), "-o", str(tmp_path / "no-such-dir" / "out.mlir"))
    assert result.returncode == 1
    assert result.stderr.startswith("fuse-opt: error: cannot write ")
    assert "Traceback" not in result.stderr


def test_missing_file() -> None:
    result = run_cli("/no/such/file.mlir")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "fuse-opt: error: cannot open '/no/such/file.mlir': No such file or directory"
    )


def test_pipeline_and_output_file(tmp_path: Path) -> None:
    src, out = tmp_path / "in.mlir", tmp_path / "out.mlir"
    src.write_text(VALID)
    assert main([str(src), "-p", "nn-decompose,canonicalize,cse", "-o", str(out)]) == 0
    text = out.read_text()
    assert "nn.rms_norm" not in text and "nn.softmax" not in text
    assert "nn.rsqrt" in text and "nn.reduce_max" in text
    fuseopt.parse(text)  # the output is valid input


def test_stdin_and_split_input_file() -> None:
    text = VALID + "// -----\n" + VALID.replace("@f", "@g")
    result = run_cli("--split-input-file", "-p", "nn-decompose", stdin=text)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("// -----") == 1
    assert "@g" in result.stdout


def test_xdsl_opt_sees_fuseopt() -> None:
    """The xdsl.universe entry point makes nn and nn-decompose visible to stock xdsl-opt."""
    result = subprocess.run(
        ["xdsl-opt", "-p", "nn-decompose"], input=VALID, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "nn.reduce_max" in result.stdout


@pytest.mark.parametrize(
    "spec", ["nn-fuse{", "no-such-pass", "nn-fuse{nope=1}", "nn-fuse{a=1,b=2}"]
)
def test_run_pipeline_bad_spec_is_a_compile_error(spec: str) -> None:
    module = fuseopt.parse(VALID)
    with pytest.raises(fuseopt.CompileError, match="bad pass pipeline"):
        fuseopt.run_pipeline(module, spec)


def test_run_pipeline_rejects_an_empty_pass_name() -> None:
    """The Python API checks pipelines as fuse-opt does (xDSL ignores a trailing comma)."""
    module = fuseopt.parse("func.func @f() {\n  func.return\n}")
    with pytest.raises(fuseopt.CompileError, match="1:13: empty pass name"):
        fuseopt.run_pipeline(module, "canonicalize,")


# --verify-diagnostics: mlir-opt's meaning (issue 21 item 7)

ANNOTATED = """func.func @f(%a: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error@+1 {{needs a floating-point tensor}}
  %0 = nn.exp %a : tensor<4xi64>
  func.return %0 : tensor<4xi64>
}
"""


def test_verify_diagnostics_passes_when_every_expected_error_fires(tmp_path: Path) -> None:
    path, out = tmp_path / "a.mlir", tmp_path / "out.mlir"
    path.write_text(ANNOTATED + "// -----\n" + VALID)
    result = run_cli(str(path), "--split-input-file", "--verify-diagnostics", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "nn.softmax" in out.read_text()  # the chunk without errors is printed


def test_verify_diagnostics_fails_on_a_missing_expected_error(tmp_path: Path) -> None:
    """The issue's check: an expected error that never fires is a failure, reported at
    the annotation."""
    path, out = tmp_path / "a.mlir", tmp_path / "out.mlir"
    path.write_text(ANNOTATED.replace("xi64>", "xf32>"))  # now it verifies
    result = run_cli(str(path), "--verify-diagnostics", "-o", str(out))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f'{path}:2:6: error: expected error "needs a floating-point tensor" was not produced'
    )
    assert not out.exists()


def test_verify_diagnostics_fails_on_an_unexpected_error(tmp_path: Path) -> None:
    path = tmp_path / "a.mlir"
    path.write_text(ANNOTATED.replace("{{needs a floating-point tensor}}", "{{something else}}"))
    result = run_cli(str(path), "--verify-diagnostics")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"{path}:3:3: error: unexpected error: 'nn.exp' op needs a")
    assert lines[1] == f'{path}:2:6: error: expected error "something else" was not produced'
    assert "Traceback" not in result.stderr


def test_verify_diagnostics_checks_every_chunk(tmp_path: Path) -> None:
    """Each chunk is checked against its own annotations, and all chunks are checked."""
    wrong = ANNOTATED.replace("@+1", "@+2")
    path = tmp_path / "a.mlir"
    path.write_text("// -----\n".join([wrong, ANNOTATED, wrong]))
    result = run_cli(str(path), "--split-input-file", "--verify-diagnostics")
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if ": error: " in line]
    first, third = 3, 3 + 2 * (ANNOTATED.count("\n") + 1)
    assert [line.split(": error: ")[0] for line in lines] == [
        f"{path}:{first}:3",
        f"{path}:{first - 1}:6",
        f"{path}:{third}:3",
        f"{path}:{third - 1}:6",
    ]


def test_annotation_designators() -> None:
    """Same line, @+N, @-N, @above and @below (which skip annotation lines), @unknown;
    lines count from the chunk's offset in its file."""
    text = "\n".join(
        [
            "op  // expected-error {{same}}",  # line 11
            "// expected-error@+2 {{two below}}",
            "// expected-error@below {{below}}",
            "op",  # line 14
            "// expected-error@above {{above}}",
            "// expected-error@-3 {{three above}}",
            "// expected-error@unknown {{nowhere}}",
            "// expected-error-re {{a {{[0-9]+}} b}}",
        ]
    )
    found, problems = parse_expectations(text, "f.mlir", 10)
    assert problems == []
    assert [(e.text, e.line) for e in found] == [
        ("same", 11),
        ("two below", 14),
        ("below", 14),
        ("above", 14),
        ("three above", 13),
        ("nowhere", None),
        ("a {{[0-9]+}} b", 18),
    ]
    assert found[-1].pattern.search("a 42 b") and not found[-1].pattern.search("a x b")
    assert found[0].location == SourceLocation("f.mlir", 11, 8)


def test_unreadable_annotations_are_errors_and_mentions_are_not() -> None:
    text = "\n".join(
        [
            "// expected-error@+x {{bad designator}}",
            "// expected-error {{never closed",
            "// expected-error-re {{bad {{(}} regex}}",
            "// expected-error@-5 {{before the file}}",
            "// the expected-error annotations of this file",
            "// expected-error@below {{nothing below}}",
        ]
    )
    found, problems = parse_expectations(text, "f.mlir")
    assert found == []
    messages = [str(p) for p in problems]
    assert messages[0] == (
        "f.mlir:1:4: error: unknown designator '@+x' "
        "(expected @+N, @-N, @above, @below or @unknown)"
    )
    assert messages[1].startswith("f.mlir:2:4: error: malformed annotation")
    assert messages[2].startswith("f.mlir:3:4: error: invalid regular expression")
    assert messages[3] == "f.mlir:4:4: error: @-5 points before the first line of the file"
    assert messages[4].startswith("f.mlir:6:4: error: @below: there is no line")
    assert len(messages) == 5


def test_unlocated_errors_match_unknown_annotations() -> None:
    unlocated = CompileError("no place")
    assert verify_chunk("// expected-error@unknown {{no place}}", "f.mlir", 0, [unlocated]) == []
    (problem,) = verify_chunk("", "f.mlir", 0, [unlocated])
    assert str(problem) == "error: unexpected error: no place"


def test_expected_errors_are_counted() -> None:
    """Two annotations need two errors; an error matches one annotation."""
    text = "op // expected-error {{same}}\n// expected-error@-1 {{same}}"
    error = CompileError("the same", SourceLocation("f.mlir", 1, 1))
    (problem,) = verify_chunk(text, "f.mlir", 0, [error])
    assert str(problem) == 'f.mlir:2:4: error: expected error "same" was not produced'
    assert verify_chunk(text, "f.mlir", 0, [error, error]) == []


def test_only_errors_are_produced() -> None:
    """fuse-opt emits errors only: an expected warning is never met, even by an error."""
    error = CompileError("careful", SourceLocation("f.mlir", 1, 1))
    problems = verify_chunk("op // expected-warning {{careful}}", "f.mlir", 0, [error])
    assert [str(p).split(": error: ")[1] for p in problems] == [
        "unexpected error: careful",
        'expected warning "careful" was not produced',
    ]


# --split-input-file goes on after a failing chunk (issue 21 item 8)


def test_split_input_file_reports_every_failing_chunk(tmp_path: Path) -> None:
    bad = MALFORMED["verifier"][0]
    path = tmp_path / "in.mlir"
    path.write_text("// -----\n".join([bad, VALID, bad]))
    result = run_cli(str(path), "--split-input-file")
    assert result.returncode == 1
    third = 3 + 2 * (VALID.count("\n") + 1)
    assert result.stderr.splitlines() == [
        f"{path}:3:3: error: 'nn.softmax' op axis 5 is out of range for rank 2",
        f"{path}:{third}:3: error: 'nn.softmax' op axis 5 is out of range for rank 2",
    ]
    assert result.stdout.count("// -----") == 2 and "nn.rms_norm" in result.stdout


@pytest.mark.parametrize("to_file", [True, False])
def test_split_python_output_is_one_python_file(to_file: bool, tmp_path: Path) -> None:
    path, out = tmp_path / "in.mlir", tmp_path / "kernels.py"
    path.write_text(VALID + "// -----\n" + VALID.replace("@f", "@g"))
    args = [str(path), "--split-input-file", "--pipeline", "standard", "-t", "triton"]
    result = run_cli(*args, *(["-o", str(out)] if to_file else []))
    assert result.returncode == 0, result.stderr
    text = out.read_text() if to_file else result.stdout
    ast.parse(text)
    assert "\n# -----\n" in text and "// -----" not in text
    assert "def f(" in text and "def g(" in text


# --help, pass-name and option errors, --time-passes, mlir-opt's names (issue 21 item 9)


def test_help_lists_every_pass_and_option() -> None:
    result = run_cli("--help")
    assert result.returncode == 0, result.stderr
    listing = result.stdout.split("passes and their options", 1)[1]
    for name, factory in registry.all_passes().items():
        assert f"\n  {name} " in listing or f"\n  {name}\n" in listing, name
        for option in pass_options(factory()):
            assert option.signature() in listing, (name, option)
    assert 'dot: str = ""' in listing and "block-rows: int | None = none" in listing


@pytest.mark.parametrize("name", sorted(registry.FUSEOPT_PASSES))
def test_fuseopt_passes_describe_themselves_and_every_option(name: str) -> None:
    """A new pass or option gets a docstring, which --help shows."""
    cls = registry.FUSEOPT_PASSES[name]()
    assert pass_summary(name, cls)
    for option in pass_options(cls):
        assert option.description, f"{name}: option {option.name} has no docstring"


@pytest.mark.parametrize(
    ("spec", "hint"),
    [
        ("nn-fuze", "(did you mean 'nn-fuse'?)"),
        ("cse,canonicalise", "(did you mean 'canonicalize'?)"),
        ("nn-decompse,tile-promot", "(did you mean 'nn-decompose' for 'nn-decompse', "),
        ("frobnicate", "Unrecognized passes: ['frobnicate']; fuse-opt --help lists the passes"),
    ],
)
def test_unknown_pass_names_get_a_suggestion(
    spec: str, hint: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "ok.mlir"
    path.write_text(VALID)
    assert main([str(path), "-p", spec]) == 1
    error = capsys.readouterr().err
    assert error.startswith("fuse-opt: error: Unrecognized passes: ") and hint in error


@pytest.mark.parametrize("value", ["g.dot", "/tmp/out/g.dot", "out/g.dot"])
def test_an_unquoted_option_value_gets_a_hint(
    value: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "ok.mlir"
    path.write_text(VALID)
    assert main([str(path), "-p", f"nn-fuse{{report=false dot={value}}}"]) == 1
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("fuse-opt: error: pass-pipeline:1:")
    assert first.endswith(f'(quote the value: dot="{value}")')


def test_quoting_hint_only_for_option_values() -> None:
    assert quoting_hint("nn-fuse{dot=g.dot}", 14) == 'quote the value: dot="g.dot"'
    assert quoting_hint("nn-f.use", 5) is None  # not in a pass's options
    assert quoting_hint("nn-fuse{a.b=1}", 10) is None  # in an option's name
    assert quoting_hint("cse{x=1},nn-fuse", 13) is None  # after the options closed


@pytest.mark.parametrize("flag", ["--time-passes", "--mlir-timing"])
def test_time_passes_prints_rounded_aligned_times(
    flag: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, out = tmp_path / "in.mlir", tmp_path / "out.mlir"
    path.write_text(VALID)
    assert main([str(path), "-p", "nn-decompose,canonicalize,cse", flag, "-o", str(out)]) == 0
    header, *rows = capsys.readouterr().err.splitlines()
    assert header == "pass timing (wall clock):"
    assert [row.split()[-1] for row in rows] == ["nn-decompose", "canonicalize", "cse", "total"]
    assert all(re.fullmatch(r" +\d+\.\d ms  [a-z-]+", row) for row in rows), rows
    assert len({row.index(" ms") for row in rows}) == 1  # aligned


def test_timing_report_format() -> None:
    report = timing_report([("nn-fuse", 0.01234), ("cse", 0.00004)])
    assert report == (
        "pass timing (wall clock):\n  12.3 ms  nn-fuse\n   0.0 ms  cse\n  12.4 ms  total\n"
    )


def test_mlir_opt_flag_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "in.mlir"
    path.write_text(VALID)
    assert main([str(path), "--mlir-print-op-generic"]) == 0
    assert '"nn.softmax"(' in capsys.readouterr().out
    assert main([str(path), "--mlir-print-debuginfo"]) == 0
    assert f'loc("{path}":3:3)' in capsys.readouterr().out
    assert main([str(path), "-p", "nn-decompose,cse", "--mlir-print-ir-after-all"]) == 0
    captured = capsys.readouterr()
    dumps = [line for line in captured.err.splitlines() if "IR Dump After" in line]
    assert dumps == [
        "// -----// IR Dump After nn-decompose //----- //",
        "// -----// IR Dump After cse //----- //",
    ]
    assert "IR Dump" not in captured.out and "nn.rsqrt" in captured.out


def test_version_is_fuseopts() -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout == f"fuse-opt {fuseopt.__version__}\n"
