"""Runs the lit/FileCheck suite under filecheck/ as part of `pytest`.

lit runs once per session (in parallel); each test file then shows up as its own
pytest test, failing with lit's output for that file.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "filecheck"


def _lit_tests() -> list[str]:
    files = [
        p
        for p in SUITE.rglob("*")
        if p.suffix in (".mlir", ".py") and p.name != "lit.cfg.py" and "Output" not in p.parts
    ]
    return sorted(str(p.relative_to(SUITE)) for p in files)


@pytest.fixture(scope="session")
def lit_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str | None]:
    """Run lit over the whole suite; map each test path to None (pass) or its output."""
    report = tmp_path_factory.mktemp("lit") / "results.xml"
    lit = subprocess.run(
        [sys.executable, "-c", "from lit.main import main; main()"]
        + ["-q", "-j2", f"--xunit-xml-output={report}", str(SUITE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if not report.exists():
        pytest.fail(f"lit produced no results:\n{lit.stdout}\n{lit.stderr}")
    results: dict[str, str | None] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        # classname is "fuseopt.<dir with / as .>", name is the file name
        directory = case.get("classname", "").removeprefix("fuseopt").lstrip(".")
        path = "/".join(p for p in (directory.replace(".", "/"), case.get("name", "")) if p)
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        results[path] = None if problem is None else (problem.text or problem.get("message", ""))
    return results


@pytest.mark.parametrize("test_path", _lit_tests())
def test_filecheck(test_path: str, lit_results: dict[str, str | None]) -> None:
    assert test_path in lit_results, f"lit did not run {test_path} (see `lit {SUITE}`)"
    output = lit_results[test_path]
    assert output is None, f"lit test {test_path} failed:\n{output}"
