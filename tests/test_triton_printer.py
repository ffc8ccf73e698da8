"""The `-t triton` printer: readable, safe source, and located errors.

- no text from the input reaches the source unchecked: function and kernel names that
  try to inject code come out as plain identifiers, and the module's top level holds
  only imports, one constant and function definitions;
- the printed module runs (interpreter) and computes the function;
- what the printer cannot print is a located error, not a traceback.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fuseopt
from fuseopt.backends.kernel_cache import KernelCache
from fuseopt.backends.python_names import sanitize
from fuseopt.backends.triton.backend import compile_module
from fuseopt.backends.triton.printer import print_triton
from fuseopt.pipelines import STANDARD, run_pipeline

EVIL = 'f"); import os; ("'
EXP = """func.func @"f\\"); import os; (\\"" (%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = nn.exp %x : tensor<4x8xf32>
  func.return %e : tensor<4x8xf32>
}"""


def check_module_shape(source: str) -> list[str]:
    """Assert the printed module's top level is imports, INTERPRETED, the workspace
    view function, the allocators and plain defs;
    return the names of the functions it defines."""
    tree = ast.parse(source)
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", node.name)
            names.append(node.name)
        elif isinstance(node, ast.Import):
            assert [a.name for a in node.names][0] in ("os", "torch", "triton", "triton.language")
        elif isinstance(node, ast.ImportFrom):
            assert (node.module, [a.asname for a in node.names]) == (
                "triton.language.extra",
                ["fuseopt_libdevice"],
            )
        elif isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets]  # type: ignore[attr-defined]
            assert targets in (["INTERPRETED"], ["fuseopt_reinterpret"], ["fuseopt_empty"])
        else:
            assert isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    return names


def test_injected_function_name_becomes_an_identifier(tmp_path: Path) -> None:
    module = fuseopt.parse(EXP)
    (f,) = list(module.ops)
    assert f.sym_name.data == EVIL  # type: ignore[attr-defined]
    tiled = run_pipeline(module.clone(), STANDARD)
    source = print_triton(tiled).source
    assert "import os;" not in source and EVIL not in source
    names = check_module_shape(source)
    assert sanitize(EVIL) in names
    fn = compile_module(module, EVIL, {}, KernelCache(tmp_path))
    x = torch.randn(4, 8)
    (y,) = fn(x)
    torch.testing.assert_close(y, torch.exp(x))


def test_injected_kernel_name_in_tile_ir() -> None:
    tiled = run_pipeline(fuseopt.parse(EXP), STANDARD)
    text = str(tiled).replace("@fused_0_exp", '@"k\\"); import sys; (\\"x"')
    source = print_triton(fuseopt.parse(text)).source
    assert "import sys" not in source
    names = check_module_shape(source)
    assert any(n.startswith("k_") for n in names) and any(n.startswith("launch_k_") for n in names)


@pytest.mark.parametrize(
    "text,expected",
    [
        ('f"); import os; ("', "f_import_os"),
        ("123abc", "_123abc"),
        ("class", "class_"),
        ("tl", "tl_"),
        ("__import__", "import_"),
        ("", "v"),
        ("é✓", "v"),
    ],
)
def test_sanitize(text: str, expected: str) -> None:
    assert sanitize(text) == expected


def test_cli_prints_triton_for_the_example() -> None:
    example = Path(fuseopt.__file__).parent / "examples" / "rmsnorm_silu_gate.mlir"
    out = subprocess.run(
        [sys.executable, "-m", "fuseopt.cli", str(example), "--pipeline", "standard", "-t", "triton"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    names = check_module_shape(out)
    kernels = [n for n in names if f"launch_{n}" in names]
    assert len(kernels) == 1 and "rmsnorm_silu_gate" in names
    assert out.count("@triton.jit") == 1 + len(re.findall(r"\ndef fuseopt_", out))


def test_nn_ir_is_a_clear_error() -> None:
    example = Path(fuseopt.__file__).parent / "examples" / "rmsnorm_silu_gate.mlir"
    run = subprocess.run(
        [sys.executable, "-m", "fuseopt.cli", str(example), "-t", "triton"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert re.search(
        r"rmsnorm_silu_gate\.mlir:\d+:\d+: error: -t triton prints tile IR", run.stderr
    )
    assert "--pipeline standard" in run.stderr


def test_unprintable_tile_is_a_located_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text(
        """tile.kernel @odd grid 1 (%x: memref<6xf32>, %y: memref<6xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<6xf32> -> tensor<6xf32>
  tile.store %t, %y[%c0] : tensor<6xf32>, memref<6xf32>
  tile.return
}
"""
    )
    run = subprocess.run(
        [sys.executable, "-m", "fuseopt.cli", str(bad), "-t", "triton"],
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0
    assert "Traceback" not in run.stderr
    assert re.search(r"bad\.mlir:3:\d+: error: .*power-of-two", run.stderr), run.stderr


class FakeCompiled:
    """Stands in for Triton's CompiledKernel: `[grid]` gives a runner."""

    def __init__(self, log: list[str]):
        self.log = log

    def __getitem__(self, grid: tuple[int, ...]):  # noqa: ANN204
        def runner(*args: object) -> None:
            self.log.append(f"fast {grid}")

        return runner


class FakeJit:
    """Stands in for a JITFunction: `[grid](*args, **options)` compiles and launches."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def __getitem__(self, grid: tuple[int, ...]):  # noqa: ANN204
        def run(*args: object, **options: object) -> FakeCompiled:
            self.log.append(f"jit {grid}")
            return FakeCompiled(self.log)

        return run


def test_fast_launcher_skips_the_jit_after_the_first_launch() -> None:
    from fuseopt.backends.triton.launchers import FastLauncher

    jit = FakeJit()
    launch = FastLauncher(jit, (4,), num_warps=4, num_stages=1)
    a, b = torch.empty(64), torch.empty(64)
    launch(a, b)
    launch(a, b)
    launch(a, b, grid=(2,))  # another grid: the JIT once more, then fast
    launch(a, b, grid=(2,))
    launch(a[1:], b)  # a misaligned pointer: Triton specialized on alignment, so the JIT
    launch(a, b)
    assert jit.log == [
        "jit (4,)", "fast (4, 1, 1)", "jit (2,)", "fast (2, 1, 1)", "jit (4,)", "fast (4, 1, 1)"
    ]  # fmt: skip


def test_fast_launcher_installs_a_plain_launcher_for_the_printed_grid() -> None:
    from fuseopt.backends.triton.launchers import FastLauncher

    jit, installed = FakeJit(), []
    launcher = FastLauncher(jit, (4,), num_warps=4, num_stages=1, install=installed.append)
    a, b = torch.empty(64), torch.empty(64)
    launcher(a, b)  # compiles; the printed grid now has a direct runner
    assert len(installed) == 1 and installed[0] is not launcher
    launch = installed[0]
    launch(a, b)
    launch(a, b, grid=(2,))  # another grid: through the FastLauncher
    launch(a[1:], b)  # misaligned: the JIT
    assert jit.log == ["jit (4,)", "fast (4, 1, 1)", "jit (2,)", "jit (4,)"]
