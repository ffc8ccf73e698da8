"""A Llama-style decoder block in plain PyTorch, compiled with fuseopt.

RMSNorm, rotary position embedding, grouped-query attention with a causal mask, and a
SwiGLU MLP: the block compiles into a few fused kernels plus library GEMMs. Runs on a GPU
(Triton) or on a CPU (the reference interpreter); checks the result against eager.

    python fuseopt/examples/llama_block.py [--backend triton|cuda|interpret]
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

import fuseopt


class RMSNorm(nn.Module):
    """`x * rsqrt(mean(x^2) + eps) * weight`, computed in f32 as Llama does."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """The second half of the last dim negated and swapped with the first."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Block(nn.Module):
    """One decoder block: pre-norm attention and pre-norm SwiGLU MLP, with residuals."""

    def __init__(self, dim: int = 64, heads: int = 4, kv_heads: int = 2, hidden: int = 128):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(h).view(b, s, 2, self.kv_heads, self.head_dim).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        causal = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        attn = F.softmax(scores.float(), dim=-1).to(q.dtype) @ v
        x = x + self.o(attn.transpose(1, 2).reshape(b, s, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def rotary(seq: int, head_dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The cos and sin tables of rotary embedding, (seq, head_dim)."""
    inv = 1.0 / 10000 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim)
    angles = torch.outer(torch.arange(seq, device=device).float(), inv)
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos(), emb.sin()


def main() -> None:
    """Compile the block, compare with eager, print the fusion report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    gpu = torch.cuda.is_available()
    parser.add_argument("--backend", default="triton" if gpu else "interpret")
    args = parser.parse_args()
    device = torch.device("cuda" if gpu else "cpu")
    torch.manual_seed(0)
    block = Block().to(device).eval()
    for p in (block.norm1.weight, block.norm2.weight):
        nn.init.uniform_(p, 0.5, 1.5)  # non-trivial norm weights
    x = torch.randn(2, 16, 64, device=device)
    cos, sin = rotary(16, 16, device)
    with torch.no_grad():
        compiled = fuseopt.compile(block, (x, cos, sin), backend=args.backend)
        torch.testing.assert_close(compiled(x, cos, sin), block(x, cos, sin), rtol=1e-4, atol=1e-4)
    print(compiled.fusion_report())
    print(f"llama block: {len(compiled.kernels)} kernel(s), matches eager")


if __name__ == "__main__":
    main()
