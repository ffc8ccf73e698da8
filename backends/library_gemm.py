"""Library GEMMs (cuBLAS through torch) whose N or K is not a multiple of 16 bytes.

cuBLAS picks its fast kernels only when the output's columns (N) fill whole 16-byte
vectors; a vocabulary of 50257 (GPT-2), 32001 or 30522 makes it fall back to kernels
built for unaligned data. On an H200 (bf16, the same run): 2048 x 1024 @ 1024 x 50257
took 2198 us as it is and 580 us with N padded to 50264 (zero rows appended to the
weight, the product written into a padded buffer, its first N columns copied out),
4096 x 4096 @ 4096 x 32001 10.9 ms -> 1.8 ms, 8 rows x 50257 403 -> 310 us, N = 30522
505 -> 362 us. Padding only the output (cuBLAS writing through a strided view) changed
nothing: N itself must be aligned. Inductor pads the same way (`pad_mm`).

A K that is not whole 16-byte vectors misaligns the rows of `a` and has the same
effect; `padded_depth` pads it too (zero columns of `a`, zero rows of `b`), as `pad_mm`
does. Both backends run a 2-D library GEMM through `mm_padded` when `padded_columns` or
`padded_depth` says so; the Triton backend prints its source into the generated module
(`mm_padded_source`).
"""

from __future__ import annotations

import inspect
import math
from collections import Counter
from collections.abc import Callable

import torch
from xdsl.ir import SSAValue

from fuseopt.dialects import tile, tile_host
from fuseopt.dialects.dtypes import element_bytes

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


