"""Buffers of dynamic size (`?`) at the tile level: kernels that read their sizes at run
time (`tile.dim`, masks with dynamic bounds), host functions that compute grids and
allocate per call, on the Triton backend (its CPU interpreter here, the GPU where there
is one) and the tile interpreter, at sizes nobody chose: 0, 1, ragged, many."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import fuseopt

ROWS = (
    Path(__file__).resolve().parents[1] / "filecheck/backends/triton/dynamic-sizes.mlir"
).read_text()
"""Doubles a [?, 100] input into a temporary, then sums each of its rows (two kernels)."""

SIZES = (0, 1, 2, 3, 7, 64, 129)


def _row_kernel(cols: int, block_rows: int, block_cols: int) -> str:
    """A one-kernel module: y[r] = sum(exp(x[r, :])) over a [?, cols] input, each program
    on `block_rows` rows of `block_cols` (a power of two >= cols) columns."""
    return f"""
tile.kernel @rows grid 1 (%x: memref<?x{cols}xf32>, %y: memref<?xf32>) attributes {{schedule = "row_reduction", num_warps = 4 : i64, num_stages = 1 : i64}} {{
  %p = tile.program_id 0
  %b = arith.constant {block_rows} : index
  %c0 = arith.constant 0 : index
  %r = arith.muli %p, %b : index
  %n = tile.dim %x, 0 : memref<?x{cols}xf32>
  %t = tile.load %x[%r, %c0] : memref<?x{cols}xf32> -> tensor<{block_rows}x{block_cols}xf32>
  %e = nn.exp %t : tensor<{block_rows}x{block_cols}xf32>
  %m = tile.mask [%r, %c0] bounds [%n, {cols}] : tensor<{block_rows}x{block_cols}xi1>
  %z = nn.constant 0.0 : tensor<{block_rows}x{block_cols}xf32>
  %s = nn.select %m, %e, %z : tensor<{block_rows}x{block_cols}xf32>
  %sum = tile.reduce sum %s axis 1 : tensor<{block_rows}x{block_cols}xf32> -> tensor<{block_rows}xf32>
  tile.store %sum, %y[%r] : tensor<{block_rows}xf32>, memref<?xf32>
  tile.return
}}
func.func @main(%x: memref<?x{cols}xf32>, %y: memref<?xf32> {{tile.output, tile.dims_from = array<i64: 0, 0>}}) {{
  %n = tile.dim %x, 0 : memref<?x{cols}xf32>
  %b = arith.constant {block_rows} : index
  %g = arith.ceildivui %n, %b : index
  tile.launch @rows grid [%g] (%x, %y) : memref<?x{cols}xf32>, memref<?xf32>
  func.return
}}
"""


def test_triton_runs_one_compiled_module_at_every_size() -> None:
    f = fuseopt.load_mlir(ROWS, backend="triton")
    for n in SIZES:
        x = torch.randn(n, 100)
        (y,) = f(x)
        assert y.shape == (n,)
        torch.testing.assert_close(y, (2 * x).sum(1), rtol=1e-5, atol=1e-5)


def test_the_tile_interpreter_runs_it_at_every_size() -> None:
    module = fuseopt.parse(ROWS, "rows.mlir")
    for n in SIZES:
        x = np.random.default_rng(n).standard_normal((n, 100)).astype(np.float32)
        (y,) = fuseopt.interpret(module, "rows_host", x)
        assert np.asarray(y).shape == (n,)
        np.testing.assert_allclose(np.asarray(y), (2 * x).sum(1), rtol=1e-5, atol=1e-5)


def test_an_output_size_must_come_from_a_dynamic_dim() -> None:
    bad = ROWS.replace("tile.dims_from = array<i64: 0, 0>", "tile.dims_from = array<i64: 0, 1>")
    with pytest.raises(fuseopt.CompileError, match="names dim 1 of parameter 0: not a dynamic"):
        fuseopt.load_mlir(bad, backend="triton")


def test_a_static_dim_still_checks_its_size() -> None:
    f = fuseopt.load_mlir(ROWS, backend="triton")
    with pytest.raises(
        fuseopt.CompileError, match=r"input 0: expected \(\?, 100\) torch.float32, got \(4, 99\)"
    ):
        f(torch.randn(4, 99))
    with pytest.raises(fuseopt.CompileError, match="expected"):
        f(torch.randn(4, 100, 1))


def test_random_row_lengths_blocks_and_sizes() -> None:
    """Property: any row length, any power-of-two block, any number of rows, on both
    the Triton interpreter and the tile interpreter, against NumPy."""
    rng = random.Random(20261127)
    for _ in range(6):
        cols = rng.choice([1, 3, 16, 100, 130])
        block_cols = max(1, 1 << (cols - 1).bit_length())
        block_rows = rng.choice([1, 2, 4, 8])
        text = _row_kernel(cols, block_rows, block_cols)
        f = fuseopt.load_mlir(text, backend="triton")
        module = fuseopt.parse(text, "random.mlir")
        for n in (0, 1, rng.randrange(2, 40)):
            x = np.random.default_rng(n + cols).standard_normal((n, cols)).astype(np.float32)
            want = np.exp(x).sum(1)
            (y,) = f(torch.from_numpy(x))
            np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
            (z,) = fuseopt.interpret(module, "main", x)
            np.testing.assert_allclose(np.asarray(z), want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_one_compiled_kernel_serves_every_size() -> None:
    """The GridLauncher compiles once, then launches the compiled kernel directly at
    every size; a misaligned input (a view one element in) takes the JIT path, right."""
    from fuseopt.backends.triton.launchers import GridLauncher

    f = fuseopt.load_mlir(ROWS, backend="triton")
    for n in (*SIZES, 1000, 4097):
        x = torch.randn(n, 100, device="cuda")
        (y,) = f(x)
        torch.testing.assert_close(y, (2 * x).sum(1), rtol=1e-5, atol=1e-4)
    module = f.host(False).__globals__
    installed = [  # each launcher is now the direct closure around its GridLauncher
        cell.cell_contents
        for name, v in module.items()
        if name.startswith("launch_")
        for cell in getattr(v, "__closure__", None) or ()
    ]
    launchers = [v for v in installed if isinstance(v, GridLauncher)]
    assert len(launchers) == 2
    assert all(len(launcher.runners) == 1 for launcher in launchers)
    base = torch.randn(5 * 100 + 1, device="cuda")
    x = base[1:].view(5, 100)  # 4 bytes past an aligned pointer
    assert x.is_contiguous() and x.data_ptr() % 16
    (y,) = f(x)
    torch.testing.assert_close(y, (2 * x).sum(1), rtol=1e-5, atol=1e-4)


HOST_STEPS = (
    Path(__file__).resolve().parents[1] / "filecheck/backends/triton/dynamic-host-steps.mlir"
).read_text()
"""A dynamic view, a library GEMM, a kernel into a per-call temporary, a padded GEMM
(N = 1025) and a PyTorch call, all on [?, ...] buffers."""


def _host_steps_reference(x: torch.Tensor, w: torch.Tensor, head: torch.Tensor) -> list:
    rows = x.reshape(len(x), 32)
    widened = torch.nn.functional.pad(rows, (0, 1024 - 32))
    return [rows @ w.T, widened @ head.T, torch.flip(x, [1])]


@pytest.mark.parametrize("n", [0, 1, 3, 17])
def test_views_gemms_and_torch_calls_of_dynamic_size(n: int) -> None:
    """Triton (CPU interpreter and torch on CPU) and the tile interpreter, against
    PyTorch; the padded GEMM's output keeps its row pitch at every size."""
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, 4, 8, generator=g)
    w = torch.randn(16, 32, generator=g)
    head = torch.randn(1025, 1024, generator=g) / 32
    want = _host_steps_reference(x, w, head)
    f = fuseopt.load_mlir(HOST_STEPS, backend="triton")
    got = f(x, w, head)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    if n > 1:  # (a dim of one row has any stride)
        assert got[1].stride() == (1028, 1)
    module = fuseopt.parse(HOST_STEPS, "steps.mlir")
    interpreted = fuseopt.interpret(module, "main", x.numpy(), w.numpy(), head.numpy())
    for a, b in zip(interpreted, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), b.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("n", [1, 5, 300])
