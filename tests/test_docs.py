"""The documentation and the code's hygiene, checked as part of the test command:

- `ruff check` and `ruff format --check` pass on the whole repository;
- every relative link in README.md, CHANGELOG.md and docs/*.md names a file in the
  repository, and nothing points at documents the repository does not hold;
- docs/op-reference.md is what `python -m fuseopt.op_reference` renders;
- the README's Python example and its `fuse-opt` command run, as do the examples in
  fuseopt/examples/ (on a CPU: the interpreter or Triton's interpreter);
- a single test file runs alone (the repository's `benchmarks` package is not shadowed
  by the one xDSL installs), and `python -m fuseopt` / `fuse-opt --version` answer.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fuseopt
from fuseopt import op_reference

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *DOCS]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")
OUTSIDE_DOCUMENTS = ("DESIGN.md", "PERFORMANCE.md", "STYLE.md", "logs/triage")
"""Documents that live outside the repository: nothing here may point at them."""
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".mlir", ".cfg", ".txt"}


def _run(*args: str, cwd: Path = ROOT, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.parametrize("argv", [["check", "."], ["format", "--check", "."]], ids=str)
def test_ruff(argv: list[str]) -> None:
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it is in the dev extra)")
    result = _run(ruff, *argv)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_resolve_to_files_in_the_repository(page: Path) -> None:
    text = page.read_text()
    for target, _ in LINK.findall(text):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).resolve().exists(), f"{page.name}: broken link {target}"


def test_nothing_points_at_documents_outside_the_repository() -> None:
    tracked = _run("git", "ls-files").stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    offenders = []
    for name in tracked:
        path = ROOT / name
        if path.suffix not in TEXT_SUFFIXES or path.name == "test_docs.py" or not path.exists():
            continue
        text = path.read_text(errors="replace")
        offenders += [f"{name}: {d}" for d in OUTSIDE_DOCUMENTS if d in text]
    assert not offenders, offenders


def test_op_reference_is_current() -> None:
    committed = (ROOT / "docs" / "op-reference.md").read_text()
    assert committed == op_reference.render(), (
        "docs/op-reference.md is stale: python -m fuseopt.op_reference > docs/op-reference.md"
    )
    for dialect in ("nn", "tile"):
        assert f"## The `{dialect}` dialect" in committed


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


def test_readme_python_example_runs(tmp_path: Path) -> None:
    """The README's example as written (Triton on a CPU runs in Triton's interpreter)."""
    (block,) = [b for b in _python_blocks(ROOT / "README.md") if "fuseopt.compile" in b]
    script = tmp_path / "readme_example.py"
    script.write_text(block)
    result = _run(sys.executable, str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "nn.fusion" in result.stdout or "func.func @forward" in result.stdout
    assert (tmp_path / "kernels" / "index.md").exists()


def test_readme_fuse_opt_command_runs() -> None:
    (command,) = re.findall(
        r"^fuse-opt (fuseopt/examples/\S+ .*)$", (ROOT / "README.md").read_text(), re.M
    )
    result = _run(sys.executable, "-m", "fuseopt", *command.split())
    assert result.returncode == 0, result.stderr
    assert "@triton.jit" in result.stdout


@pytest.mark.parametrize(
    "example", sorted((ROOT / "fuseopt" / "examples").glob("*.py")), ids=lambda p: p.name
)
def test_example_runs(example: Path, tmp_path: Path) -> None:
    result = _run(sys.executable, str(example), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "match" in result.stdout, result.stdout[-2000:]


def test_a_single_test_file_runs_alone(tmp_path: Path) -> None:
    """`pytest tests/test_benchmarks.py` imports the repository's `benchmarks`, not xDSL's."""
    result = _run(
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--co",
        "tests/test_benchmarks.py",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "error" not in result.stdout.lower(), result.stdout[-3000:]


def test_version_is_written_once_and_printed() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    project = pyproject.split("[project]")[1].split("\n[")[0]
    assert 'dynamic = ["version"]' in project and "\nversion =" not in project
    result = _run(sys.executable, "-m", "fuseopt", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"fuse-opt {fuseopt.__version__}", result.stdout
