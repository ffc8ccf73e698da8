"""The CUDA printer and runtime on a machine without a GPU.

- what each schedule prints (vector access, shuffles, shared memory, WMMA, library
  GEMM routing, element-parallel whole-tensor kernels);
- identifiers are sanitized: input names never reach the source unchecked;
- `fuse-opt -t cuda`, `save()`, the no-GPU error, and compile errors that show the
  compiler's message and the generated file's path.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from xdsl.dialects.builtin import IntegerAttr, StringAttr, i64

import fuseopt
from fuseopt.backends.cuda.backend import CudaBackend, CudaFunction
from fuseopt.backends.cuda.names import NameTable, sanitize
from fuseopt.backends.cuda.printer import print_cuda
from fuseopt.backends.cuda.runtime import CudaUnavailableError, compile_cubin, find_nvcc
from fuseopt.diagnostics import CompileError
from fuseopt.dialects import tile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_nn_fuse_workloads import (  # noqa: E402
    column_variance,
    gelu_bias,
    layernorm,
    mlp,
    rmsnorm,
    rmsnorm_rope,
    softmax,
)


def compile_text(text: str) -> CudaFunction:
    """The cuda backend's compiled function for `@main` of `text` (no GPU needed)."""
    return CudaBackend().compile(fuseopt.parse(text), "main", {})


def sources(text: str) -> dict[str, str]:
    """Schedule -> the source of the first kernel with that schedule."""
    out: dict[str, str] = {}
    for k in compile_text(text).cuda_kernels:
        out.setdefault(k.schedule, k.source)
    return out


def test_pointwise_uses_16_byte_vectors_with_a_scalar_tail() -> None:
    src = sources(gelu_bias(64, 1000))["pointwise"]
    assert 'extern "C" __global__' in src
    assert "fo_copy_vec<__nv_bfloat16, 8>" in src  # 8 x bf16 = 16 bytes
    assert "fo_aligned(" in src and "< 1000" in src  # tail masked at the row end
    assert "fo_gelu(" in src


def test_row_reduction_uses_warp_shuffles_and_shared_memory() -> None:
    src = sources(layernorm(64, 4096))["row_reduction"]
    assert "fo_group_allreduce<32>" in src and "fo_sum_op()" in src
    assert "__syncthreads();" in src and "fo_smem" in src


def test_looped_reduction_caches_the_row_in_shared_memory() -> None:
    src = sources(softmax(8, 32768))["row_reduction_looped"]
    assert "shared" in src and "fo_max_op()" in src
    # row prefetch, then max, sum and store loops (the row fits the backend's row cache,
    # `row-cache-bytes`: one loop per level then reads shared memory, not HBM)
    assert src.count("for (long long") == 4
    # the row is read from HBM once: only the prefetch loop reads the input buffer p0
    body = src.split("#ifndef __CUDACC_RTC__")[-2]
    loops = body.split("for (long long")[1:]
    reads = [len(re.findall(r"\bp0 \+|\bp0\[", loop)) for loop in loops]
    assert reads[0] > 0 and reads[1:] == [0, 0, 0]
    assert "fo_cp_async16(" in body


def test_looped_rows_go_in_4096_column_chunks_with_8_warps() -> None:
    """The CUDA pipeline's `row-chunk=4096`: with a 64 KiB row cache only three blocks fit
    an SM, so each takes 8 warps (4 with 2048-column chunks ran 22% slower)."""
    src = sources(softmax(8, 32768))["row_reduction_looped"]
    assert "block (256)" in src and "num_warps 8" in src


COLUMN_VARIANCE = column_variance(65536, 1024)


def test_looped_column_variance_loop_has_no_barrier() -> None:
    """A split column variance (`x.var(0)` of 64K rows, as Dynamo's graph decomposes
    it: the mean, or a constant column's value, then the squared deviations) keeps Welford's statistics per
    lane; the step count all rows share is one uniform register, so the loop body
    neither exchanges it through shared memory nor waits at a barrier (four barriers
    a step, 2.5x Triton's kernel time, before)."""
    src = sources(COLUMN_VARIANCE)["row_reduction_looped"]
    body = src.split("#ifndef __CUDACC_RTC__")[-2]
    loop = body.split("for (long long iv")[1]
    loop = loop[: loop.index("\n  }\n")]  # the loop's body, up to its closing brace
    assert "p0 + fo_g" in loop  # the loop reads the input
    assert "__syncthreads" not in loop and "sm[" not in loop


