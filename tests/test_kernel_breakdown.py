"""benchmarks.kernel_breakdown on a machine without a GPU: a message, not a traceback."""

from __future__ import annotations

import pytest
import torch

from benchmarks import kernel_breakdown


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only path")
def test_without_a_gpu_it_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert kernel_breakdown.main(["--models", "llama:prefill"]) == 0
    assert "needs a CUDA GPU" in capsys.readouterr().out
