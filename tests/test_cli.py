"""fuse-opt and fuseopt.parse on good and malformed input: located errors, no tracebacks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fuseopt
from fuseopt.cli import main

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
    "bad_attribute": (VALID.replace("eps = 1.0e-06 : f64", 'eps = "small"'), "'nn.rms_norm' op"),
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
