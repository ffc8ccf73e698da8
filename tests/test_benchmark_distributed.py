"""The distributed benchmark on CPU: ``python -m benchmarks.distributed --quick`` at world
size 2 (gloo, the suite's quick two-layer Llama, fuseopt's interpreter) writes
results.json and results.md with a row per strategy and system; runs merge into one
record by world size; bad arguments exit with status 2. Timings mean nothing here.
Skipped without `transformers` or the gloo backend."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers", reason="the benchmark's Llama needs transformers")

from benchmarks.distributed import __main__ as bench  # noqa: E402
from benchmarks.distributed import report  # noqa: E402
from benchmarks.distributed.launch import Rank, unavailable_reason  # noqa: E402
from benchmarks.distributed.parallel import STRATEGIES  # noqa: E402

_GLOO = unavailable_reason("cpu")
pytestmark = pytest.mark.skipif(_GLOO is not None, reason=f"no gloo process group: {_GLOO}")

WORLD_SIZE = 2


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    """One --quick run at world size 2 (compile caches in fresh temporary folders)."""
    out = tmp_path_factory.mktemp("distributed")
    with pytest.MonkeyPatch.context() as env:
        for variable in ("FUSEOPT_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
            env.setenv(variable, str(tmp_path_factory.mktemp(variable.lower())))
        status = bench.main(["--quick", "--world-size", str(WORLD_SIZE), "--out", str(out)])
    return status, out


@pytest.mark.slow
def test_quick_run_writes_json_and_markdown(quick_run: tuple[int, Path]) -> None:
    status, out = quick_run
    assert status == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["schema"] == report.SCHEMA
    (run,) = doc["runs"]
    assert run["world_size"] == WORLD_SIZE and run["quick"] and not run["timings_meaningful"]
    rows = {(r["strategy"], r["system"]): r for r in doc["results"]}
    systems = ("eager", "torch.compile", "fuseopt-interpret")
    assert set(rows) == {(s, n) for s in STRATEGIES for n in systems}
    for strategy in STRATEGIES:
        for system in ("eager", "fuseopt-interpret"):
            row = rows[(strategy, system)]
            assert row["status"] == "ok", row
            assert row["step_ms"] > 0 and row["tokens_per_s"] > 0
            assert len(row["rank_step_ms"]) == WORLD_SIZE
        fuseopt = rows[(strategy, "fuseopt-interpret")]
        assert fuseopt["compile_s"] > 0 and fuseopt["kernels"] > 0
        assert fuseopt["error_vs_eager_rel_l2"] <= 1e-4
        assert rows[(strategy, "torch.compile")]["status"] == "skipped"  # CPU: no Inductor
    assert rows[("ddp", "eager")]["tokens_per_step"] == WORLD_SIZE * 16  # every rank's batch
    assert rows[("tp", "eager")]["tokens_per_step"] == 16  # one shared prompt
    markdown = (out / "results.md").read_text()
    assert markdown.startswith(f"# {report.TITLE}") and "Timings not meaningful" in markdown
    assert f"| {WORLD_SIZE} | fsdp | train | fuseopt-interpret |" in markdown


def _row(world_size: int, system: str, step_ms: float) -> dict:
    return {
        "world_size": world_size,
        "strategy": "ddp",
        "scenario": "train",
        "system": system,
        "dims": {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "intermediate": 128}
        | {"vocab": 256, "batch": 1, "seq": 16},
        "status": "ok",
        "step_ms": step_ms,
        "tokens_per_s": 16 / step_ms,
        "compile_s": None,
    }


def _writer(out: Path, world_size: int) -> report.Writer:
    config = SimpleNamespace(
        out=str(out), merge=True, command="test", dtype="f32", quick=True, warmup=0, steps=1
    )
    return report.Writer(Rank(0, world_size, torch.device("cpu")), config)


def test_runs_merge_by_world_size(tmp_path: Path) -> None:
    """A run replaces the rows it measures again and keeps the other world sizes'."""
    first = _writer(tmp_path, 1)
    first.add(_row(1, "eager", 4.0))
    first.add(_row(1, "fuseopt-triton", 2.0))
    second = _writer(tmp_path, 2)
    second.add(_row(2, "eager", 3.0))
    second.add(_row(1, "eager", 5.0))
    doc = json.loads((tmp_path / "results.json").read_text())
    assert len(doc["runs"]) == 2
    measured = {(r["world_size"], r["system"]): (r["step_ms"], r["run"]) for r in doc["results"]}
    assert measured == {
        (1, "eager"): (5.0, 1),
        (1, "fuseopt-triton"): (2.0, 0),
        (2, "eager"): (3.0, 1),
    }
    markdown = (tmp_path / "results.md").read_text()
    assert "| 1 | ddp | train | fuseopt-triton | 2.00 |" in markdown
    assert "| 2.50x |" in markdown  # against world size 1's latest eager row


@pytest.mark.parametrize(
    "argv",
    [
        ["--quick", "--world-size", "0"],
        ["--quick", "--strategies", "pp"],
        ["--quick", "--systems", "nonesuch"],
        *([["--world-size", "2"]] if not torch.cuda.is_available() else []),
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(argv) == 2
    assert "error:" in capsys.readouterr().err
