"""Training through fuseopt: forward and backward compiled, PyTorch's optimizer.

A small MLP regression trained for a few AdamW steps with `fuseopt.compile`: Dynamo
captures the forward and AOTAutograd the backward, and fuseopt compiles both. The first
step's gradients are checked against eager, then the loss must fall.

    python fuseopt/examples/training.py [--backend triton|cuda|interpret] [--steps N]
"""

from __future__ import annotations

import argparse
import copy

import torch
from torch import nn

import fuseopt


def make_model() -> nn.Module:
    """Linear, LayerNorm, GELU, Linear: a residual-free MLP head."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 1))


def loss_of(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean-squared error of the model's prediction."""
    return nn.functional.mse_loss(model(x).squeeze(-1), y)


def main() -> None:
    """Check the compiled gradients against eager, then train and print the losses."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    gpu = torch.cuda.is_available()
    parser.add_argument("--backend", default="triton" if gpu else "interpret")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    device = torch.device("cuda" if gpu else "cpu")
    model = make_model().to(device)
    reference = copy.deepcopy(model)
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(64, 32, generator=g).to(device)
    y = (x[:, :4].sum(-1) * 0.5).to(device)

    compiled = fuseopt.compile(model, backend=args.backend)
    loss_of(compiled, x, y).backward()
    loss_of(reference, x, y).backward()
    for p, r in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, r.grad, rtol=1e-4, atol=1e-5)
    print("gradients match eager")

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(args.steps):
        optimizer.zero_grad()
        loss = loss_of(compiled, x, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    print("losses:", " ".join(f"{v:.4f}" for v in losses))
    assert losses[-1] < losses[0], losses
    regions = sorted({k.region for k in compiled.kernels})
    print(f"training: {len(compiled.kernels)} kernel(s) in regions {', '.join(regions)}")


if __name__ == "__main__":
    main()
