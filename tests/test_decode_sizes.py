"""A decode step compiles once for every cache length: sizes `k * (s + c)` in regions,
attention over a dynamic key length, and the fallbacks around them.

Hugging Face's decode step concatenates the cache (`s` tokens) with the new token's keys
and values (`s + 1`), then attends over `s + 1` keys. The `cat` reads both sizes and runs
in PyTorch; every region past it is compiled for the size `n = s + 1`
(`symbolic_sizes.classify_sizes`), its attention with the key length taken at run time
(`AttentionPlan.dynamic_keys`). CPU: the Triton interpreter and the tile interpreter.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import fuseopt
from fuseopt.frontends.fx.symbolic_sizes import (
    classify_sizes,
    graph_symbol,
    ratio,
    size_offset,
)

pytest.importorskip("transformers")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _traced(fn, *inputs: torch.Tensor, dims: tuple[tuple[int, int], ...]):
    """The ATen graph of `fn` with the given (input, dim) pairs marked dynamic."""
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def keep(gm, _inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    for i, d in dims:
        torch._dynamo.mark_dynamic(inputs[i], d)
    torch.compile(fn, backend=aot_autograd(fw_compiler=keep, inference_compiler=keep))(*inputs)
    return graphs[0]


def test_offsets_of_sizes() -> None:
    """`size_offset` is c for `k * (s + c)`; `ratio` with an offset is k there."""

    def sizes(cache: torch.Tensor, new: torch.Tensor):
        grown = torch.cat([cache, new])
        return grown, torch.cat([grown, grown]), torch.cat([grown, cache])

    gm = _traced(sizes, torch.randn(6), torch.randn(1), dims=((0, 0),))
    s = graph_symbol(gm)
    output = next(n for n in gm.graph.nodes if n.op == "output")
    grown, twice, odd = (n.meta["val"].shape[0] for n in output.args[0])
    cache = next(
        n.meta["val"]
        for n in gm.graph.nodes
        if n.op == "placeholder" and isinstance(n.meta["val"], torch.Tensor)
    ).shape[0]
    assert [size_offset(x, s) for x in (cache, grown, twice, odd, 7)] == [0, 1, 1, None, None]
    assert ratio(twice, s, 1) == 2 and ratio(grown, s) is None and ratio(grown, s, 1) == 1
    assert ratio(cache, s) == 1 and ratio(5, s, 1) == 0


def test_the_cache_cat_runs_in_pytorch_and_what_follows_has_offset_one() -> None:
    """The `cat` of a cache (s) and a token (1) reads two offsets: it runs in PyTorch;
    the ops on its result are of offset 1, those on the cache alone of offset 0."""

    def step(cache: torch.Tensor, new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        grown = torch.cat([cache, new], dim=1)
        return grown, torch.tanh(grown) * 2, cache.exp()

    gm = _traced(step, torch.randn(2, 6, 4), torch.randn(2, 1, 4), dims=((0, 1),))
    s = graph_symbol(gm)
    reasons, offsets = classify_sizes(gm, s)
    by_target = {str(n.target): why for n, why in reasons.items()}
    assert "symbolic sizes" in by_target["aten.cat.default"], by_target
    assert {str(n.target): c for n, c in offsets.items()} == {
        "aten.tanh.default": 1,
        "aten.mul.Tensor": 1,
        "aten.exp.default": 0,
    }


class Decode(torch.nn.Module):
    """Grouped-query attention of one new token over a cache, with a padding mask."""

    def forward(self, q, k, v, keep):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, enable_gqa=True) * 2


BACKENDS = [
    "triton",
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
    ),
]
"""The backends that take sizes at run time (the CUDA backend runs on a GPU only)."""


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_over_a_dynamic_key_length_compiles_once(
    backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Decode attention at many key lengths (ragged, one block, split into chunks or
    not): one version, one kernel set, eager's result."""
    caplog.set_level(logging.INFO, logger="fuseopt")
    torch.manual_seed(0)
    model = Decode()
    compiled = fuseopt.compile(model, backend=backend, attention="fused")
    for length in (5, 9, 64, 65, 130, 1100):
        q = torch.randn(2, 8, 1, 32, device=DEVICE)
        k, v = (torch.randn(2, 2, length, 32, device=DEVICE) for _ in range(2))
        keep = torch.rand(2, 1, 1, length, device=DEVICE) > 0.3
        keep[..., 0] = True
        torch.testing.assert_close(compiled(q, k, v, keep), model(q, k, v, keep))
    # the first length, then one region for every length (no compile per length)
    assert len(compiled.record.graphs) == 2 and len(compiled.record.regions) == 2
    assert "compiled per size" not in caplog.text
    assert "compiles dynamic sizes per size" not in caplog.text


FULLY_MASKED = """
func.func @f(%q: tensor<1x2x1x16xf32>, %k: tensor<1x2x?x16xf32>, %v: tensor<1x2x?x16xf32>,
             %m: tensor<1x1x1x?xf32>) -> tensor<1x2x1x16xf32> {
  %o = nn.attention %q, %k, %v mask %m {scale = 0.25 : f64} : tensor<1x2x1x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x1x1x?xf32> -> tensor<1x2x1x16xf32>
  func.return %o : tensor<1x2x1x16xf32>
}
"""


