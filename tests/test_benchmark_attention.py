"""benchmarks.attention: the share of PyTorch's fastest SDPA (the issue's target metric)
and a CPU run of the plumbing (tiny shapes, Triton's interpreter)."""

from __future__ import annotations

from benchmarks import attention


def _row(case: str, system: str, kernel_us: float, status: str = "ok") -> dict:
    return {"case": case, "system": system, "status": status, "kernel_us": kernel_us}


def test_share_is_against_the_fastest_pytorch_kernel_of_the_same_case() -> None:
    rows = [
        _row("2k", "eager", 210.0),
        _row("2k", "sdpa-cudnn", 200.0),
        _row("2k", "sdpa-efficient", 150.0, status="not run: RuntimeError"),
        _row("2k", "torch.compile", 100.0),  # not PyTorch's SDPA kernel choice: ignored
        _row("2k", "fuseopt-triton", 250.0),
        _row("8k", "fuseopt-triton", 900.0),  # no PyTorch row: left out
    ]
    (share,) = attention.shares_of_fastest(rows)
    assert (share["case"], share["fastest"], share["fastest_us"]) == ("2k", "sdpa-cudnn", 200.0)
    assert share["share"] == 200.0 / 250.0


def test_quick_run_checks_and_tabulates(tmp_path) -> None:  # noqa: ANN001 - pytest's tmp_path
    """The CPU run checks every system against float64 and tabulates it; without a GPU
    profiler there are no kernel times, so no share table."""
    out = tmp_path / "attention.md"
    assert attention.main(["--quick", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.count("| fuseopt-triton |") == len(attention.QUICK)
    assert "FAILED" not in text
    assert "## Against PyTorch's fastest SDPA" not in text
