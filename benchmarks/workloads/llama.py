"""llama_block: one Llama decoder layer (RMSNorm, causal attention, RMSNorm, SwiGLU MLP).

Attention goes through `scaled_dot_product_attention` (flash/cuDNN in eager), with
rotary embeddings on the query and key heads. GEMM-bound at the full shape.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.workloads import Dims, Shape, Workload, element_size, generator, randn
from benchmarks.workloads.mlp import GatedMlp, random_linear
from benchmarks.workloads.norms import RmsNorm, random_rotary, rotate_halves


class LlamaBlock(nn.Module):
    """A pre-norm Llama decoder layer without a KV cache (a prefill step)."""

    def __init__(
        self, hidden: int, heads: int, di: int, dtype: torch.dtype, device: torch.device, seed: int
    ):
        super().__init__()
        gen = generator(device, seed)
        self.heads = heads
        self.input_norm = RmsNorm(hidden, dtype, device, seed + 1)
        self.q_proj = random_linear(hidden, hidden, False, dtype, device, gen)
        self.k_proj = random_linear(hidden, hidden, False, dtype, device, gen)
        self.v_proj = random_linear(hidden, hidden, False, dtype, device, gen)
        self.o_proj = random_linear(hidden, hidden, False, dtype, device, gen)
        self.post_norm = RmsNorm(hidden, dtype, device, seed + 2)
        self.mlp = GatedMlp(hidden, di, dtype, device, seed + 3)

    def _heads(
        self, x: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None
    ) -> torch.Tensor:
        """Split into heads ``[batch, heads, seq, head_dim]``, rotating them if tables are given."""
        batch, seq, hidden = x.shape
        x = x.view(batch, seq, self.heads, hidden // self.heads)
        if cos is not None and sin is not None:
            x = rotate_halves(x, cos, sin)
        return x.transpose(1, 2)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """``h = x + attn(norm(x)); out = h + mlp(norm(h))``."""
        batch, seq, hidden = x.shape
        normed = self.input_norm(x)
        q = self._heads(self.q_proj(normed), cos, sin)
        k = self._heads(self.k_proj(normed), cos, sin)
        v = self._heads(self.v_proj(normed), None, None)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = x + self.o_proj(attn.transpose(1, 2).reshape(batch, seq, hidden))
        return h + self.mlp(self.post_norm(h))


def _inputs(d: Dims, dt: torch.dtype, dev: torch.device, s: int) -> tuple[torch.Tensor, ...]:
    gen = generator(dev, s)
    x = randn((1, d["seq"], d["hidden"]), dt, dev, gen)
    cos, sin = random_rotary(d["seq"], d["hidden"] // d["heads"] // 2, dt, dev, gen)
    return x, cos, sin


def _bytes(d: Dims, dt: torch.dtype) -> int:
    h, di, seq = d["hidden"], d["di"], d["seq"]
    weights = 4 * h * h + 3 * h * di + 2 * h
    tables = 2 * seq * (h // d["heads"] // 2)
    return (2 * seq * h + weights + tables) * element_size(dt)


def _flops(d: Dims) -> int:
    h, di, seq = d["hidden"], d["di"], d["seq"]
    projections = 4 * 2 * seq * h * h
    mlp = 3 * 2 * seq * h * di
    causal_attention = 2 * seq * seq * h  # QK^T and PV, each 2*S*S*h, halved by the mask
    return projections + mlp + causal_attention


LLAMA_BLOCK = Workload(
    name="llama_block",
    computation="RMSNorm, attention (sdpa), RMSNorm, SwiGLU MLP",
    shapes=(Shape("h4096_s2048", {"hidden": 4096, "heads": 32, "seq": 2048, "di": 11008}),),
    quick_shape=Shape("quick", {"hidden": 64, "heads": 4, "seq": 8, "di": 128}),
    make_model=lambda d, dt, dev, s: LlamaBlock(d["hidden"], d["heads"], d["di"], dt, dev, s),
    make_inputs=_inputs,
    min_bytes=_bytes,
    flops=_flops,
)