@pytest.mark.parametrize("length", [1, 65, 300, 1100])
def test_a_row_masked_everywhere_by_the_float_minimum_averages_every_key(length: int) -> None:
    """Every score about -F32_MAX: the weights are even, the output the mean of the
    values (PyTorch's CPU kernels agree; CUDA's memory-efficient one gives 0). The
    chunks of a split plan (16 here, of unequal lengths at a dynamic key length) are weighed by their
    sums of exponentials, kept apart from their maxima: as one log-sum-exp the sum was
    lost and 65 keys came out 0.98 away."""
    torch.manual_seed(0)
    compiled = fuseopt.load_mlir(FULLY_MASKED, backend="triton")
    q = torch.randn(1, 2, 1, 16, device=DEVICE)
    k, v = (torch.randn(1, 2, length, 16, device=DEVICE) for _ in range(2))
    mask = torch.full((1, 1, 1, length), torch.finfo(torch.float32).min, device=DEVICE)
    out = compiled(q, k, v, mask)
    out = out[0] if isinstance(out, list | tuple) else out
    # in float64 (CUDA's memory-efficient SDPA returns 0 for such a row)
    scores = (q.double() @ k.double().mT) * 0.25 + mask.double()
    want = torch.softmax(scores, -1) @ v.double()
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_decode_step_runs_only_its_cache_cat_in_pytorch(
    backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A Llama `generate`: two Dynamo graphs; the decode step's attention and everything
    after the cache's `cat` compile once; only the `cat`s (and the position arithmetic
    on the length) run in PyTorch; the tokens are eager's."""
    caplog.set_level(logging.INFO, logger="fuseopt")
    compiled = _generated_as_eager("llama", 6, backend=backend, attention="fused")
    assert compiled.record.graphs == ["inference0", "inference1"]
    decode = {str(f.target) for f in compiled.fallbacks if f.graph == "inference1"}
    # the cats; older Hugging Face versions (5.17) also compute the mask's positions
    # from the cache length as a number (`arange(past, past + 1)`)
    assert "aten.cat.default" in decode, decode
    assert decode <= {"aten.cat.default", "aten.arange.default", "aten.add.Tensor"}, decode
    assert "compiled a version for every n" in caplog.text


def test_a_sliding_window_cache_is_partitioned(caplog: pytest.LogCaptureFixture) -> None:
    """Mistral's sliding-window cache pins the length (`min(s + 1, window)`): no version;
    the graph is compiled once with its symbolic-size ops in PyTorch, not per token."""
    caplog.set_level(logging.INFO, logger="fuseopt")
    compiled = _generated_as_eager("mistral", 6, backend="triton")
    assert "not a version" in caplog.text
    assert "compiled once, its symbolic-size ops run in PyTorch" in caplog.text
    # prefill and the partition: nothing compiled for the version traced and dropped
    assert len(compiled.record.graphs) == 2, compiled.record.graphs


def test_a_region_compiled_per_size_runs_new_sizes_in_pytorch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """On a backend that compiles per size (the interpreter), a decode region compiles
    PER_SIZE_LIMIT lengths, then runs new ones in PyTorch, logged once; tokens equal."""
    from fuseopt.frontends.fx.symbolic_sizes import PER_SIZE_LIMIT

    caplog.set_level(logging.INFO, logger="fuseopt")
    _generated_as_eager("llama", PER_SIZE_LIMIT + 3, "cpu", backend="interpret", symbolic="dynamic")
    assert f"compiled {PER_SIZE_LIMIT} sizes; new sizes run in PyTorch" in caplog.text
    per_size = caplog.text.count("compiles dynamic sizes per size")
    assert 0 < per_size <= 4 * PER_SIZE_LIMIT, per_size


def _generated_as_eager(family: str, tokens: int, device: str = DEVICE, **options: Any) -> Any:
    """A tiny `family` decoder compiled with `options`, after a greedy `generate` of
    `tokens` tokens that gave eager's tokens."""
    model, ids = _decoder(family, device)
    compiled = fuseopt.compile(model, **options)
    kwargs = dict(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
    with torch.no_grad():
        assert torch.equal(compiled.generate(ids, **kwargs), model.generate(ids, **kwargs))
    return compiled


def _decoder(family: str, device: str = DEVICE) -> tuple[torch.nn.Module, torch.Tensor]:
    """A tiny model-suite decoder (f32, random weights) and an 8-token prompt, on the GPU
    where there is one (Triton 3.6's CPU interpreter fails on these kernels)."""
    from benchmarks.generate import dims_of
    from benchmarks.models import hf

    torch._dynamo.reset()
    dims = dims_of(family, True)
    model = hf.build_model(family, dims, True, torch.float32, torch.device(device), seed=0)
    model.generation_config.pad_token_id = 0
    return model, hf.tokens(dims["vocab"], (1, 8), torch.device(device), 1)


def test_a_mask_indexed_by_positions_compiles_once(caplog: pytest.LogCaptureFixture) -> None:
    """Hugging Face's mask building indexes the padding mask by key positions: the index
    arithmetic holds the length itself (a negative position wrapped by it, a row's flat
    offset), as constant tiles at the size hints, and the gather reads a buffer of the
    dynamic length. Compiled once for every length, against eager."""
    caplog.set_level(logging.INFO, logger="fuseopt")

    class Masked(torch.nn.Module):
        def forward(self, k: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            positions = torch.arange(mask.shape[1], device=mask.device)
            rows = torch.zeros(1, dtype=torch.long, device=mask.device)
            keep = mask[rows[:, None], positions[None, :]]
            return torch.where(keep[:, None, :, None], k, 0.0) * 2

    model = Masked()
    compiled = fuseopt.compile(model, backend="triton")
    for length in (5, 9, 17, 100):
        k = torch.randn(1, 2, length, 4, device=DEVICE)
        mask = torch.rand(1, length, device=DEVICE) > 0.5
        torch.testing.assert_close(compiled(k, mask), model(k, mask))
    assert "compiled per size" not in caplog.text
    assert "compiles dynamic sizes per size" not in caplog.text
    assert len(compiled.record.regions) == 2  # the first length, then every length
