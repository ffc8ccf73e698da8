"""The breadth suite on CPU: a --quick run writes its JSON and Markdown, a planted wrong
result is FAILED and never timed, budgets record what they skipped and --resume runs
only that. Timings here mean nothing (tiny shapes, interpreters)."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks.breadth import __main__ as breadth
from benchmarks.breadth.cases import ALL_CASES
from benchmarks.harness import RunConfig, run_instance
from benchmarks.machine import Ceilings
from benchmarks.systems import Eager, Prepared, System

CPU = torch.device("cpu")
CEILINGS = Ceilings(
    copy_bytes_per_s=1e10, copy_bytes=1 << 20, matmul_flops_per_s=1e11, matmul_size=64
)


class Perturbed(System):
    """Eager's result, scaled by 1.05: a wrong kernel."""

    name = "perturbed"

    def __init__(self):
        self.calls = 0

    def prepare(self, model, make_inputs):
        def fn(*inputs):
            self.calls += 1
            return model(*inputs) * 1.05

        return Prepared(fn=fn, compile_cold_s=0.0)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """Every case at its quick shape, eager and both CPU fuseopt backends."""
    out = tmp_path_factory.mktemp("breadth")
    status = breadth.main(["--quick", "--out", str(out), "--no-warm-compile", "--no-chart"])
    return status, out


def test_quick_run_writes_json_and_markdown(quick_run):
    status, out = quick_run
    assert status == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["suite"] == "breadth" and doc["complete"] and doc["pending"] == 0
    assert {r["workload"] for r in doc["results"]} == {c.name for c in ALL_CASES}
    for r in doc["results"]:
        eager = r["systems"]["eager"]
        assert eager["status"] == "ok" and eager["time_us"] > 0, r
        for name in ("fuseopt-interpret", "fuseopt-triton"):
            entry = r["systems"][name]
            assert entry["status"] in ("ok", "FAILED"), entry
            if entry["status"] == "ok":  # checked against float64, then timed
                assert entry["error"]["rel_l2"] <= r["tolerance"]["rel_l2"]
                assert entry["time_us"] > 0 and entry["compile_cold_s"] > 0
            else:
                assert "time_us" not in entry
    statuses = {r["workload"]: r["systems"]["fuseopt-triton"]["status"] for r in doc["results"]}
    assert statuses["sum_middle"] == "ok" and statuses["layer_norm_2d"] == "ok"
    markdown = (out / "results.md").read_text()
    assert "# fuseopt breadth benchmarks" in markdown and "By wall time" in markdown
    assert "| worst vs torch.compile |" in markdown and "| host us |" in markdown


def test_planted_wrong_result_is_failed_and_not_timed():
    case = next(c for c in ALL_CASES if c.name == "sum_middle").workload()
    planted = Perturbed()
    config = RunConfig(device=CPU, dtype=torch.bfloat16, quick=True, warm_compile=False)
    result = run_instance(
        case, case.quick_shape, [Eager(), planted], CEILINGS, config, log=lambda _: None
    )
    entry = result["systems"]["perturbed"]
    assert entry["status"] == "FAILED" and "wrong result" in entry["reason"]
    assert "time_us" not in entry and planted.calls == 1


def test_wrong_index_is_caught_exactly():
    case = next(c for c in ALL_CASES if c.name == "argmax_last").workload()

    class OffByOne(Perturbed):
        name = "off-by-one"

        def prepare(self, model, make_inputs):
            def fn(*inputs):
                out = model(*inputs).clone()
                out[0] = (out[0] + 1) % inputs[0].shape[-1]
                return out

            return Prepared(fn=fn, compile_cold_s=0.0)

    config = RunConfig(device=CPU, dtype=torch.bfloat16, quick=True, warm_compile=False)
    result = run_instance(
        case, case.quick_shape, [Eager(), OffByOne()], CEILINGS, config, log=lambda _: None
    )
    entry = result["systems"]["off-by-one"]
    assert entry["status"] == "FAILED" and "1 integer elements differ" in entry["reason"]


def test_budget_skips_rows_and_resume_runs_them(tmp_path):
    only = ["--only", "sum_last,sum_all", "--backend", "interpret", "--no-chart"]
    first = tmp_path / "first"
    assert breadth.main(["--quick", "--out", str(first), "--budget-s", "0", *only]) == 0
    doc = json.loads((first / "results.json").read_text())
    assert doc["pending"] == 2 * 4  # two rows, four systems each, none run
    for r in doc["results"]:
        assert all(e["status"] == "skipped" for e in r["systems"].values())
        assert "time budget" in r["systems"]["eager"]["reason"]
    assert "rerunning with `--resume results.json`" in (first / "results.md").read_text()
    second = tmp_path / "second"
    resume = ["--resume", str(first / "results.json")]
    assert breadth.main(["--quick", "--out", str(second), *resume, *only]) == 0
    merged = json.loads((second / "results.json").read_text())
    assert merged["pending"] == 0 and len(merged["runs"]) == 2
    assert all(r["systems"]["fuseopt-interpret"]["status"] == "ok" for r in merged["results"])


def test_cli_rejects_bad_input(capsys):
    assert breadth.main(["--quick", "--only", "nope"]) == 2
    assert "unknown case 'nope'" in capsys.readouterr().err
    assert breadth.main(["--device", "cpu"]) == 2
    assert "use --quick" in capsys.readouterr().err
    assert breadth.main(["--quick", "--systems", "nope"]) == 2