def test_weight_row_is_loaded_after_the_block_reduction() -> None:
    """Loads of read-only buffers print just before their first use (emission_order):
    RMSNorm's weight row (p1) and its broadcast are not held across the reduction's
    barrier, and the kernel does not spill at 40 registers."""
    body = sources(rmsnorm(1, 64, 5120))["row_reduction"].split("#ifndef __CUDACC_RTC__")[-2]
    barrier = body.index("__syncthreads();")
    x_load = body.index("p0 + fo_g")
    w_load = body.index("p1 + fo_g")
    assert x_load < barrier < w_load


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_rmsnorm_kernel_does_not_spill(tmp_path: Path) -> None:
    source = sources(rmsnorm(1, 64, 5120))["row_reduction"]
    path = tmp_path / "rmsnorm.cu"
    path.write_text(source)
    out = subprocess.run(
        [str(find_nvcc()), "-arch=sm_90", "-Xptxas", "-v", "-c", str(path), "-o", "/dev/null"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "0 bytes spill stores" in out.stderr, out.stderr


def test_matmul_uses_tensor_cores_with_staged_operands_and_fused_epilogue() -> None:
    src = sources(mlp(256, 256, 1024))["matmul"]
    assert "#include <mma.h>" in src
    assert "nvcuda::wmma::mma_sync" in src and "nvcuda::wmma::col_major" in src
    assert "fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>" in src
    assert "store_matrix_sync" in src and "fo_gelu(" in src  # epilogue on the accumulator
    assert "cudaFuncSetAttribute" in src  # more than 48 KB of shared memory


BIG_TILES = """func.func @main(%x: tensor<512x512xbf16>, %w: tensor<512x512xbf16>) -> tensor<512x512xbf16> {
  %m = nn.matmul %x, %w transpose_b : tensor<512x512xbf16>, tensor<512x512xbf16> -> tensor<512x512xbf16>
  %g = nn.gelu %m : tensor<512x512xbf16>
  func.return %g : tensor<512x512xbf16>
}
"""
BIG_TILING = (
    "nn-decompose,canonicalize,cse,nn-fuse{route=kernel},"
    "convert-nn-to-tile{block-m=128 block-n=128 block-k=256},"
)


def test_matmul_follows_tile_promote_staging_of_big_tiles() -> None:
    # 128x256 operand tiles: one padded stage is 2 x 128 x 264 x 2 = 132 KiB, two do
    # not fit 227 KiB: tile-promote records one stage (and the 64 KiB accumulator after
    # it), which the printer obeys (synchronous copies, no cp.async), taking exactly the
    # recorded shared memory
    module = fuseopt.run_pipeline(fuseopt.parse(BIG_TILES, "big.mlir"), BIG_TILING + "tile-promote")
    kernel = next(k for k in module.walk() if isinstance(k, tile.KernelOp))
    assert kernel.attributes["operand_staging"] == StringAttr("shared")
    assert kernel.attributes["num_stages"] == IntegerAttr(1, i64)
    (k,) = print_cuda(module)
    assert k.smem_bytes == kernel.attributes["shared_bytes"].value.data == 200704  # type: ignore[union-attr]
    assert "fo_cp_async" not in k.source and "fo_copy_vec<__nv_bfloat16, 8>(pipe" in k.source


def test_shared_memory_past_the_device_limit_is_a_located_error() -> None:
    # two stages of the big tiles (264 KiB) as tile-promote was told to allow: the
    # error points at the op the kernel was tiled from and names the knobs to turn
    module = fuseopt.parse(BIG_TILES, "big.mlir")
    spec = BIG_TILING + "tile-promote{shared-bytes=300000 num-stages=2}"
    fuseopt.run_pipeline(module, spec)
    with pytest.raises(CompileError) as info:
        print_cuda(module)
    text = str(info.value)
    assert text.startswith("big.mlir:2:3: error: kernel needs 270336 bytes of shared memory")
    assert "block-k" in text and "tile-promote{shared-bytes" in text


def test_library_gemm_route_calls_cublas_and_generates_the_epilogue() -> None:
    fn = compile_text(mlp(16384, 4096, 16384))
    assert fn.host_code.info.launches.count("library_gemm") == 2
    assert [k.schedule for k in fn.cuda_kernels] == ["pointwise", "pointwise"]
    assert "fo_gelu(" in fn.cuda_kernels[0].source


def test_whole_tensor_kernels_are_element_parallel() -> None:
    x, y = "tensor<2048x4096xbf16>", "tensor<4096x2048xbf16>"
    fn = compile_text(
        f"""func.func @main(%x: {x}) -> {y} {{
  %t = nn.transpose %x [1, 0] : {x} -> {y}
  func.return %t : {y}
}}"""
    )
    whole = [k for k in fn.cuda_kernels if k.schedule == "whole_tensor"]
    assert whole and all(k.grid is not None and k.grid[0] > 1 for k in whole)
    assert "gridDim.x" in whole[0].source


def test_int64_min_is_spelled_as_an_expression() -> None:
    """C++ has no literal for INT64_MIN (9223372036854775808LL overflows before the minus
    applies): a constant of that value prints as `(-9223372036854775807LL - 1)`."""
    fn = compile_text(
        """func.func @main(%x: tensor<8xi64>) -> tensor<8xi64> {
  %c = nn.constant -9223372036854775808 : tensor<8xi64>
  %y = nn.max %x, %c : tensor<8xi64>
  func.return %y : tensor<8xi64>
}"""
    )
    source = "\n".join(k.source for k in fn.cuda_kernels)
    assert "(-9223372036854775807LL - 1)" in source
    assert "9223372036854775808" not in source


def test_rotary_is_one_kernel_reading_each_half_at_its_offset() -> None:
    (k,) = compile_text(rmsnorm_rope(4, 2048, 32, 128)).cuda_kernels
    assert k.schedule == "row_reduction"
    assert "+ 64" in k.source  # the second half of each head: the part at offset 64


def test_launch_configuration_is_in_the_source() -> None:
    (k,) = compile_text(softmax(4096, 8192)).cuda_kernels
    assert re.search(r"// launch: grid \(4096\), block \(\d+\)", k.source)
    assert f"launch_{k.c_name}(" in k.source and "#ifndef __CUDACC_RTC__" in k.source


def test_sanitize_never_lets_text_through() -> None:
    evil = 'f"); import os; ("'
    name = sanitize(evil)
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
    assert sanitize("int") != "int" and sanitize("9lives")[0].isalpha()
    assert sanitize("fo_tid").startswith("u_") and sanitize("__x") != "__x"
    table = NameTable()
    assert table.fresh("a") != table.fresh("a")


def test_hostile_kernel_and_function_names_are_sanitized() -> None:
    text = r"""func.func @"f\"); import os; (\"" (%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = nn.exp %x : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
"""
    module = fuseopt.parse(text)
    fuseopt.run_pipeline(module, "standard")
    kernels = print_cuda(module)
    for k in kernels:
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k.c_name)
        assert "import os" not in k.source and '\\"' not in k.source


def test_fuse_opt_prints_one_translation_unit_per_kernel(tmp_path: Path) -> None:
    path = tmp_path / "gelu.mlir"
    path.write_text(gelu_bias(8, 256) + "\n")
    out = subprocess.run(
        [sys.executable, "-m", "fuseopt.cli", str(path), "--pipeline", "standard", "-t", "cuda"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0 and "No module named fuseopt.cli" in out.stderr:
        pytest.skip("fuseopt.cli is not runnable as a module")
    assert out.returncode == 0, out.stderr
    files = re.findall(r"// ===== file: (\S+) =====", out.stdout)
    assert [Path(f).suffix for f in files] == [".cu", ".py"]  # the kernel, the host function
    assert out.stdout.count("#include <cuda_bf16.h>") == 1


def test_save_writes_the_cu_files(tmp_path: Path) -> None:
    fn = compile_text(mlp(64, 64, 128))
    paths = fn.save(tmp_path / "kernels")
    assert [p.suffix for p in paths] == [".cu"] * len(fn.cuda_kernels)
    assert paths[0].read_text() == fn.cuda_kernels[0].source
    assert [r.source for r in fn.kernels] == [k.source for k in fn.cuda_kernels]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without a GPU")
def test_calling_without_a_gpu_is_a_clear_error() -> None:
    fn = compile_text(gelu_bias(8, 256))
    with pytest.raises(CudaUnavailableError, match="needs an NVIDIA GPU"):
        fn(torch.randn(8, 256).bfloat16(), torch.randn(256).bfloat16())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_compiling_without_a_gpu_prints_and_saves_and_calls_raise(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU())
    compiled = fuseopt.compile(model, torch.randn(2, 8), backend="cuda")
    assert compiled.kernels and all(k.suffix == ".cu" for k in compiled.kernels)
    assert all('extern "C" __global__' in (k.source or "") for k in compiled.kernels)
    compiled.save(tmp_path)
    assert list(tmp_path.glob("*.cu"))
    with pytest.raises(CompileError, match="needs an NVIDIA GPU"):
        compiled(torch.randn(2, 8))


def test_printing_nn_ir_asks_for_the_pipeline(tmp_path: Path) -> None:
    path = tmp_path / "gelu.mlir"
    path.write_text(gelu_bias(8, 256) + "\n")
    out = subprocess.run(
        [sys.executable, "-m", "fuseopt.cli", str(path), "-t", "cuda"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "--pipeline standard" in out.stderr and "gelu.mlir:1:1" in out.stderr


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_compile_errors_show_the_compiler_message_and_the_source_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(tmp_path))
    source = 'extern "C" __global__ void broken(float* p) { p[0] = undefined_name; }\n'
    with pytest.raises(CompileError) as info:
        compile_cubin(source, "broken", "sm_90")
    message = str(info.value)
    assert "undefined_name" in message
    path = re.search(r"\((/[^)]*\.cu)\)", message)
    assert path is not None and Path(path.group(1)).read_text() == source
