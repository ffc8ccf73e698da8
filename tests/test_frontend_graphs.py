"""Small graphs, eager fallback, training, shapes, `torch.compile(backend="fuseopt")`
all through the interpret backend against eager PyTorch (API and errors:
test_frontend_api.py; Hugging Face blocks: test_frontend_hf.py)."""

from __future__ import annotations

import logging

import pytest
import torch
import torch.nn.functional as F
from test_frontend_common import MLP, assert_close, check, randn, randomize
from torch import nn

import fuseopt


class RMSNorm(nn.Module):
    """The Llama-style RMSNorm, written out (as Hugging Face does)."""

    def __init__(self, d: int = 8, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class ConvSandwich(nn.Module):
    """Elementwise work, a convolution (no nn lowering), more elementwise work."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(x) * 2 + 1
        y = self.conv(y)
        return torch.softmax(y * 0.5, -1) + torch.relu(x)


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_small_graphs(dtype: torch.dtype) -> None:
    """MLP, RMSNorm, attention-like scores, SwiGLU: compiled whole, match eager."""
    x = randn(2, 4, 8, dtype=dtype)
    check(randomize(MLP()).to(dtype), [x], dtype=dtype)
    check(randomize(RMSNorm()).to(dtype), [x], dtype=dtype)

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = (q @ k.transpose(-1, -2)) * 0.35
        mask = torch.full((4, 4), float("-inf"), dtype=q.dtype).triu(1)
        return torch.softmax(scores + mask, -1) @ v

    q, k, v = (randn(2, 4, 8, dtype=dtype, seed=s) for s in (1, 2, 3))
    compiled = check(attention, [q, k, v], dtype=dtype, allow_fallback=True)
    assert {f.target for f in compiled.fallbacks} <= {"aten.triu.default"}

    def swiglu(x: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor) -> torch.Tensor:
        return F.silu(x @ wg) * (x @ wu)

    check(swiglu, [x, randn(8, 16, dtype=dtype, seed=4), randn(8, 16, dtype=dtype, seed=5)])


def test_fallback_conv_between_elementwise(caplog: pytest.LogCaptureFixture) -> None:
    """The conv runs eagerly, the elementwise regions around it are compiled, the
    result matches eager, and one log line names the op and why."""
    model = randomize(ConvSandwich())
    x = randn(2, 4, 8)
    with caplog.at_level(logging.WARNING, logger="fuseopt"):
        compiled = check(model, [x], allow_fallback=True)
    assert [f.target for f in compiled.fallbacks] == ["aten.convolution.default"]
    assert compiled.fallbacks[0].location is not None
    assert compiled.fallbacks[0].location.file == __file__
    assert len(compiled.regions) == 2  # before and after the conv
    assert {k.region for k in compiled.kernels} == {r.func_name for r in compiled.regions}
    lines = [r.getMessage() for r in caplog.records if r.name == "fuseopt"]
    assert len(lines) == 1
    assert "aten.convolution.default" in lines[0] and "no nn lowering" in lines[0]
    report = compiled.fusion_report()
    assert "aten.convolution.default" in report and "2 region(s)" in report


def test_fallback_unsupported_dtype() -> None:
    """float64 is outside the type table: the op runs eagerly, results still match."""
    x = randn(4, 8).double()
    compiled = check(lambda a: torch.exp(a) + 1, [x], allow_fallback=True)
    assert compiled.fallbacks and "float64" in compiled.fallbacks[0].reason


def _grads(model: nn.Module, x: torch.Tensor, run: object) -> list[torch.Tensor]:
    model.zero_grad()
    x = x.clone().requires_grad_(True)
    out = run(x)
    (out * torch.linspace(-1, 1, out.shape[-1])).sum().backward()
    return [x.grad, *[p.grad for p in model.parameters()]]


@pytest.mark.parametrize(
    "make", [MLP, RMSNorm, lambda: nn.LayerNorm(8)], ids=["mlp", "rmsnorm", "layernorm"]
)
def test_gradients_match_eager(make: object) -> None:
    """The backward graph goes through the importer; gradients match eager."""
    model = randomize(make())
    x = randn(3, 8, seed=7)
    expected = _grads(model, x, model)
    compiled = fuseopt.compile(model, backend="interpret")
    actual = _grads(model, x, compiled)
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)
    assert any(g.startswith("backward") for g in compiled.record.graphs)
    assert any(k.region.startswith("backward") for k in compiled.kernels)
    assert not [f for f in compiled.fallbacks if f.graph.startswith("backward")], (
        compiled.fusion_report()
    )


def test_gradients_through_views() -> None:
    """Backward of slicing, select, cat, split, transpose and broadcasting (which make
    slice_backward, select_backward, sum-to-size and concat in the backward graph)."""

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), -1)  # rotate_half
        a, b = (x * w).split([3, 5], -1)
        picked = x[:, 1].unsqueeze(1) * x[:, 2:5:1].sum(1, keepdim=True)
        return (rotated * w).sum(-1) + a.sum(-1) * b.mean(-1) + picked.sum(-1)

    x0, w0 = randn(3, 8, seed=3), randn(8, seed=4)
    weights = torch.linspace(-1, 1, 3)

    def grads(run: object) -> list[torch.Tensor]:
        x, w = x0.clone().requires_grad_(True), w0.clone().requires_grad_(True)
        (run(x, w) * weights).sum().backward()
        return [x.grad, w.grad]

    expected = grads(fn)
    compiled = fuseopt.compile(fn, backend="interpret")
    for a, e in zip(grads(compiled), expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    assert not compiled.fallbacks, compiled.fusion_report()
    assert any(k.region.startswith("backward") for k in compiled.kernels)


def test_new_shape_recompiles() -> None:
    """Static shapes per compilation; a new shape recompiles and stays correct."""
    model = randomize(MLP())
    compiled = fuseopt.compile(model, randn(2, 8), backend="interpret")
    with torch.no_grad():
        for rows in (2, 5, 3):
            x = randn(rows, 8, seed=rows)
            assert_close(compiled(x), model(x))
    assert len(compiled.record.graphs) >= 3


@pytest.mark.parametrize("dynamic", [False, None, True], ids=["static", "auto", "dynamic"])
def test_torch_compile_shapes(dynamic: bool | None, caplog: pytest.LogCaptureFixture) -> None:
    """`torch.compile(backend="fuseopt")` over changing shapes: static recompiles per
    shape; automatic dynamic shapes (the default: the first shape static, the second
    symbolic) and dynamic=True trace the rows as one symbolic size, which fuseopt
    compiles once for every size; nothing falls back and every result matches eager,
    forward and backward."""
    model = randomize(MLP())
    with caplog.at_level(logging.DEBUG, logger="fuseopt"):
        compiled = torch.compile(
            model, backend="fuseopt", options={"backend": "interpret"}, dynamic=dynamic
        )
        with torch.no_grad():
            for rows in (2, 6, 4, 6):
                x = randn(rows, 8, seed=rows)
                assert_close(compiled(x), model(x))
        x = randn(5, 8, seed=5)
        expected = _grads(model, x, model)
        for a, e in zip(_grads(model, x, compiled), expected, strict=True):
            torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)
    messages = [r.getMessage() for r in caplog.records if r.name == "fuseopt"]
    assert not [m for m in messages if "run eagerly" in m], messages
    compiled_regions = [m for m in messages if m.startswith("fuseopt: compiled ")]
    # inference: 3 static shapes; or the first shape, then the symbolic graph; or only
    # the symbolic graph. Then forward + backward (symbolic except when static)
    expected = {False: 3, None: 2, True: 1}[dynamic] + 2
    assert len(compiled_regions) == expected, compiled_regions


def test_specializations_are_bounded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Past the specialization limit, new shapes of a graph specialized per shape
    (symbolic="specialize") run eagerly (one warning) and stay correct."""
    from fuseopt.frontends.fx import shape_versions

    monkeypatch.setattr(shape_versions, "MAX_SPECIALIZATIONS", 1)
    model = randomize(MLP())
    compiled = torch.compile(
        model,
        backend="fuseopt",
        options={"backend": "interpret", "symbolic": "specialize"},
        dynamic=True,
    )
    with caplog.at_level(logging.WARNING, logger="fuseopt"), torch.no_grad():
        for rows in (2, 3, 4, 3):
            x = randn(rows, 8, seed=rows)
            assert_close(compiled(x), model(x))
    lines = [r.getMessage() for r in caplog.records if r.name == "fuseopt"]
    assert len(lines) == 1 and "more than 1 input shapes" in lines[0]


def decode_step(x: torch.Tensor, cache: torch.Tensor, w: torch.Tensor) -> tuple:
    """A decode step in miniature: static work on the new token, a cache that grows by
    one row per call, attention over it, static work again."""
    h = torch.tanh(x @ w) * 2 + 1
    keys = torch.cat([cache, h], 0)
    scores = torch.softmax(keys @ h.T * 0.5, 0)
    read = (scores * keys).sum(0, keepdim=True)
    return torch.sigmoid(read) * h + w.sum(0) * (cache.shape[0] + 1), keys


@pytest.mark.parametrize("symbolic", ["auto", "partition"])
def test_symbolic_graph_compiles_once(symbolic: str, caplog: pytest.LogCaptureFixture) -> None:
    """A graph whose symbolic size touches few ops (a growing cache) is compiled once:
    the ops with symbolic sizes run in PyTorch, logged; the rest is compiled; the
    symbolic size read as a scalar is never baked in; every result matches eager."""
    w = randn(8, 8, seed=1)
    compiled = torch.compile(
        decode_step, backend="fuseopt", options={"backend": "interpret", "symbolic": symbolic}
    )
    regions_after_call = []
    with caplog.at_level(logging.DEBUG, logger="fuseopt"):
        for rows in range(2, 8):
            x, cache = randn(1, 8, seed=rows), randn(rows, 8, seed=10 + rows)
            for a, e in zip(compiled(x, cache, w), decode_step(x, cache, w), strict=True):
                assert_close(a, e)
            regions_after_call.append(
                sum(r.getMessage().startswith("fuseopt: compiled ") for r in caplog.records)
            )
    # the first call compiles statically, the second the symbolic graph, then nothing
    assert regions_after_call[0] >= 1 and regions_after_call[1] > regions_after_call[0]
    assert len(set(regions_after_call[1:])) == 1, regions_after_call
    messages = [r.getMessage() for r in caplog.records if r.name == "fuseopt"]
    compiled_graphs = [m for m in messages if m.startswith("fuseopt: a graph with symbolic")]
    assert len(compiled_graphs) == 1 and "compiled once" in compiled_graphs[0], messages
    fallbacks = [m for m in messages if "run eagerly" in m]
    assert fallbacks and "symbolic size" in fallbacks[-1], messages
    assert "aten.tanh" not in fallbacks[-1] and "aten.sigmoid" not in fallbacks[-1]


class MaskedAttention(nn.Module):
    """SDPA with an optional key-padding mask, viewed to [B, 1, 1, S]."""

    def forward(self, q, k, v, keep=None):  # noqa: ANN001, ANN201
        mask = None if keep is None else keep[:, None, None, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_a_graph_whose_work_is_symbolic_is_specialized() -> None:
    """Attention behind a mask view, after other shapes made Dynamo trace sizes
    symbolically: its one op of work is symbolic, so the graph is compiled per shape
    (partitioning would leave all of it to PyTorch); nothing falls back."""
    torch._dynamo.reset()
    for b, h, s, d in ((2, 4, 33, 16), (1, 8, 40, 32)):
        qkv = tuple(randn(b, h, s, d, seed=i) for i in range(3))
        fuseopt.compile(MaskedAttention(), qkv, backend="interpret", strict=True)
    qkv = tuple(randn(4, 4, 16, 16, seed=i) for i in range(3))
    keep = torch.arange(16)[None, :] < torch.tensor([[5], [16], [9], [1]])
    compiled = fuseopt.compile(MaskedAttention(), (*qkv, keep), backend="interpret", strict=True)
    assert not compiled.fallbacks, [(f.target, f.reason) for f in compiled.fallbacks]
    with torch.no_grad():
        assert_close(compiled(*qkv, keep), MaskedAttention()(*qkv, keep))


def test_symbolic_graph_specialized_on_request(caplog: pytest.LogCaptureFixture) -> None:
    """symbolic="specialize" compiles the same graph per concrete shape, every op."""
    w = randn(8, 8, seed=1)
    compiled = torch.compile(
        decode_step,
        backend="fuseopt",
        options={"backend": "interpret", "symbolic": "specialize"},
        dynamic=True,
    )
    with caplog.at_level(logging.DEBUG, logger="fuseopt"):
        for rows in (2, 3, 2):
            x, cache = randn(1, 8, seed=rows), randn(rows, 8, seed=10 + rows)
            for a, e in zip(compiled(x, cache, w), decode_step(x, cache, w), strict=True):
                assert_close(a, e)
    messages = [r.getMessage() for r in caplog.records if r.name == "fuseopt"]
    assert any("compiled per concrete shape" in m for m in messages), messages
    assert not [m for m in messages if "run eagerly" in m], messages
    assert len([m for m in messages if m.startswith("fuseopt: compiled ")]) == 2


def test_symbolic_option_is_checked() -> None:
    """An unknown `symbolic` value is a ConfigurationError naming the choices."""
    compiled = torch.compile(
        decode_step, backend="fuseopt", options={"backend": "interpret", "symbolic": "maybe"}
    )
    with pytest.raises(
        Exception, match="'symbolic' must be one of auto, dynamic, partition, specialize"
    ):
        compiled(randn(1, 8), randn(3, 8), randn(8, 8))


def test_attention_training_falls_back_for_the_kernel_only() -> None:
    """Training through SDPA with attention="nn": the attention kernel (whose logsumexp
    the backward needs) and its backward run eagerly, everything around it is compiled, gradients match."""

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(torch.tanh(q), k, v, is_causal=True) * 2

    inputs = [randn(2, 2, 4, 8, seed=s) for s in range(3)]

    def grads(run: object) -> list[torch.Tensor]:
        xs = [x.clone().requires_grad_(True) for x in inputs]
        (run(*xs) * torch.linspace(-1, 1, 8)).sum().backward()
        return [x.grad for x in xs]

    expected = grads(fn)
    compiled = fuseopt.compile(fn, backend="interpret", attention="nn")
    for a, e in zip(grads(compiled), expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    assert {f.target.split(".")[1] for f in compiled.fallbacks} == {
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
    }
    assert any(k.region.startswith("backward") for k in compiled.kernels)


@pytest.mark.parametrize(
    "make",
    [lambda: nn.LayerNorm(16), lambda: nn.RMSNorm(16, eps=1e-5)],
    ids=["layernorm", "rmsnorm"],
)
def test_dynamic_norm_modules(make: object, caplog: pytest.LogCaptureFixture) -> None:
    """dynamic=True on nn.LayerNorm / nn.RMSNorm: the rows are one symbolic size,
    compiled once for every size; a changed eps recompiles (Dynamo guards it); every
    result matches eager."""
    model = randomize(make())
    compiled = torch.compile(
        model, backend="fuseopt", options={"backend": "interpret"}, dynamic=True
    )
    with caplog.at_level(logging.DEBUG, logger="fuseopt"), torch.no_grad():
        for rows, eps in ((3, 1e-5), (7, 1e-5), (7, 0.5)):
            model.eps = eps
            x = randn(rows, 16, seed=rows)
            assert_close(compiled(x), model(x))
    messages = [r.getMessage() for r in caplog.records if r.name == "fuseopt"]
    assert not [m for m in messages if "eagerly" in m], messages
    assert len([m for m in messages if m.startswith("fuseopt: compiled ")]) >= 2


def test_host_scalars_reach_the_device_of_a_region() -> None:
    """A 0-d CPU tensor among device inputs (a float attribute Dynamo wraps under
    dynamic=True, converted eagerly) is copied to the region's device before the
    kernels read it; a region wholly on the CPU keeps its inputs as they are."""
    from torch.fx import symbolic_trace

    from fuseopt.frontends.fx.partition import CompiledRegion, host_scalars

    def f(x: torch.Tensor, s: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x * s + y

    gm = symbolic_trace(f)
    x_node, s_node, y_node = (n for n in gm.graph.nodes if n.op == "placeholder")
    s_node.meta["val"] = torch.tensor(2.0)
    for device, expected in (("meta", (1,)), ("cpu", ())):
        x_node.meta["val"] = y_node.meta["val"] = torch.empty(4, device=device)
        assert host_scalars(gm) == expected

    seen = []
    region = CompiledRegion(lambda *a: seen.extend(t.device.type for t in a) or a, "r", (1,))
    region(torch.empty(4, device="meta"), torch.tensor(2.0), torch.empty(4, device="meta"))
    assert seen == ["meta", "meta", "meta"]


class RotaryFrequencies(nn.Module):
    """Hugging Face's rotary embedding: `inv_freq @ position_ids` (an outer product
    written as a batched matmul of contraction 1), then cos and sin."""

    def __init__(self, half: int = 8):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, half, dtype=torch.float32) / half))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


@pytest.mark.parametrize("backend", ["interpret", "triton"])
def test_rotary_outer_product_is_elementwise(backend: str) -> None:
    """The frequencies' matmul (contraction 1) becomes a multiply fused with cos and sin:
    no library GEMM, eager's values (positions up to 4095, where the angle's rounding
    shows)."""
    model = RotaryFrequencies()
    x = torch.randn(2, 5, 16, dtype=torch.bfloat16)
    positions = torch.tensor([[0, 1, 2, 3, 4], [4091, 4092, 4093, 4094, 4095]])
    compiled = fuseopt.compile(model, (x, positions), backend=backend)
    assert "library_gemm" not in [k.schedule for k in compiled.kernels], compiled.kernels
    for got, want in zip(compiled(x, positions), model(x, positions), strict=True):
        torch.testing.assert_close(got, want)
