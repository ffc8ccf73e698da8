"""benchmarks.host_overhead's report: each system measured in child processes over
several rounds, the median round shown (the GPU measurement itself runs on a GPU only)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmarks import host_overhead


def _result(system: str, us: float, section: str = "llama decode") -> dict:
    return {"section": section, "system": system, "ok": True, "us": us,
            "kernel_us": 100.0, "kernels": 9, "profile": ""}  # fmt: skip


def test_the_median_round_is_shown_with_every_round() -> None:
    rounds = [_result("eager", 300), _result("fuseopt-triton", 900), _result("eager", 100),
              _result("fuseopt-triton", 200), _result("eager", 200),
              _result("fuseopt-triton", 400)]  # fmt: skip
    picked = host_overhead.pick_medians(rounds)
    assert [(r["system"], r["us"], r["rounds"]) for r in picked] == [
        ("eager", 200, [300, 100, 200]),
        ("fuseopt-triton", 400, [900, 200, 400]),
    ]
    assert host_overhead.table_row(picked[1]) == (
        "| fuseopt-triton | yes | 400.0 | 900, 200, 400 | 100.0 | 300.0 | 9 |"
    )


def test_a_failed_round_is_reported() -> None:
    """A child that failed has no shape sections (its section is the instance entry):
    its failure replaces the system's row in every section the other rounds gave, and
    stands alone when no round succeeded."""
    failed = {"section": "llama:decode", "system": "fuseopt-cuda", "ok": False,
              "profile": "", "failed": "RuntimeError: boom"}  # fmt: skip
    picked = host_overhead.pick_medians(
        [_result("eager", 50), _result("fuseopt-cuda", 100), failed, _result("eager", 60)]
    )
    assert [(r["section"], r["system"], "failed" in r) for r in picked] == [
        ("llama decode", "eager", False),
        ("llama decode", "fuseopt-cuda", True),
    ]
    assert "failed: RuntimeError: boom" in host_overhead.table_row(picked[1])
    alone = host_overhead.pick_medians([_result("eager", 50), failed])
    assert [(r["section"], r["system"]) for r in alone] == [
        ("llama decode", "eager"),
        ("llama:decode", "fuseopt-cuda"),
    ]


def test_report_runs_every_system_in_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """main asks a child process for every (round, system) in turn and tabulates the
    medians; a wrong output makes it exit non-zero."""
    calls: list[str] = []

    def child(flag: str, entry: str, name: str, args: object) -> list[dict]:
        calls.append(name)
        result = _result(name, 100.0 + len(calls))
        result["ok"] = name != "torch.compile"
        return [result]

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Fake GPU")
    monkeypatch.setattr(host_overhead, "_in_child", child)
    rc = host_overhead.main(
        ["--models", "llama:decode", "--systems", "torch.compile,fuseopt-triton", "--rounds", "2"]
    )
    assert calls == ["eager", "torch.compile", "fuseopt-triton"] * 2
    assert rc == 1  # torch.compile's output was judged wrong


def test_each_instance_is_written_as_soon_as_it_is_measured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With --out, the report is written after every instance: a run stopped in a later
    instance (a timeout) keeps the earlier ones."""
    out = tmp_path / "report.md"

    def child(flag: str, entry: str, name: str, args: object) -> list[dict]:
        if entry == "gpt2:prefill":
            assert "## llama decode" in out.read_text()  # already on disk
            raise KeyboardInterrupt  # what a timeout's signal does to the run
        return [_result(name, 100.0)]

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Fake GPU")
    monkeypatch.setattr(host_overhead, "_in_child", child)
    with pytest.raises(KeyboardInterrupt):
        host_overhead.main(
            ["--models", "llama:decode,gpt2:prefill", "--systems", "fuseopt-triton",
             "--rounds", "1", "--out", str(out)]
        )  # fmt: skip
    assert "| fuseopt-triton | yes | 100.0 |" in out.read_text()
