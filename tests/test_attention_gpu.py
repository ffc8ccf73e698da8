"""The flash-attention kernel on a CUDA GPU, both backends (skipped without one).

`F.scaled_dot_product_attention` modules compiled by fuseopt.compile (strict: nothing
left to PyTorch) against a float64 reference, no worse than twice the error of
PyTorch's own SDPA in the same dtype: head dims 64 to 256, causal with ragged lengths,
grouped-query heads, a padding mask and a decode step."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import fuseopt

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


class Attention(torch.nn.Module):
    def __init__(self, causal: bool, gqa: bool):
        super().__init__()
        self.causal, self.gqa = causal, gqa

    def forward(self, q, k, v, keep=None):  # noqa: ANN001, ANN201
        mask = None if keep is None else keep[:, None, None, :]
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=self.causal, enable_gqa=self.gqa
        )


CASES = {
    # name: (B, Hq, Hkv, L, S, D, causal, padding mask)
    "d64_causal_ragged": (2, 4, 4, 333, 333, 64, True, False),
    "d128": (1, 8, 8, 1000, 1000, 128, False, False),
    "d256_causal": (1, 2, 2, 300, 300, 256, True, False),
    "d80_gqa": (2, 8, 2, 100, 150, 80, False, False),
    "padding_mask": (4, 4, 4, 128, 128, 64, False, True),
    "decode_gqa": (8, 32, 8, 1, 1000, 128, False, False),
    "bf16_long_causal": (1, 4, 4, 4096, 4096, 128, True, False),
}


@pytest.mark.parametrize("backend", ["triton", "cuda"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_attention_matches_on_the_gpu(case: str, backend: str) -> None:
    b, hq, hkv, lq, s, d, causal, padded = CASES[case]
    g = torch.Generator(device="cuda").manual_seed(0)
    dtype = torch.bfloat16

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=g, device="cuda", dtype=dtype)

    inputs: tuple = (r(b, hq, lq, d), r(b, hkv, s, d), r(b, hkv, s, d))
    if padded:
        lengths = torch.randint(1, s + 1, (b,), generator=g, device="cuda")
        inputs = (*inputs, torch.arange(s, device="cuda")[None, :] < lengths[:, None])
    model = Attention(causal, hq != hkv)
    # the CUDA backend leaves SDPA to PyTorch by default (its kernel is still slow)
    compiled = fuseopt.compile(model, inputs, backend=backend, strict=True, attention="fused")
    assert not compiled.fallbacks
    # one attention kernel (and its combine kernel where the keys are split)
    kernels = [k.name for k in compiled.kernels if k.schedule == "attention"]
    assert len([n for n in kernels if "combine" not in n]) == 1, kernels
    with torch.no_grad():
        got = compiled(*inputs)
        wide = tuple(x.double() if x.is_floating_point() else x for x in inputs)
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
            want = model(*wide)
        eager = model(*inputs)
    err = (got.double() - want).abs().max().item()
    eager_err = (eager.double() - want).abs().max().item()
    assert math.isfinite(err) and err <= 2 * eager_err + 1e-3, (err, eager_err)
