"""Buffers of dynamic size (`?`) on the CUDA backend: kernels that take their sizes as
`long long` arguments, host functions that compute grids, allocate and view per call, and
nn functions of dynamic size lowered at the size hints and compiled once for every
size. On CPU through the emulation (g++) and nvcc's compile check, on the GPU where
there is one; at sizes nobody chose: 0, 1, ragged, many."""

from __future__ import annotations

import logging
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from test_dynamic_sizes import (
    HOST_STEPS,
    ROWS,
    SIZES,
    _host_steps_reference,
    _row_kernel,
    check_host_steps_on_the_gpu,
)
from xdsl.dialects import func

import fuseopt
from fuseopt.backends.cuda.backend import CudaBackend, CudaFunction
from fuseopt.backends.cuda.emulation import EmulatedFunction, emulator_available
from fuseopt.backends.cuda.printer import print_cuda
from fuseopt.backends.per_size import PerSizeFunction, parse_specialized
from fuseopt.diagnostics import CompileError
from fuseopt.dialects.dtypes import torch_dtype
from fuseopt.passes.generalize_sizes import SizedFunction

emulated = pytest.mark.skipif(not emulator_available(), reason="g++ is not installed")
on_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

NN_FUNCTIONS = {
    "rmsnorm_silu_gate": """
func.func @main(%x: tensor<?x320xbf16>, %w: tensor<320xbf16>, %g: tensor<?x320xbf16>) -> tensor<?x320xbf16> {
  %n = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<?x320xbf16>, tensor<320xbf16> -> tensor<?x320xbf16>
  %s = nn.silu %g : tensor<?x320xbf16>
  %y = nn.mul %n, %s : tensor<?x320xbf16>
  func.return %y : tensor<?x320xbf16>
}""",
    "softmax_ragged_rows": """
func.func @main(%x: tensor<?x1000xf32>) -> tensor<?x1000xf32> {
  %y = nn.softmax %x axis 1 : tensor<?x1000xf32>
  func.return %y : tensor<?x1000xf32>
}""",
    "linear_gelu": """
func.func @main(%w: tensor<96x64xf32>, %b: tensor<96xf32>, %x: tensor<?x5x64xf32>) -> tensor<?x5x96xf32> {
  %0 = nn.linear %x, %w, %b : tensor<?x5x64xf32>, tensor<96x64xf32>, tensor<96xf32> -> tensor<?x5x96xf32>
  %1 = nn.gelu %0 : tensor<?x5x96xf32>
  func.return %1 : tensor<?x5x96xf32>
}""",
    # a decode step over a cache of any length: the split attention reads it at run time
    "decode_attention": """
func.func @main(%q: tensor<2x8x1x32xbf16>, %k: tensor<2x2x?x32xbf16>, %v: tensor<2x2x?x32xbf16>, %m: tensor<2x1x1x?xbf16>) -> tensor<2x8x1x32xbf16> {
  %o = nn.attention %q, %k, %v mask %m {scale = 0.1767766952966369 : f64} : tensor<2x8x1x32xbf16>, tensor<2x2x?x32xbf16>, tensor<2x2x?x32xbf16>, tensor<2x1x1x?xbf16> -> tensor<2x8x1x32xbf16>
  func.return %o : tensor<2x8x1x32xbf16>
}""",
}
"""nn functions of one dynamic size, each lowered by the CUDA target's pipeline."""

NN_SIZES = {"decode_attention": (1, 5, 64, 65, 300)}
"""Sizes each function runs at (default: 1, 3, 17, 130)."""


