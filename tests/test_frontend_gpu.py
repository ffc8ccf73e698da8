"""The frontend on a CUDA device (skipped without one): compiled regions take CUDA
tensors and give back results on the inputs' device with the model's dtype, fallback
ops stay on the GPU, and gradients flow, all with the interpret backend."""

from __future__ import annotations

import pytest
import torch
from test_frontend_common import MLP, assert_close, randn, randomize

import fuseopt

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_mlp_on_cuda(dtype: torch.dtype) -> None:
    """Results come back on the GPU with the model's dtype and match eager there."""
    model = randomize(MLP()).to("cuda", dtype)
    x = randn(4, 8, dtype=dtype).cuda()
    with torch.no_grad():
        compiled = fuseopt.compile(model, x, backend="interpret")
        actual, expected = compiled(x), model(x)
    assert actual.device == x.device and actual.dtype == dtype
    assert_close(actual.cpu(), expected.cpu())
    assert compiled.kernels and not compiled.fallbacks


def test_fallback_and_gradients_on_cuda() -> None:
    """A conv falls back (on the GPU) between compiled regions; gradients match."""
    conv = torch.nn.Conv1d(4, 4, 3, padding=1).cuda()

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(conv(torch.sigmoid(x) * 2), -1) * x

    x0 = randn(2, 4, 8).cuda()

    def grads(run: object) -> list[torch.Tensor]:
        conv.zero_grad()
        x = x0.clone().requires_grad_(True)
        run(x).sum().backward()
        return [x.grad, conv.weight.grad]

    expected = grads(fn)
    compiled = fuseopt.compile(fn, backend="interpret")
    actual = grads(compiled)
    for a, e in zip(actual, expected, strict=True):
        assert a.device == e.device
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)
    assert "aten.convolution.default" in {f.target for f in compiled.fallbacks}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_sdpa_on_cuda(dtype: torch.dtype) -> None:
    """The CUDA attention kernels SDPA picks (flash / memory-efficient / cuDNN) are
    converted too: causal and float-masked attention match eager with no fallback."""
    import torch.nn.functional as F

    q, k, v = (randn(2, 4, 16, 32, dtype=dtype, seed=s).cuda() for s in range(3))
    bias = randn(2, 1, 16, 16, dtype=dtype, seed=3).cuda()

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True) + (
            F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        )

    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="interpret", attention="nn")
        actual, expected = compiled(q, k, v, bias), fn(q, k, v, bias)
    tol = 1e-3 if dtype == torch.float32 else 3e-2  # fused kernels accumulate differently
    torch.testing.assert_close(actual.float(), expected.float(), rtol=tol, atol=tol)
    assert not compiled.fallbacks, compiled.fusion_report()


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_hugging_face_llama_decode_step(backend: str) -> None:
    """The Hugging Face Llama decode step of issue 18 item 5 (batch 8, one new token
    after a KV cache of a ragged length, whose mask rows are not a multiple of 8 long)
    runs under fuseopt and matches eager. It crashed with "attn_bias is not correctly
    aligned" when the mask reached PyTorch's memory-efficient attention."""
    pytest.importorskip("transformers")
    from benchmarks.models.hf import DecodeStep, build_model, kv_cache

    dims = {"batch": 8, "context": 37, "hidden": 256, "intermediate": 512, "heads": 4,
            "kv_heads": 2, "layers": 2, "vocab": 512}  # fmt: skip
    device = torch.device("cuda")
    model = DecodeStep(build_model("llama", dims, False, torch.bfloat16, device, seed=0))
    ids = torch.randint(0, 512, (8, 1), device=device)
    cache = kv_cache(dims, torch.bfloat16, device, seed=1)
    with torch.no_grad():
        expected = model(ids, *cache)
        compiled = fuseopt.compile(model, (ids, *cache), backend=backend)
        actual = compiled(ids, *cache)
    assert actual.shape == expected.shape and actual.isfinite().all()
    torch.testing.assert_close(actual.float(), expected.float(), atol=5e-2, rtol=5e-2)


class RowSlices(torch.nn.Module):
    """Slices that are aligned runs of their operand's buffer, read by a kernel and by
    library GEMMs (one at offset 0 with fewer elements, one rows further in)."""

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x[2:, 4:] * 2, x[:2] @ w, x[1:] @ w


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_contiguous_slices_are_views_on_cuda(backend: str) -> None:
    """Slices taken as views at an offset read the right elements on the GPU and launch
    no kernel of their own."""
    x, w = randn(3, 64).cuda(), randn(64, 8).cuda()
    model = RowSlices()
    with torch.no_grad():
        compiled = fuseopt.compile(model, (x, w), backend=backend)
        actual, expected = compiled(x, w), model(x, w)
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e)
    assert not [k.name for k in compiled.kernels if "slice" in k.name]
