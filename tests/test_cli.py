"""fuse-opt and fuseopt.parse on good and malformed input: located errors, no tracebacks."""

from __future__ import annotations

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
        (["-p", ",,"], "Expected pass name here"),
    ],
)
def test_bad_command_line(args: list[str], message: str, tmp_path: Path) -> None:
    path = tmp_path / "ok.mlir"
    path.write_text(VALID)
    result = run_cli(str(path), *args)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert message in result.stderr


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
