"""The model suite on CPU: tiny Hugging Face models (random weights, no download) in
prefill, decode (KV cache) and training through --quick runs that write JSON and
Markdown; a planted wrong result is FAILED and never timed, in inference and in a
training step. Skipped when `transformers` is not installed. Timings mean nothing."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers", reason="the model suite needs transformers (the test extra)")

from benchmarks.harness import RunConfig, run_instance  # noqa: E402
from benchmarks.machine import Ceilings  # noqa: E402
from benchmarks.models import __main__ as models  # noqa: E402
from benchmarks.models import select_models  # noqa: E402
from benchmarks.models.training import TrainingSystem  # noqa: E402
from benchmarks.systems import Eager, Prepared, System  # noqa: E402

CPU = torch.device("cpu")
CEILINGS = Ceilings(
    copy_bytes_per_s=1e10, copy_bytes=1 << 20, matmul_flops_per_s=1e11, matmul_size=64
)
INTERPRET = "fuseopt-interpret,torch.compile(fuseopt-interpret)"


class Perturbed(System):
    """The module's result (a tensor or a tuple), the first output scaled by 1.05."""

    name = "perturbed"

    def __init__(self):
        self.calls = 0

    def prepare(self, model, make_inputs):
        def fn(*inputs):
            self.calls += 1
            out = model(*inputs)
            return out * 1.05 if isinstance(out, torch.Tensor) else (out[0] * 1.05, *out[1:])

        return Prepared(fn=fn, compile_cold_s=0.0)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """Llama in all three scenarios and BERT prefill (padding mask), through fuseopt's
    interpreter backend by fuseopt.compile and by torch.compile(backend="fuseopt")."""
    out = tmp_path_factory.mktemp("models")
    argv = ["--quick", "--out", str(out), "--no-warm-compile", "--no-chart"]
    status = models.main([*argv, "--only", "llama,bert:prefill", "--systems", INTERPRET])
    return status, out


def test_quick_run_writes_json_and_markdown(quick_run):
    status, out = quick_run
    assert status == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["suite"] == "models" and doc["complete"]
    rows = {(r["workload"], r["shape"]): r for r in doc["results"]}
    assert set(rows) == {("llama", s) for s in ("prefill", "decode", "train")} | {
        ("bert", "prefill")
    }
    for (name, scenario), r in rows.items():
        assert r["reference_dtype"] == "float32"
        for system in ("eager", *INTERPRET.split(",")):
            entry = r["systems"][system]
            assert entry["status"] == "ok", (name, scenario, system, entry)
            assert entry["time_us"] > 0 and entry["error"]["rel_l2"] <= r["tolerance"]["rel_l2"]
        assert r["systems"]["fuseopt-interpret"]["compile_cold_s"] > 0
    assert rows[("llama", "decode")]["dims"]["context"] == 8
    assert rows[("llama", "train")]["systems"]["fuseopt-interpret"]["kernels_compiled"] > 0
    markdown = (out / "results.md").read_text()
    assert "# fuseopt model benchmarks" in markdown and "By wall time" in markdown
    assert "| llama | train |" in markdown and "## Ops run eagerly" in markdown


@pytest.mark.parametrize("scenario", ["prefill", "decode"])
def test_llama_through_triton_interpreter(tmp_path, scenario):
    """The Triton backend compiles every region of a Llama prefill (one builds only
    constants: positions and the causal mask) and decode step, and is right."""
    argv = ["--quick", "--out", str(tmp_path), "--no-warm-compile", "--no-chart"]
    only = ["--only", f"llama:{scenario}", "--systems", "fuseopt-triton"]
    assert models.main([*argv, *only]) == 0
    [row] = json.loads((tmp_path / "results.json").read_text())["results"]
    entry = row["systems"]["fuseopt-triton"]
    assert entry["status"] == "ok" and entry["kernels_compiled"] > 0, entry


@pytest.mark.parametrize("scenario", ["prefill", "train"])
def test_planted_wrong_result_is_failed_and_not_timed(scenario):
    [workload] = select_models([f"llama:{scenario}"])
    planted = Perturbed()
    systems = [Eager(), planted]
    if scenario == "train":
        systems = [TrainingSystem(s) for s in systems]
    config = RunConfig(device=CPU, dtype=torch.bfloat16, quick=True, warm_compile=False)
    result = run_instance(
        workload, workload.quick_shape, systems, CEILINGS, config, log=lambda _: None
    )
    entry = result["systems"]["perturbed"]
    assert entry["status"] == "FAILED" and "wrong result" in entry["reason"], entry
    assert "time_us" not in entry
    assert planted.calls == (2 if scenario == "train" else 1)  # compile step + check only
    assert result["systems"]["eager"]["status"] == "ok"


def test_cli_rejects_bad_input(capsys):
    assert models.main(["--quick", "--only", "bert:decode"]) == 2
    assert "unknown model row 'bert:decode'" in capsys.readouterr().err
    assert models.main(["--device", "cpu"]) == 2
    assert "use --quick" in capsys.readouterr().err


def test_missing_transformers_skips_cleanly(monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "transformers", None)
    assert models.main(["--quick"]) == 0
    assert "transformers` is not installed" in capsys.readouterr().out


def test_generate_benchmark_counts_compiles(tmp_path) -> None:
    """`benchmarks.generate --quick`: a greedy generate with a growing KV cache through
    fuseopt gives eager's tokens (float32) and compiles a bounded number of graphs (the
    prefill, the first decode step, the decode graph with the cache length symbolic),
    not one per token; the record names the ops left to PyTorch."""
    from benchmarks import generate

    out = tmp_path / "generate.json"
    argv = ["--quick", "--tokens", "6", "--prompt", "4", "--models", "llama"]
    argv += ["--systems", "eager,fuseopt-triton", "--dtype", "float32", "--out", str(out)]
    assert generate.main(argv) == 0
    doc = json.loads(out.read_text())
    assert doc["environment"]["torch"] == torch.__version__
    eager, fused = doc["rows"]
    assert eager["system"] == "eager" and eager["tokens_equal_eager"]
    assert fused["tokens_equal_eager"], fused
    assert 2 <= fused["dynamo_graphs"] <= 3 and fused["fuseopt_graphs"] <= 3, fused
    assert fused["fallbacks"] and all("symbolic size" in reason for reason in fused["fallbacks"]), (
        fused["fallbacks"]
    )
