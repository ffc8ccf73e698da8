"""The benchmark harness on CPU: quick-mode reports, the correctness gate, the CLI.

Timings here mean nothing; what is tested is that every workload runs, that reports
are written, and above all that a wrong result is caught and never timed.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # benchmarks/ is a top-level directory, not installed
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import accuracy, report, run, traffic  # noqa: E402
from benchmarks.harness import RunConfig, run_instance  # noqa: E402
from benchmarks.machine import Ceilings  # noqa: E402
from benchmarks.systems import Eager, Fuseopt, Prepared, System  # noqa: E402
from benchmarks.workloads import all_workloads, select_workloads  # noqa: E402
from benchmarks.workloads.activations import SOFTMAX  # noqa: E402
from benchmarks.workloads.norms import RMSNORM  # noqa: E402

CPU = torch.device("cpu")
CEILINGS = Ceilings(
    copy_bytes_per_s=1e10, copy_bytes=1 << 20, matmul_flops_per_s=1e11, matmul_size=64
)


class Planted(System):
    """A system computing eager's result, then corrupting it with `corrupt`."""

    def __init__(self, name: str, corrupt):
        self.name = name
        self.description = "planted"
        self.corrupt = corrupt
        self.calls = 0

    def prepare(self, model, make_inputs):
        def fn(*inputs):
            self.calls += 1
            return self.corrupt(model(*inputs))

        return Prepared(fn=fn, compile_cold_s=0.0)


def _one_element(out: torch.Tensor) -> torch.Tensor:
    out = out.clone()
    out.view(-1)[3] += out.abs().max()
    return out


def _run(systems, workload=RMSNORM):
    config = RunConfig(device=CPU, dtype=torch.bfloat16, quick=True, warm_compile=False)
    return run_instance(
        workload, workload.quick_shape, systems, CEILINGS, config, log=lambda _: None
    )


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """Every workload at its quick shape, baselines only (fuseopt is tested below)."""
    out = tmp_path_factory.mktemp("bench")
    status = run.main(["--quick", "--out", str(out), "--no-warm-compile", "--backend", "none"])
    return status, out


