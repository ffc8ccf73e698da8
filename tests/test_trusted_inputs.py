"""Per-call input checks only where Dynamo's guards do not already hold: a compiled
region trusts the graph inputs it reads contiguously (forward and inference graphs) and
checks the rest (`backends.contract.partly_checked`, `frontends.fx.partition._guarded`)."""

from __future__ import annotations

import pytest
import torch

import fuseopt
from fuseopt.backends.contract import partly_checked
from fuseopt.backends.triton.runtime import TritonFunction


def _recorder() -> tuple[list, list, object, object]:
    checked: list = []
    ran: list = []

    def check(inputs):  # noqa: ANN001, ANN202 - the backend's check: makes inputs fit
        checked.append(inputs)
        return [x.contiguous() for x in inputs]

    def run(inputs):  # noqa: ANN001, ANN202
        ran.append(inputs)
        return tuple(inputs)

    return checked, ran, check, run


def test_trusted_inputs_are_not_checked_and_the_others_are() -> None:
    checked, ran, check, run = _recorder()
    signature = [((2, 3), torch.float32), ((3, 2), torch.float32)]
    call = partly_checked(signature, [True, False], check, run, cuda_only=False)
    a, b = torch.zeros(2, 3), torch.zeros(3, 2)
    call(a, b)
    assert not checked and ran[-1] == (a, b)
    # a trusted input is passed as it is, whatever it is (the caller vouched for it)
    strided = torch.zeros(3, 2).t()
    call(strided, b)
    assert not checked and ran[-1][0] is strided
    # an input not trusted that does not fit goes through the check
    call(a, torch.zeros(2, 3).t())
    assert len(checked) == 1 and ran[-1][1].is_contiguous()
    call(a, torch.zeros(3, 2, dtype=torch.float64))
    assert len(checked) == 2
    call(a)  # another count: the check reports it
    assert len(checked) == 3


def test_trust_of_another_length_trusts_nothing() -> None:
    checked, _, check, run = _recorder()
    call = partly_checked([((2,), torch.float32)], [True, True], check, run, cuda_only=False)
    call(torch.zeros(4)[::2])
    assert len(checked) == 1


def test_cuda_only_checks_the_device() -> None:
    checked, _, check, run = _recorder()
    call = partly_checked([((2,), torch.float32)], [False], check, run, cuda_only=True)
    call(torch.zeros(2))
    assert len(checked) == 1


def _count_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    original = TritonFunction.check

    def counting(self, inputs):  # noqa: ANN001, ANN202
        calls[0] += 1
        return original(self, inputs)

    monkeypatch.setattr(TritonFunction, "check", counting)
    return calls


def test_a_region_of_graph_inputs_checks_none_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every input of the region is a graph input (the model's weights and its
    argument), traced contiguous: no call checks them."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    x = torch.randn(5, 8)
    calls = _count_checks(monkeypatch)
    compiled = fuseopt.compile(model, x, backend="triton")
    with torch.no_grad():
        compiled(x)
        before = calls[0]
        for _ in range(3):
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert calls[0] == before


@pytest.mark.parametrize("strided", ["every_other_column", "transposed"])
def test_a_graph_input_not_dense_is_checked_and_right(strided: str) -> None:
    """A graph input traced with gaps (every other column) is not trusted: the region
    gets it made contiguous. A transposed one is read in its dense order (`layouts`),
    where it is contiguous. Both give eager's result."""

    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2.0) + w

    x = torch.randn(4, 12)[:, ::2] if strided == "every_other_column" else torch.randn(6, 4).t()
    w = torch.randn(4, 6)
    compiled = fuseopt.compile(f, (x, w), backend="triton")
    for _ in range(2):
        torch.testing.assert_close(compiled(x, w), f(x, w))


def test_a_padded_region_output_read_by_another_region_is_checked() -> None:
    """An LM head's padded output (its rows 16412 apart) reaches a second region through
    an op left to PyTorch: not a graph input, so it is checked (made contiguous), not
    read as if it were dense."""

    class Head(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head = torch.nn.Linear(64, 16411, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            logits = self.head(x)
            ranked = torch.sort(logits, dim=-1).values  # runs in PyTorch
            return logits * 0.5 + ranked

    model = Head()
    x = torch.randn(3, 64)
    compiled = fuseopt.compile(model, x, backend="triton")
    assert any("sort" in f.target for f in compiled.fallbacks), compiled.fallbacks
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


def test_reduce_overhead_keeps_its_cuda_graph_wrapper(monkeypatch: pytest.MonkeyPatch) -> None:
    """`mode="reduce-overhead"`: every call goes through the CUDA-graph wrapper (it
    checks its inputs itself), never around it to the wrapped function's plain launches."""
    from fuseopt.backends.cuda_graphs import CudaGraphFunction

    calls = [0]
    original = CudaGraphFunction.__call__

    def counting(self, *inputs):  # noqa: ANN001, ANN002, ANN202
        calls[0] += 1
        return original(self, *inputs)

    monkeypatch.setattr(CudaGraphFunction, "__call__", counting)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    x = torch.randn(5, 8)
    with torch.no_grad():
        compiled = fuseopt.compile(model, x, backend="triton", mode="reduce-overhead")
        for _ in range(3):
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert calls[0] >= 3


def test_a_graph_split_by_ddp_checks_the_pieces_inputs(tmp_path: object) -> None:
    """DDP's optimizer splits a graph into pieces compiled one by one: a later piece's
    inputs are the earlier pieces' outputs (an LM head's, with a padded row pitch), not
    frame inputs Dynamo guards, so they are checked; the result is eager's."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path}/rendezvous", rank=0, world_size=1
    )
    try:
        torch.manual_seed(0)

        class HeadAndGain(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.head = torch.nn.Linear(64, 16411, bias=False)
                self.gain = torch.nn.Parameter(torch.randn(16, 16411))

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return torch.relu(self.head(x) * self.gain + 1.0)

        model = HeadAndGain()
        ddp = DistributedDataParallel(model, bucket_cap_mb=1)
        compiled = torch.compile(ddp, backend="fuseopt", options={"strict": True})
        x = torch.randn(16, 64)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    finally:
        dist.destroy_process_group()
        torch._dynamo.reset()


def test_the_cuda_backend_refuses_trusted_cpu_inputs() -> None:
    """Trusted inputs skip the per-call checks, not the device: CPU tensors given to
    the cuda backend get its clear error (no GPU here; the wrong device on a GPU)."""
    if torch.cuda.is_available():
        pytest.skip("checks the error on a machine without a GPU")
    from fuseopt.diagnostics import DeviceUnavailableError

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU())
    x = torch.randn(5, 8)
    with torch.no_grad(), pytest.raises(DeviceUnavailableError, match="needs an NVIDIA GPU"):
        fuseopt.compile(model, x, backend="cuda")(x)