def with_vector_width(text: str) -> str:
    """Hand-written tile kernels with the `vector_width` tile-promote would set (the
    CUDA printer reads it)."""
    return re.sub(
        r"num_stages = (\d+) : i64}", r"num_stages = \1 : i64, vector_width = 4 : i64}", text
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where emulation libraries are built (shared by the module's tests)."""
    return tmp_path_factory.mktemp("cuda-dynamic-emu")


def _inputs(text: str, n: int) -> tuple[list[np.ndarray], list[torch.Tensor]]:
    """Random inputs of the function in `text` at size `n` (NumPy for the reference
    interpreter, tensors of its element types)."""
    f = next(o for o in fuseopt.parse(text.replace("?", str(n))).ops if isinstance(o, func.FuncOp))
    rng = np.random.default_rng(n)
    types = f.function_type.inputs.data
    arrays = [rng.uniform(-1.5, 1.5, size=tuple(t.get_shape())).astype(np.float32) for t in types]
    tensors = [
        torch.from_numpy(a).to(torch_dtype(t.element_type))
        for a, t in zip(arrays, types, strict=True)
    ]
    return arrays, tensors


def _close(got: torch.Tensor, want: np.ndarray, tol: float) -> None:
    want = np.asarray(want, dtype=np.float32)
    err = float(np.abs(got.float().cpu().numpy().reshape(want.shape) - want).max(initial=0.0))
    assert err <= tol * max(float(np.abs(want).max(initial=0.0)), 1e-6), err


@emulated
def test_one_kernel_set_runs_every_size(workdir: Path) -> None:
    f = fuseopt.load_mlir(with_vector_width(ROWS), backend="cuda")
    assert isinstance(f, CudaFunction)
    assert all(k.sizes for k in f.cuda_kernels)  # each takes its dynamic dims
    run = EmulatedFunction(f, workdir)
    for n in SIZES:
        x = torch.randn(n, 100)
        (y,) = run(x)
        assert y.shape == (n,)
        torch.testing.assert_close(y, (2 * x).sum(1), rtol=1e-5, atol=1e-5)


@emulated
def test_random_row_lengths_blocks_and_sizes(workdir: Path) -> None:
    """Property: any row length, power-of-two block and number of rows, against NumPy."""
    rng = random.Random(20261128)
    for _ in range(4):
        cols = rng.choice([1, 3, 16, 100, 130])
        block_cols = max(1, 1 << (cols - 1).bit_length())
        text = with_vector_width(_row_kernel(cols, rng.choice([1, 2, 4, 8]), block_cols))
        run = EmulatedFunction(fuseopt.load_mlir(text, backend="cuda"), workdir)
        for n in (0, 1, rng.randrange(2, 40)):
            x = np.random.default_rng(n + cols).standard_normal((n, cols)).astype(np.float32)
            (y,) = run(torch.from_numpy(x))
            np.testing.assert_allclose(y.numpy(), np.exp(x).sum(1), rtol=1e-5, atol=1e-5)


@emulated
@pytest.mark.parametrize("n", [0, 1, 3, 17])
def test_views_gemms_and_torch_calls_of_dynamic_size(n: int, workdir: Path) -> None:
    """A dynamic view, library GEMMs (one padded), a per-call temporary and a PyTorch
    call in the CUDA host function, against PyTorch."""
    run = EmulatedFunction(
        fuseopt.load_mlir(with_vector_width(HOST_STEPS), backend="cuda"), workdir
    )
    g = torch.Generator().manual_seed(n)
    x, w = torch.randn(n, 4, 8, generator=g), torch.randn(16, 32, generator=g)
    head = torch.randn(1025, 1024, generator=g) / 32
    for a, b in zip(run(x, w, head), _host_steps_reference(x, w, head), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


@emulated
@pytest.mark.parametrize("name", list(NN_FUNCTIONS))
def test_an_nn_function_of_dynamic_size_compiles_once(name: str, workdir: Path) -> None:
    """Lowered at the size hints by the CUDA target's pipeline: one compiled function
    whose kernels take the size, against the reference interpreter at every size."""
    text = NN_FUNCTIONS[name]
    compiled = CudaBackend().compile(fuseopt.parse(text), "main", {})
    assert isinstance(compiled, CudaFunction), type(compiled)
    assert any(k.sizes for k in compiled.cuda_kernels)
    run = EmulatedFunction(compiled, workdir)
    tol = 2e-2 if "bf16" in text else 1e-4
    for n in NN_SIZES.get(name, (1, 3, 17, 130)):
        arrays, tensors = _inputs(text, n)
        want = fuseopt.interpret(fuseopt.parse(text.replace("?", str(n))), "main", *arrays)
        for got, ref in zip(run(*tensors), want, strict=True):
            _close(got, ref, tol)


@emulated
def test_inputs_of_different_sizes_are_an_error(workdir: Path) -> None:
    """The inputs' dynamic dims are one size (`tile.same_size`): a call breaking that
    is refused, never run on the wrong sizes."""
    text = NN_FUNCTIONS["rmsnorm_silu_gate"]
    run = EmulatedFunction(CudaBackend().compile(fuseopt.parse(text), "main", {}), workdir)
    x, w = torch.randn(3, 320, dtype=torch.bfloat16), torch.randn(320, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="must be one size"):
        run(x, w, torch.randn(4, 320, dtype=torch.bfloat16))
    with pytest.raises(CompileError, match=r"of shape \(\?, 320\)"):
        run(torch.randn(3, 32, dtype=torch.bfloat16), w, x)


TRANSPOSE = """
func.func @main(%x: tensor<?x3xf32>) -> tensor<3x?xf32> {
  %a = nn.transpose %x [1, 0] : tensor<?x3xf32> -> tensor<3x?xf32>
  func.return %a : tensor<3x?xf32>
}"""


def test_a_size_dependent_lowering_compiles_per_size(caplog: pytest.LogCaptureFixture) -> None:
    """A frontend region whose lowering depends on the size (a transpose of the dynamic
    dim) is compiled per size, logged; a `?` module the user wrote gets the error."""
    caplog.set_level(logging.INFO, logger="fuseopt")
    sized = SizedFunction(
        "main", lambda n: parse_specialized(TRANSPOSE.replace("?", str(n))), ((0, 0),)
    )
    assert isinstance(CudaBackend().compile(sized, "main", {}), PerSizeFunction)
    assert "main is compiled per size" in caplog.text
    with pytest.raises(CompileError, match="depends on the size"):
        CudaBackend().compile(fuseopt.parse(TRANSPOSE), "main", {})


NVCC = shutil.which("nvcc")

REGISTER_DOT = "\n".join(
    line
    for line in (
        Path(__file__).resolve().parents[1] / "filecheck/backends/cuda/dynamic-register-dot.mlir"
    )
    .read_text()
    .splitlines()
    if not line.startswith("//")
)
"""A matmul over operands of a dynamic number of columns (see that FileCheck file)."""


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_kernels_of_dynamic_size_compile_with_nvcc(tmp_path: Path) -> None:
    from test_cuda_compile import nvcc_failures

    sources = [
        k.source for k in fuseopt.load_mlir(with_vector_width(ROWS), backend="cuda").cuda_kernels
    ]
    for text in NN_FUNCTIONS.values():
        sources += [
            k.source for k in CudaBackend().compile(fuseopt.parse(text), "main", {}).cuda_kernels
        ]
    # operands in registers (no shared memory for staging), addressed at a dynamic pitch
    staged = fuseopt.run_pipeline(fuseopt.parse(REGISTER_DOT), "tile-promote{shared-bytes=64}")
    sources += [k.source for k in print_cuda(staged)]
    assert nvcc_failures(sources, tmp_path) == []


@on_gpu
def test_on_the_gpu_one_compiled_function_serves_every_size() -> None:
    f = fuseopt.load_mlir(with_vector_width(ROWS), backend="cuda")
    for n in (*SIZES, 1000, 4097):
        x = torch.randn(n, 100, device="cuda")
        (y,) = f(x)
        torch.testing.assert_close(y, (2 * x).sum(1), rtol=1e-5, atol=1e-4)
    base = torch.randn(5 * 100 + 1, device="cuda")
    x = base[1:].view(5, 100)  # 4 bytes past an aligned pointer: the scalar path
    torch.testing.assert_close(f(x)[0], (2 * x).sum(1), rtol=1e-5, atol=1e-4)


@on_gpu
@pytest.mark.parametrize("name", list(NN_FUNCTIONS))
def test_on_the_gpu_nn_functions_of_dynamic_size(name: str) -> None:
    text = NN_FUNCTIONS[name]
    compiled = CudaBackend().compile(fuseopt.parse(text), "main", {})
    tol = 2e-2 if "bf16" in text else 1e-3  # cuBLAS may use TF32
    for n in (*NN_SIZES.get(name, (1, 3, 17, 130)), 4099):
        arrays, tensors = _inputs(text, n)
        want = fuseopt.interpret(fuseopt.parse(text.replace("?", str(n))), "main", *arrays)
        for got, ref in zip(compiled(*(t.cuda() for t in tensors)), want, strict=True):
            _close(got, ref, tol)


@on_gpu
def test_on_the_gpu_reduce_overhead_replays_each_size_as_recorded() -> None:
    f = fuseopt.load_mlir(with_vector_width(HOST_STEPS), backend="cuda", mode="reduce-overhead")
    check_host_steps_on_the_gpu(f, (5, 3, 5, 3, 7, 0, 5))