def test_views_gemms_and_torch_calls_of_dynamic_size_on_the_gpu(n: int) -> None:
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, 4, 8, generator=g).cuda()
    w = torch.randn(16, 32, generator=g).cuda()
    head = (torch.randn(1025, 1024, generator=g) / 32).cuda()
    want = _host_steps_reference(x.double(), w.double(), head.double())
    got = fuseopt.load_mlir(HOST_STEPS, backend="triton")(x, w, head)
    for a, b in zip(got, want, strict=True):  # cuBLAS may use TF32: tolerances for it
        torch.testing.assert_close(a.double(), b, rtol=2e-2, atol=2e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_reduce_overhead_replays_each_size_as_recorded() -> None:
    """CUDA graphs of a function of dynamic size are recorded per input shapes: sizes
    that alternate on reused addresses (the caching allocator hands the same blocks
    back) each get their own graph, never another size's."""
    f = fuseopt.load_mlir(HOST_STEPS, backend="triton", mode="reduce-overhead")
    check_host_steps_on_the_gpu(f, (5, 3, 5, 3, 7, 5, 3))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_reduce_overhead_records_only_sizes_seen_before(backend: str) -> None:
    """A size met once runs plainly (a decode step over a growing cache meets each
    length once: recording it would cost a capture never replayed); a size met again
    is recorded and replayed."""
    from fuseopt.backends.cuda_graphs import CudaGraphFunction

    f = fuseopt.load_mlir(HOST_STEPS, backend=backend, mode="reduce-overhead")
    assert isinstance(f, CudaGraphFunction)
    check_host_steps_on_the_gpu(f, (1, 2, 3, 4, 5, 6, 7))
    assert not any(f.graphs.values())
    check_host_steps_on_the_gpu(f, (7, 7, 7))
    assert any(f.graphs.values())


def check_host_steps_on_the_gpu(f: Any, sizes: tuple[int, ...]) -> None:
    """Call HOST_STEPS compiled as `f` on GPU inputs of each of `sizes` rows in turn,
    against PyTorch in float64 (tolerances for cuBLAS's TF32)."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(16, 32, generator=g).cuda()
    head = (torch.randn(1025, 1024, generator=g) / 32).cuda()
    for n in sizes:
        x = torch.randn(n, 4, 8, generator=g).cuda()
        want = _host_steps_reference(x.double(), w.double(), head.double())
        got = f(x, w, head)
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a.double(), b, rtol=2e-2, atol=2e-2)
        del got, x