def padded_depth(depth: int, rows: int, columns: int, element_bytes: int) -> int:
    """The K a 2-d library GEMM of `rows` x `depth` times `depth` x `columns` should run
    at: K rounded up to whole 16-byte vectors when it is not aligned (the rows of `a`
    then start misaligned, and cuBLAS falls back to its slow kernels: 4097 x 1023 @
    1023 x 4095 in bf16 took 260 us on an H100, torch.compile's padded product 68) and
    both operands have at least MIN_PADDED_WEIGHT elements, else K itself."""
    per_vector = max(1, VECTOR_BYTES // element_bytes)
    if rows * depth < MIN_PADDED_WEIGHT or depth * columns < MIN_PADDED_WEIGHT:
        return depth
    return -(-depth // per_vector) * per_vector


def gemm_columns(op: tile.GemmOp) -> int:
    """The N library GEMM `op` runs at (`padded_columns` of its output's last dim, its
    depth and its element size): the output's own N unless padding pays."""
    depth, columns = op.lhs.type.get_shape()[-1], op.out.type.get_shape()[-1]  # type: ignore[attr-defined]
    return padded_columns(columns, depth, element_bytes(op.out.type.element_type))  # type: ignore[attr-defined]


def gemm_depth(op: tile.GemmOp) -> int:
    """The K library GEMM `op` runs at (`padded_depth`; its rows are the left operand's
    leading dims together): the operands' own K unless padding pays."""
    lhs = op.lhs.type.get_shape()  # type: ignore[attr-defined]
    columns = op.out.type.get_shape()[-1]  # type: ignore[attr-defined]
    size = element_bytes(op.out.type.element_type)  # type: ignore[attr-defined]
    # rows of dynamic number count as many: padding costs little where they are few
    rows = math.prod(lhs[:-1]) if all(n >= 0 for n in lhs[:-1]) else MIN_PADDED_WEIGHT
    return padded_depth(lhs[-1], rows, columns, size)


def mm_padded(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    columns: int,
    bias: torch.Tensor | None = None,
    depth: int | None = None,
) -> None:
    """`out = a @ b (+ bias)` (2-d; `b` a [K, N] matrix or the transposed view of an
    [N, K] one) computed at N = `columns` and K = `depth` (default K), into a [M,
    columns] buffer: `out` itself when it is already the first N columns of one
    (`padded_output`), else a new one whose first N columns are then copied into `out`.

    - `b` the transposed view of an [N, K] weight (an LM head's), no bias and K not
      padded: no copy of `b`. Its first N rounded down to whole 16-byte vectors of
      columns are one aligned GEMM, the rest (fewer than a vector) a second, narrow one;
      both write the buffer, whose row pitch is aligned. On an H200 (bf16, the same
      run) GPT-2's LM head, 2048 x 1024 @ 1024 x 50257, took 330 us against the copy's
      368; with 8 rows 43 against 91 (the copy reads and writes the 100 MB weight in
      every call); 4096 x 4096 @ 4096 x 32001 1620 against 1639. With a bias the split
      is not taken: `torch.addmm` into a strided part of the buffer adds the bias after
      rounding the product (eager's fused epilogue does not) and ran slower at many
      rows (2048 x 1024 @ 1024 x 30522: 307 against 231 us).
    - Otherwise `b` is copied with zero columns (and rows) appended (as rows of the
      [N, K] form when `b` is a transposed view, so the copy reads and writes rows), `a`
      with zero columns appended when K grows, and the product (`torch.addmm` with the
      bias zero-padded) is computed whole. The zeros add nothing to the sums.

    The Triton backend prints this function into its modules, so it uses torch only."""
    k, n = b.shape
    depth = k if depth is None else depth
    m = a.shape[0]
    room = out.untyped_storage().nbytes() // out.element_size() - out.storage_offset()
    in_place = out.stride() == (columns, 1) and room >= m * columns
    if in_place:
        product = out.as_strided((m, columns), (columns, 1))
    else:
        product = torch.empty((m, columns), dtype=out.dtype, device=out.device)
    transposed = b.stride(0) == 1 and b.stride(1) != 1  # the transposed view of [N, K]
    aligned = n - n % max(1, 16 // out.element_size())
    if transposed and bias is None and depth == k and aligned > 0:
        torch.mm(a, b[:, :aligned], out=product[:, :aligned])
        if aligned < n:
            torch.mm(a, b[:, aligned:], out=product[:, aligned:n])
    else:
        if transposed:
            rows = torch.empty((columns, depth), dtype=b.dtype, device=b.device)
            rows[:n, :k].copy_(b.mT)
            rows[n:].zero_()
            rows[:n, k:].zero_()
            wide = rows.mT
        else:
            wide = torch.empty((depth, columns), dtype=b.dtype, device=b.device)
            wide[:k, :n].copy_(b)
            wide[:k, n:].zero_()
            wide[k:].zero_()
        if depth != k:
            deep = torch.empty((m, depth), dtype=a.dtype, device=a.device)
            deep[:, :k].copy_(a)
            deep[:, k:].zero_()
            a = deep
        if bias is None:
            torch.mm(a, wide, out=product)
        else:
            padded_bias = torch.zeros((columns,), dtype=bias.dtype, device=bias.device)
            padded_bias[:n].copy_(bias)
            torch.addmm(padded_bias, a, wide, out=product)
    if not in_place:
        out.copy_(product[:, :n])


def mm_padded_source(name: str) -> str:
    """`mm_padded`'s source as a function called `name` (the Triton backend prints it
    into its modules, which import nothing but torch and Triton)."""
    return inspect.getsource(mm_padded).replace("def mm_padded(", f"def {name}(", 1)


def padded_output(
    empty: Callable[..., torch.Tensor], shape: tuple[int, ...], columns: int, dtype: torch.dtype
) -> torch.Tensor:
    """A tensor of `shape` whose rows are `columns` apart: the first `shape[-1]` columns
    of a [rows, columns] buffer from `empty(size, stride, dtype)`, for a padded GEMM to
    write its product into whole (`mm_padded`), as torch.compile's padded matmuls
    return their results (a row pitch of whole 16-byte vectors)."""
    rows = math.prod(shape[:-1])
    return empty((rows, columns), (columns, 1), dtype)[:, : shape[-1]].view(shape)


def padded_outputs(host: tile_host.HostFunction) -> dict[SSAValue, int]:
    """The output params of `host` a padded 2-d library GEMM writes (directly or
    through a view) and nothing else reads or writes, with the GEMM's padded N: a
    backend allocates them with that row pitch (`padded_output`), so the GEMM writes
    its product in place and the output keeps the pitch, as torch.compile's padded
    matmuls return theirs (GPT-2's logits: no copy of the 2048 x 50257 product)."""
    outputs = {p.value: tuple(p.shape) for p in host.params if p.output}
    views = {s.value: s.source for s in host.steps if isinstance(s, tile_host.View)}

    def root(v: SSAValue) -> SSAValue:  # through chains of views
        while v in views:
            v = views[v]
        return v

    sources = {v: root(v) for v in views}
    used: Counter[SSAValue] = Counter(
        sources.get(v, v)
        for step in host.steps
        if not isinstance(step, tile_host.View)  # a view only names bytes
        for v in tile_host.step_buffers(step)
    )
    found = {}
    for step in host.steps:
        if not isinstance(step, tile_host.Gemm) or step.transpose_a:
            continue
        sb, sc = (tuple(v.type.get_shape()) for v in (step.rhs, step.out))  # type: ignore[attr-defined]
        columns = gemm_columns(step.op)
        target = sources.get(step.out, step.out)
        if len(sb) != 2 or columns == sc[-1] or target not in outputs or used[target] != 1:
            continue
        if outputs[target][-1] == sc[-1]:  # only leading dims regrouped: rows stay rows
            found[target] = columns
    return found
