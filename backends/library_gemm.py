"""Library GEMMs (cuBLAS through torch) whose N is not a multiple of 16 bytes.

cuBLAS picks its fast kernels only when the output's columns (N) fill whole 16-byte
vectors; a vocabulary of 50257 (GPT-2), 32001 or 30522 makes it fall back to kernels
built for unaligned data. On an H200 (bf16, the same run): 2048 x 1024 @ 1024 x 50257
took 2198 us as it is and 580 us with N padded to 50264 (zero rows appended to the
weight, the product written into a padded buffer, its first N columns copied out),
4096 x 4096 @ 4096 x 32001 10.9 ms -> 1.8 ms, 8 rows x 50257 403 -> 310 us, N = 30522
505 -> 362 us. Padding only the output (cuBLAS writing through a strided view) changed
nothing: N itself must be aligned. Inductor pads the same way (`pad_mm`).

Both backends run a 2-D library GEMM through `mm_padded` when `padded_columns` says so;
the Triton backend prints its source into the generated module (`mm_padded_source`).
"""

from __future__ import annotations

import inspect

import torch

VECTOR_BYTES = 16
"""The alignment cuBLAS's fast kernels need of N, in bytes."""


MIN_PADDED_WEIGHT = 1 << 20
"""The fewest elements of `b` (K x N) for which padding pays: below it the three extra
copies cost more host time than the unaligned kernel loses (a classifier's N = 3)."""


def padded_columns(columns: int, depth: int, element_bytes: int) -> int:
    """The N a 2-d library GEMM of `depth` x `columns` operand `b` should run at: N
    rounded up to whole 16-byte vectors of `element_bytes` elements when it is not
    aligned and `b` has at least MIN_PADDED_WEIGHT elements, else N itself."""
    per_vector = max(1, VECTOR_BYTES // element_bytes)
    if columns * depth < MIN_PADDED_WEIGHT:
        return columns
    return -(-columns // per_vector) * per_vector


def mm_padded(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    columns: int,
    bias: torch.Tensor | None = None,
) -> None:
    """`out = a @ b (+ bias)` (2-d; `b` a [K, N] matrix or the transposed view of an
    [N, K] one) computed at N = `columns`: `b` copied with zero columns appended (as
    rows of the [N, K] form when `b` is a transposed view, so the copy reads and writes
    rows), the product (`torch.addmm` with the bias zero-padded) into a [M, columns]
    buffer, its first N columns copied into `out`."""
    k, n = b.shape
    if b.stride(0) == 1 and b.stride(1) != 1:  # the transposed view of an [N, K] weight
        rows = torch.empty((columns, k), dtype=b.dtype, device=b.device)
        rows[:n].copy_(b.mT)
        rows[n:].zero_()
        wide = rows.mT
    else:
        wide = torch.empty((k, columns), dtype=b.dtype, device=b.device)
        wide[:, :n].copy_(b)
        wide[:, n:].zero_()
    product = torch.empty((a.shape[0], columns), dtype=out.dtype, device=out.device)
    if bias is None:
        torch.mm(a, wide, out=product)
    else:
        padded_bias = torch.zeros((columns,), dtype=bias.dtype, device=bias.device)
        padded_bias[:n].copy_(bias)
        torch.addmm(padded_bias, a, wide, out=product)
    out.copy_(product[:, :n])


def mm_padded_source(name: str) -> str:
    """`mm_padded`'s source as a function called `name` (the Triton backend prints it
    into its modules, which import nothing but torch and Triton)."""
    return inspect.getsource(mm_padded).replace("def mm_padded(", f"def {name}(", 1)