def test_quick_run_writes_json_markdown_png(quick_run):
    status, out = quick_run
    assert status == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["complete"] and not doc["timings_meaningful"]
    assert {r["workload"] for r in doc["results"]} == {w.name for w in all_workloads()}
    for r in doc["results"]:
        eager = r["systems"]["eager"]
        assert eager["status"] == "ok", r
        assert eager["time_us"] > 0 and eager["time_us_repeat"] > 0
        assert r["roofline_us"] > 0 and r["min_bytes"] > 0
        assert r["systems"]["max-autotune"]["status"] == "skipped"
        assert "--cpu-compile" in r["systems"]["max-autotune"]["reason"]
    assert doc["ceilings"]["copy_bandwidth_GBps"] > 0
    markdown = (out / "results.md").read_text()
    assert "not meaningful (CPU)" in markdown and "No fuseopt system" in markdown
    assert "| rmsnorm | quick |" in markdown and "speedup.png" in markdown
    assert (out / "speedup.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_quick_run_with_fuseopt_interpret_backend(tmp_path):
    """The default CPU backend (the interpreter): checked, timed, kernels and HBM model."""
    only = "rmsnorm,mlp_stacked"
    assert run.main(["--quick", "--out", str(tmp_path), "--no-warm-compile", "--only", only]) == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    rows = {r["workload"]: r for r in doc["results"]}
    for r in rows.values():
        entry = r["systems"]["fuseopt-interpret"]
        assert entry["status"] == "ok", entry
        assert entry["kernels_compiled"] >= 1 and entry["speedup"]["eager"] > 0
        assert entry["hbm_bytes_model"] == r["fusion_model"]["bytes_after"]
    model = rows["rmsnorm"]["fusion_model"]  # fuseopt's traffic model: one fused kernel
    assert model["kernels_after"] == 1 < model["kernels_before"]
    assert rows["rmsnorm"]["min_bytes"] <= model["bytes_after"] < model["bytes_before"]
    markdown = (tmp_path / "results.md").read_text()
    assert "## HBM traffic (model)" in markdown and "| best fuseopt |" in markdown


def test_report_rerenders_from_json(quick_run, capsys):
    _, out = quick_run
    (out / "results.md").unlink()
    assert report.main([str(out / "results.json")]) == 0
    assert "## Summary" in (out / "results.md").read_text()


@pytest.mark.parametrize(
    ("corrupt", "expect"),
    [
        (lambda y: y * 1.02, "wrong result"),
        (_one_element, "wrong result"),
        (lambda y: torch.where(torch.arange(y.numel()).view(y.shape) == 5, float("nan"), y), "NaN"),
        (lambda y: torch.zeros_like(y), "wrong result"),
        (lambda y: y.float(), "dtype"),
        (lambda y: y[..., :-1], "shape"),
    ],
    ids=["scaled", "one-element", "nan", "unwritten", "dtype", "shape"],
)
def test_planted_wrong_kernel_is_caught_and_not_timed(corrupt, expect):
    planted = Planted("planted", corrupt)
    result = _run([Eager(), planted])
    entry = result["systems"]["planted"]
    assert entry["status"] == "FAILED"
    assert expect in entry["reason"] and "time_us" not in entry
    assert planted.calls == 1  # checked once, never run again for timing
    assert result["systems"]["eager"]["status"] == "ok"


def test_correct_system_with_other_rounding_passes_and_is_timed():
    exact = Planted("f32-then-round", lambda y: y.float().to(torch.bfloat16))
    entry = _run([Eager(), exact])["systems"]["f32-then-round"]
    assert entry["status"] == "ok" and entry["time_us"] > 0 and exact.calls > 1
    assert entry["speedup"]["eager"] > 0


def test_crashing_system_is_recorded_and_the_suite_goes_on():
    def boom(_):
        raise RuntimeError("kernel launch failed")

    result = _run([Planted("crashes", boom), Eager()])
    assert result["systems"]["crashes"]["status"] == "FAILED"
    assert "kernel launch failed" in result["systems"]["crashes"]["reason"]
    assert result["systems"]["eager"]["status"] == "ok"


def test_unavailable_fuseopt_backend_is_na_not_a_crash():
    entry = _run([Eager(), Fuseopt("no-such-backend", None)])["systems"]
    assert entry["fuseopt-no-such-backend"]["status"] == "n/a"
    assert "backend not available" in entry["fuseopt-no-such-backend"]["reason"]


def test_traffic_model_failure_is_recorded_not_raised(monkeypatch):
    import fuseopt

    def refuse(*_):
        raise fuseopt.CompileError("no nn lowering for this op")

    monkeypatch.setattr(fuseopt, "export", refuse)
    model = RMSNORM.make_model(RMSNORM.quick_shape.dims, torch.bfloat16, CPU, 0)
    inputs = RMSNORM.make_inputs(RMSNORM.quick_shape.dims, torch.bfloat16, CPU, 1)
    assert "no nn lowering" in traffic.fusion_traffic(model, inputs)["error"]


def test_merge_keeps_the_fuller_row(quick_run):
    _, out = quick_run
    first = json.loads((out / "results.json").read_text())
    later = copy.deepcopy(first)
    cut, fuller = later["results"][0], later["results"][1]
    for entry in cut["systems"].values():  # a budget-cut later run timed nothing here
        entry.clear()
        entry.update(status="skipped", reason="skipped (time budget of 1 s spent)")
    fuller["systems"]["eager"]["time_us"] = 1.0
    merged = report.merge_runs([first, later])
    rows = {(r["workload"], r["shape"]): r for r in merged["results"]}
    assert len(merged["runs"]) == 2 and len(rows) == len(first["results"])
    assert rows[(cut["workload"], cut["shape"])]["run"] == 0
    assert rows[(fuller["workload"], fuller["shape"])]["run"] == 1
    assert rows[(fuller["workload"], fuller["shape"])]["systems"]["eager"]["time_us"] == 1.0
    markdown = report.render_markdown({**merged, "summary": report.summarize(merged)})
    assert "Merged from 2 runs" in markdown and "run 1: copy bandwidth" in markdown
    later["environment"] = {**later["environment"], "device_name": "another GPU"}
    with pytest.raises(ValueError, match="different devices"):
        report.merge_runs([first, later])


def test_chunked_reference_matches_whole(monkeypatch):
    shape = SOFTMAX.quick_shape
    model = SOFTMAX.make_model(shape.dims, torch.bfloat16, CPU, 0)
    inputs = SOFTMAX.make_inputs(shape.dims, torch.bfloat16, CPU, 1)
    out = model(*inputs)
    whole = accuracy.Reference(SOFTMAX, model, inputs).error_of(out, (out.dtype,))
    monkeypatch.setattr(accuracy, "REFERENCE_CHUNK_BYTES", 64 * 8)
    chunked_ref = accuracy.Reference(SOFTMAX, model, inputs)
    assert chunked_ref.whole is None
    chunked = chunked_ref.error_of(out, (out.dtype,))
    assert chunked.rel_l2 == pytest.approx(whole.rel_l2, rel=1e-9)
    assert chunked.max_rel == pytest.approx(whole.max_rel, rel=1e-9)


@pytest.mark.parametrize("workload", all_workloads(), ids=lambda w: w.name)
def test_workload_weights_are_not_trivial_and_costs_positive(workload):
    for shape in (*workload.shapes, workload.quick_shape):
        assert workload.min_bytes(shape.dims, torch.bfloat16) > 0
    model = workload.make_model(workload.quick_shape.dims, torch.float32, CPU, 3)
    for name, param in model.named_parameters():
        assert not torch.all(param == 1) and param.std() > 0, name


def test_cli_rejects_bad_input(capsys):
    assert run.main(["--quick", "--only", "nope"]) == 2
    assert "unknown workload 'nope'" in capsys.readouterr().err
    assert run.main(["--quick", "--only", "rmsnorm:huge"]) == 2
    assert run.main(["--device", "cpu"]) == 2
    assert "use --quick" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        run.main(["--help"])
    assert exc.value.code == 0


def test_only_selects_shapes():
    [(workload, shape)] = select_workloads(["softmax:4096x8192"])
    assert workload.name == "softmax" and shape.dims == {"rows": 4096, "cols": 8192}
    planned = run.plan_instances(select_workloads(["mlp", "rmsnorm"]), quick=False)
    first = [(w.name, s.label) for _, w, s in planned[:4]]
    assert ("mlp", "small") not in first and ("rmsnorm", "decode") not in first


def test_host_bound_medians_are_marked():
    entry = {"status": "ok", "time_us": 55.7, "kernel_us": 15.1}
    assert report.host_bound(entry) and report._cell(entry) == "55.7*"
    assert not report.host_bound({"status": "ok", "time_us": 60.6, "kernel_us": 57.1})
    assert not report.host_bound({"status": "ok", "time_us": 60.6})  # CPU: no profile


def test_hung_system_is_stopped_and_the_suite_goes_on():
    import time

    def hang(y):
        time.sleep(30)
        return y

    config = RunConfig(
        device=CPU, dtype=torch.bfloat16, quick=True, warm_compile=False, system_timeout_s=3
    )
    started = time.perf_counter()
    result = run_instance(
        RMSNORM,
        RMSNORM.quick_shape,
        [Planted("hangs", hang), Eager()],
        CEILINGS,
        config,
        log=lambda _: None,
    )
    assert time.perf_counter() - started < 15
    entry = result["systems"]["hangs"]
    assert entry["status"] == "skipped" and "per-system limit of 3 s" in entry["reason"]
    assert "time_us" not in entry and result["systems"]["eager"]["status"] == "ok"


def test_summary_by_kernel_time_ignores_host_overhead():
    def result(name, eager, compiled):
        systems = {
            "eager": {"status": "ok", "time_us": eager[0], "kernel_us": eager[1]},
            "torch.compile": {"status": "ok", "time_us": compiled[0], "kernel_us": compiled[1]},
        }
        return {
            "workload": name,
            "shape": "s",
            "bound": "memory",
            "roofline_us": 10.0,
            "systems": systems,
        }

    doc = {
        "config": {"systems": [{"name": "eager"}, {"name": "torch.compile"}]},
        # medians with host overhead in them, over 40 us (eager) and 10 us (compiled) kernels
        "results": [
            result("a", (60.0, 40.0), (60.0, 10.0)),
            result("b", (80.0, 40.0), (20.0, 10.0)),
        ],
    }
    summary = report.summarize(doc)["torch.compile"]
    assert summary["geomean_speedup"]["eager"] == pytest.approx((1.0 * 4.0) ** 0.5)
    assert summary["kernel_geomean_speedup"]["eager"] == pytest.approx(4.0)
    assert summary["kernel_median_pct_roofline_memory_bound"] == pytest.approx(100.0)
    markdown = report._summary_lines({**doc, "summary": report.summarize(doc)})
    assert any(line.startswith("By kernel time") for line in markdown)


def test_launch_cost_chain_is_one_kernel_per_group() -> None:
    """The launch-cost chain compiles to one kernel per fusion group and computes what
    the eager chain does (on the CPU: Triton's interpreter)."""
    import fuseopt
    from benchmarks.launch_cost import SHAPE, chain_source, eager_chain

    f = fuseopt.load_mlir(chain_source(3), backend="triton")
    assert len(f.kernels) == 3
    x = torch.randn(SHAPE)
    torch.testing.assert_close(f(x)[0], eager_chain(3)(x)[0])


def test_top_kernels_rank_by_time_per_call():
    """The per-kernel breakdown every GPU row records (`top_kernels`): summed per name,
    divided by the calls profiled, longest first."""
    from benchmarks.timing import top_kernels

    timed = [("gemm", 30.0), ("add", 2.0), ("gemm", 30.0), ("copy", 25.0), ("add", 2.0)]
    top = top_kernels(timed * 2, calls=2, count=2)
    assert top == (("gemm", 60.0, 2.0), ("copy", 25.0, 1.0))
