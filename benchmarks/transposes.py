"""Transposes fused into pointwise kernels, timed against eager and torch.compile.

    python -m benchmarks.transposes [--out FILE]

Three bf16 cases, each a transpose between elementwise work, so fuseopt makes one
pointwise kernel that reads the transposed input in its own axis order:

- `heads`: attention's head transpose, x [B, S, H, D] -> [B, H, S, D], scaled and
  shifted by a per-(S, D) table (3-D tiles over (H, S, D): the input read as
  [S, H, D] boxes and turned);
- `rope heads`: Hugging Face's rotary embedding applied to the transposed heads (the
  rotate-half slices and concat indexed as parts, the transpose as a permuted load);
- `square`: a 2-D transpose of x [N, M] plus y [M, N] (64x64 tiles turned in
  registers or shared memory).

Every system is checked against float64 (error at most twice eager's) before it is
timed; the roofline is one read of every input and one write of the output at the
copy bandwidth measured here. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import sys

import torch

from benchmarks.standalone import TABLE_HEADER, check_and_time, copy_gbps, finish, provenance


class Heads(torch.nn.Module):
    """x.transpose(1, 2) * table + 1, table [S, D]."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = torch.nn.Parameter(table, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2) * self.table + 1.0


class Rope(torch.nn.Module):
    """Hugging Face's rotary embedding on the transposed heads: t = x.transpose(1, 2),
    t * cos + rotate_half(t) * sin, cos/sin [S, D]."""

    def __init__(self, cos: torch.Tensor, sin: torch.Tensor):
        super().__init__()
        self.cos = torch.nn.Parameter(cos, requires_grad=False)
        self.sin = torch.nn.Parameter(sin, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.transpose(1, 2)
        half = t.shape[-1] // 2
        rotated = torch.cat((-t[..., half:], t[..., :half]), dim=-1)
        return t * self.cos + rotated * self.sin


class Square(torch.nn.Module):
    """x.t() + y."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x.t() + y


def main(argv: list[str] | None = None) -> int:
    """Check, time and print one Markdown table; return 1 if any system was wrong."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the table to this file")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("transposes: needs a CUDA GPU")
        return 0
    device, dtype = torch.device("cuda"), torch.bfloat16
    gen = torch.Generator(device=device).manual_seed(0)
    bw = copy_gbps(device)
    b, s, h, d = 4, 2048, 32, 128
    n = 8192
    cases = {
        "heads 4x2048x32x128": (
            Heads(torch.randn(s, d, device=device, generator=gen)),
            (torch.randn(b, s, h, d, device=device, generator=gen),),
        ),
        "rope heads 4x2048x32x128": (
            Rope(
                torch.randn(s, d, device=device, generator=gen),
                torch.randn(s, d, device=device, generator=gen),
            ),
            (torch.randn(b, s, h, d, device=device, generator=gen),),
        ),
        f"square {n}x{n}": (
            Square(),
            (
                torch.randn(n, n, device=device, generator=gen),
                torch.randn(n, n, device=device, generator=gen),
            ),
        ),
    }
    lines = [
        f"# Transposes fused into pointwise kernels (bf16) on {torch.cuda.get_device_name()}",
        provenance(bw),
        "",
        *TABLE_HEADER,
    ]
    failed = False
    for name, (model, inputs64) in cases.items():
        with torch.no_grad():
            ref = model.double()(*(t.double() for t in inputs64)).float()
            model = model.to(dtype)
            inputs = tuple(t.to(dtype) for t in inputs64)
            out_bytes = ref.numel() * 2
            in_bytes = sum(t.numel() * 2 for t in inputs) + sum(
                p.numel() * 2 for p in model.parameters()
            )
            roof_us = (in_bytes + out_bytes) / bw / 1e3
            rows, ok = check_and_time(name, model, inputs, ref, roof_us, device)
        lines += rows
        failed |= not ok
    return finish(lines, args.out, failed)


if __name__ == "__main__":
    sys.exit(main())
