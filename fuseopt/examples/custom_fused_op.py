"""A new fused op written in plain PyTorch: no kernel code, one fused kernel.

A "squared ReLU gated by a learned scale, then normalized per row" op, as a research
block might add: fuseopt fuses its ten ATen ops into one row-reduction kernel. The script
prints the nn IR fuseopt sees, the generated Triton source and the fusion report, and
checks the result against eager.

    python fuseopt/examples/custom_fused_op.py [--backend triton|cuda|interpret]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

import fuseopt


class ScaledSquaredReLUNorm(nn.Module):
    """`relu(x * scale)^2`, divided by its row's root mean square."""

    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x * self.scale).square()
        return y * torch.rsqrt(y.square().mean(-1, keepdim=True) + 1e-6)


def main() -> None:
    """Compile the op, show what fuseopt made of it, compare with eager."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    gpu = torch.cuda.is_available()
    parser.add_argument("--backend", default="triton")
    args = parser.parse_args()
    device = torch.device("cuda" if gpu else "cpu")
    op = ScaledSquaredReLUNorm(96).to(device)
    x = torch.randn(8, 96, device=device)
    with torch.no_grad():
        print(fuseopt.export(op, (x,)))
        compiled = fuseopt.compile(op, (x,), backend=args.backend)
        torch.testing.assert_close(compiled(x), op(x), rtol=1e-5, atol=1e-5)
    print(compiled.fusion_report())
    fused = [k for k in compiled.kernels if k.source is not None]
    if fused:
        print(fused[0].source)
    print(f"custom op: {len(compiled.kernels)} kernel(s), matches eager")


if __name__ == "__main__":
    main()
