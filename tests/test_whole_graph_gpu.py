"""mode="reduce-overhead" replays one CUDA graph over a whole inference graph (regions
and the PyTorch ops between them: `frontends/fx/whole_graph.py`), on a GPU.

Skipped without a CUDA GPU. An attention block whose attention runs in PyTorch
(attention="eager") between compiled regions, on both backends: results equal the
plain compiled model's exactly, on repeated and fresh input buffers, with earlier
results held by the caller; the whole graph records one graph that copies the fresh
activation and reads the weights in place, the regions record none of their own while
the caller drops results (held results run the whole graph plainly, and the regions
then replay their own graphs); a buffer the model updates in place ends as eager's; a
whole graph whose capture fails leaves the regions to replay graphs of their own.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import fuseopt
from fuseopt.backends.cuda_graphs import CudaGraphFunction
from fuseopt.frontends.fx.whole_graph import WholeGraph

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


class AttentionBlock(nn.Module):
    """Pre-norm causal self-attention with a residual: PyTorch's SDPA between two
    compiled regions (attention="eager")."""

    def __init__(self, dim: int = 256, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + torch.relu(self.out(a.transpose(1, 2).reshape(b, t, d)))


def _block() -> AttentionBlock:
    torch.manual_seed(0)
    return AttentionBlock().to("cuda", torch.bfloat16).eval()


def _x(seed: int) -> torch.Tensor:
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(2, 64, 256, device="cuda", dtype=torch.bfloat16, generator=g)


def _region_graphs(compiled: fuseopt.CompiledModule) -> list[int]:
    return [
        sum(len(pool) for pool in r.compiled.graphs.values())
        for r in compiled.regions
        if isinstance(r.compiled, CudaGraphFunction)
    ]


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_one_graph_replays_regions_and_pytorch_attention(backend: str) -> None:
    model = _block()
    x = _x(1)
    with torch.no_grad():
        plain = fuseopt.compile(model, x, backend=backend, attention="eager", strict=True)
        graphed = fuseopt.compile(
            model, x, backend=backend, mode="reduce-overhead", attention="eager", strict=True
        )
        for seed in range(2, 6):  # results dropped: the same buffer, then fresh ones
            x.copy_(_x(seed))
            torch.testing.assert_close(graphed(x), plain(x), rtol=0, atol=0)
            fresh = _x(seed + 10)  # copied into the graph's buffer
            torch.testing.assert_close(graphed(fresh), plain(fresh), rtol=0, atol=0)
        (whole,) = graphed.record.whole_graphs.values()
        instances = [g for pool in whole.graphs.values() for g in pool]
        assert instances, "no whole graph was recorded"
        assert max(len(g.copied) for g in instances) == 1  # the activation; weights in place
        assert not any(_region_graphs(graphed)), "a region recorded a graph of its own"

        held = []  # results held: a second instance, then plain runs (regions' own graphs)
        for seed in range(20, 30):
            fresh = _x(seed)
            held.append((graphed(fresh), plain(fresh)))
        for got, want in held:  # the same kernels: bit for bit; none overwritten
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        torch.testing.assert_close(held[-1][0], model(fresh), rtol=2e-2, atol=2e-2)
        del held, got, want
        records = dict(whole.book.records)
        regions = _region_graphs(graphed)
        for seed in range(30, 36):  # results dropped again: the recorded graphs replay
            fresh = _x(seed)
            torch.testing.assert_close(graphed(fresh), plain(fresh), rtol=0, atol=0)
        assert whole.book.records == records, "the later calls recorded again"
        assert _region_graphs(graphed) == regions, "a region recorded while the whole replayed"
    assert any("attention" in f.target for f in graphed.fallbacks), graphed.fallbacks
    assert isinstance(whole.fn, WholeGraph)


def test_a_buffer_updated_in_place_ends_as_eagers() -> None:
    """A running sum kept in a buffer (written back by AOTAutograd after the graph)."""

    class Accumulate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(64, 64)
            self.register_buffer("total", torch.zeros(8, 64))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.sort(torch.relu(self.lin(x)), dim=-1).values  # sort: PyTorch
            self.total.add_(y)
            return y * 2

    torch.manual_seed(0)
    eager = Accumulate().cuda()
    model = Accumulate().cuda()
    model.load_state_dict(eager.state_dict())
    with torch.no_grad():
        graphed = fuseopt.compile(model, _x(0)[0, :8, :64].float(), mode="reduce-overhead")
        model.total.zero_()
        eager.total.zero_()
        for seed in range(6):
            x = _x(seed)[0, :8, :64].float()
            torch.testing.assert_close(graphed(x), eager(x), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(model.total, eager.total, rtol=1e-4, atol=1e-4)
    (whole,) = graphed.record.whole_graphs.values()
    assert any(whole.graphs.values()), "the graph was not replayed whole"


def test_regions_replay_their_own_graphs_when_the_whole_graph_cannot_be_captured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def failing(self: WholeGraph, interpret: bool) -> object:  # noqa: ARG001
        def run(*inputs: torch.Tensor, device: torch.device) -> object:  # noqa: ARG001
            raise RuntimeError("cannot be captured")

        return run

    monkeypatch.setattr(WholeGraph, "host", failing)
    model = _block()
    with torch.no_grad():
        plain = fuseopt.compile(model, _x(1), backend="triton", attention="eager", strict=True)
        graphed = fuseopt.compile(
            model, _x(1), backend="triton", mode="reduce-overhead", attention="eager", strict=True
        )
        for seed in range(2, 8):
            x = _x(seed)
            torch.testing.assert_close(graphed(x), plain(x), rtol=0, atol=0)
    (whole,) = graphed.record.whole_graphs.values()
    assert whole.broken
    assert any(_region_graphs(graphed)), "no region recorded a graph after the failure"


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_merged_linears_replay_whole_reading_the_packed_weights_in_place(backend: str) -> None:
    """Three linear layers of one input merged into one GEMM over packed weights: the
    weights move into one buffer at the first call, and the whole graph recorded after
    it reads that buffer in place (it copies the activation at most)."""

    class ThreeHeads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k, self.v = (nn.Linear(256, 256) for _ in range(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            s = torch.sort(self.q(x) * torch.sigmoid(self.k(x)), dim=-1).values  # PyTorch
            return s + self.v(x)

    torch.manual_seed(0)
    model = ThreeHeads().to("cuda", torch.bfloat16).eval()
    with torch.no_grad():
        want = [model(_x(seed)) for seed in range(2, 10)]
        graphed = fuseopt.compile(
            model, _x(1), backend=backend, mode="reduce-overhead", merge_linears=True, strict=True
        )
        for seed, w in zip(range(2, 10), want, strict=True):
            torch.testing.assert_close(graphed(_x(seed)), w, rtol=2e-2, atol=2e-2)
    storages = {p.untyped_storage().data_ptr() for p in (model.q.weight, model.k.weight)}
    assert len(storages) == 1, "the weights were not packed"
    (whole,) = graphed.record.whole_graphs.values()
    instances = [g for pool in whole.graphs.values() for g in pool]
    copied = [[tuple(b.shape) for b in g.buffers] for g in instances]
    # the activation at most (a fresh one often reuses the freed one's address: pinned
    # then, until it moves), never a weight
    assert copied and all(c in ([], [(2, 64, 256)]) for c in copied), copied
