"""Numerics of the generated CUDA on CPU, through the emulation (backends/cuda/emulation).

The printed kernels are compiled with g++ against stand-in CUDA headers and run with
one CPU thread per CUDA thread (barriers, shuffles and WMMA emulated), then compared
with the reference interpreter on random inputs with non-trivial weights. Shapes are
small but chosen to hit the tile configurations of the benchmark sizes (rows of
5120, 8192 and 32768 elements; 128x128 matmul tiles) and ragged edges, and each form
of matmul operand staging tile-promote can choose (cp.async pipelines of 3 and 2
stages, one synchronous stage, operands in registers). Skipped without g++.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from xdsl.dialects import func

import fuseopt
from fuseopt.backends.cuda.backend import CudaBackend, CudaFunction, tile_pipeline
from fuseopt.backends.cuda.emulation import EmulatedFunction, emulator_available
from fuseopt.backends.cuda.printer import print_cuda
from fuseopt.dialects import tile
from fuseopt.dialects.dtypes import torch_dtype

sys.path.insert(0, str(Path(__file__).resolve().parent))
from random_nn_graphs import RandomGraph, nn_graphs  # noqa: E402
from test_nn_fuse_workloads import (  # noqa: E402
    axis_variance,
    column_variance,
    gated_mlp,
    gelu_bias,
    gqa_keys_values,
    layernorm,
    mlp,
    random_args,
    rmsnorm,
    rmsnorm_rope,
    rmsnorm_silu_gate,
    softmax,
)

pytestmark = pytest.mark.skipif(not emulator_available(), reason="g++ is not installed")

CASES = {
    "rmsnorm_5120": rmsnorm(1, 3, 5120),
    "rmsnorm_silu_gate_ragged": rmsnorm_silu_gate(1, 5, 1000),
    "softmax_8192": softmax(2, 8192),
    "softmax_32768_looped": softmax(2, 32768),
    "softmax_ragged": softmax(5, 1000),
    "layernorm_4096": layernorm(3, 4096),
    "gelu_bias_ragged": gelu_bias(9, 1000),
    "rmsnorm_rope": rmsnorm_rope(1, 3, 2, 16),
    "mlp_128_tiles": mlp(256, 256, 1024),
    "mlp_ragged": mlp(50, 72, 100),
    "gated_mlp": gated_mlp(32, 64, 48),
    # a column reduction of 300 rows: 64-column tiles looping over the rows (issue 19)
    "column_sum_looped": """
func.func @main(%x: tensor<300x70xbf16>) -> tensor<70xbf16> {
  %s = nn.sum %x [0] : tensor<300x70xbf16> -> tensor<70xbf16>
  func.return %s : tensor<70xbf16>
}
""",
    # column reductions in registers and shuffles (the CUDA printer's columns strategy):
    # 4, 64, 16, 32 and 2 chunks a row, max, sum, an i64 min, a unit batch dim
    "first_axis_max": """
func.func @main(%x: tensor<64x256xbf16>) -> tensor<256xbf16> {
  %s = nn.reduce_max %x [0] : tensor<64x256xbf16> -> tensor<256xbf16>
  func.return %s : tensor<256xbf16>
}
""",
    "first_axis_sum_wide_rows": """
func.func @main(%x: tensor<8x4096xbf16>) -> tensor<4096xbf16> {
  %s = nn.sum %x [0] : tensor<8x4096xbf16> -> tensor<4096xbf16>
  func.return %s : tensor<4096xbf16>
}
""",
    "first_axis_min_i64": """
func.func @main(%x: tensor<64x96xi64>) -> tensor<96xi64> {
  %s = nn.reduce_min %x [0] : tensor<64x96xi64> -> tensor<96xi64>
  func.return %s : tensor<96xi64>
}
""",
    "middle_axis_max_batched": """
func.func @main(%x: tensor<3x8x512xbf16>) -> tensor<3x512xbf16> {
  %s = nn.reduce_max %x [1] : tensor<3x8x512xbf16> -> tensor<3x512xbf16>
  func.return %s : tensor<3x512xbf16>
}
""",
    "first_axis_sum_narrow_looped": """
func.func @main(%x: tensor<1000x64xbf16>) -> tensor<64xbf16> {
  %s = nn.sum %x [0] : tensor<1000x64xbf16> -> tensor<64xbf16>
  func.return %s : tensor<64xbf16>
}
""",
    # a column variance as the frontend writes it: per-lane Welford over a row loop
    # whose running count (a vector of equal elements) is carried in one register
    "column_var_looped": column_variance(600, 72),
    "middle_axis_max_looped": """
func.func @main(%x: tensor<2x260x9xbf16>) -> tensor<2x9xbf16> {
  %s = nn.reduce_max %x [1] : tensor<2x260x9xbf16> -> tensor<2x9xbf16>
  func.return %s : tensor<2x9xbf16>
}
""",
    # axes in two runs: a row sum, then a column sum (nn-split-reductions)
    "first_and_last_axes_sum": """
func.func @main(%x: tensor<40x6x33xbf16>) -> tensor<6xbf16> {
  %s = nn.sum %x [0, 2] : tensor<40x6x33xbf16> -> tensor<6xbf16>
  func.return %s : tensor<6xbf16>
}
""",
    # argmax as the frontend builds it: a max, the first index holding it (or a NaN)
    "argmax_rows": """
func.func @main(%x: tensor<6x100xbf16>) -> tensor<6xi64> {
  %0 = nn.reduce_max %x [1] keepdim : tensor<6x100xbf16> -> tensor<6x1xbf16>
  %1 = nn.constant dense<0> : tensor<100xi64>
  %2 = nn.reshape %1 : tensor<100xi64> -> tensor<1x100xi64>
  %3 = nn.broadcast %2 : tensor<1x100xi64> -> tensor<6x100xi64>
  %4 = nn.constant 100 : tensor<6x100xi64>
  %5 = nn.broadcast %0 : tensor<6x1xbf16> -> tensor<6x100xbf16>
  %6 = nn.compare eq, %x, %5 : tensor<6x100xbf16>
  %7 = nn.select %6, %3, %4 : tensor<6x100xi64>
  %8 = nn.compare ne, %x, %x : tensor<6x100xbf16>
  %9 = nn.select %8, %3, %7 : tensor<6x100xi64>
  %10 = nn.reduce_min %9 [1] keepdim : tensor<6x100xi64> -> tensor<6x1xi64>
  %11 = nn.reshape %10 : tensor<6x1xi64> -> tensor<6xi64>
  func.return %11 : tensor<6xi64>
}
""".replace("dense<0>", "dense<[" + ", ".join(str(i) for i in range(100)) + "]>"),
    # tril's row and column index vectors, computed in the kernel (tile.iota), rows
    # starting at -1 (the diagonal)
    "tril_index_vectors": """
func.func @main(%x: tensor<40x48xbf16>) -> tensor<40x48xbf16> {
  %0 = nn.constant dense<ROWS> : tensor<40xi64>
  %1 = nn.reshape %0 : tensor<40xi64> -> tensor<40x1xi64>
  %2 = nn.broadcast %1 : tensor<40x1xi64> -> tensor<40x48xi64>
  %3 = nn.constant dense<COLS> : tensor<48xi64>
  %4 = nn.reshape %3 : tensor<48xi64> -> tensor<1x48xi64>
  %5 = nn.broadcast %4 : tensor<1x48xi64> -> tensor<40x48xi64>
  %6 = nn.compare le, %5, %2 : tensor<40x48xi64>
  %7 = nn.constant 0.0 : tensor<40x48xbf16>
  %8 = nn.select %6, %x, %7 : tensor<40x48xbf16>
  func.return %8 : tensor<40x48xbf16>
}
""".replace("ROWS", str(list(range(-1, 39)))).replace("COLS", str(list(range(48)))),
    # an embedding as the frontend builds it: row ids (inputs in [-1.5, 1.5] truncated
    # to -1, 0, 1, plus one) times the row length plus a column index vector, gathered
    # by address (tile.gather) and added to in the same kernel; rows of 200 are ragged
    "embedding_rows": """
func.func @main(%f: tensor<12xbf16>, %w: tensor<3x200xbf16>, %b: tensor<12x200xbf16>) -> tensor<12x200xbf16> {
  %i = nn.cast %f : tensor<12xbf16> -> tensor<12xi64>
  %one = nn.constant 1 : tensor<12xi64>
  %j = nn.add %i, %one : tensor<12xi64>
  %r = nn.reshape %j : tensor<12xi64> -> tensor<12x1xi64>
  %d = nn.constant 200 : tensor<12x1xi64>
  %s = nn.mul %r, %d : tensor<12x1xi64>
  %sb = nn.broadcast %s : tensor<12x1xi64> -> tensor<12x200xi64>
  %c = nn.constant dense<COLS> : tensor<200xi64>
  %cb = nn.broadcast %c : tensor<200xi64> -> tensor<12x200xi64>
  %p = nn.add %sb, %cb : tensor<12x200xi64>
  %e = nn.take %w, %p : tensor<3x200xbf16>, tensor<12x200xi64> -> tensor<12x200xbf16>
  %y = nn.add %e, %b : tensor<12x200xbf16>
  func.return %y : tensor<12x200xbf16>
}
""".replace("COLS", str(list(range(200)))),
    # RoPE on heads read seq-major ([seq, head, dim] -> [head, seq, dim]) as Llama's
    # attention prepares q: tiles of one head, whose transpose and cos/sin broadcast
    # only move unit dims (kept in registers, no shared memory); 70 rows are ragged
    "rope_head_major": """
func.func @main(%x: tensor<1x70x3x128xbf16>, %cos: tensor<1x70x128xbf16>, %sin: tensor<1x70x128xbf16>) -> tensor<1x3x70x128xbf16> {
  %q = nn.transpose %x [0, 2, 1, 3] : tensor<1x70x3x128xbf16> -> tensor<1x3x70x128xbf16>
  %c0 = nn.reshape %cos : tensor<1x70x128xbf16> -> tensor<1x1x70x128xbf16>
  %s0 = nn.reshape %sin : tensor<1x70x128xbf16> -> tensor<1x1x70x128xbf16>
  %c = nn.broadcast %c0 : tensor<1x1x70x128xbf16> -> tensor<1x3x70x128xbf16>
  %a = nn.mul %q, %c : tensor<1x3x70x128xbf16>
  %lo = nn.slice %q [0:1, 0:3, 0:70, 0:64] : tensor<1x3x70x128xbf16> -> tensor<1x3x70x64xbf16>
  %hi = nn.slice %q [0:1, 0:3, 0:70, 64:128] : tensor<1x3x70x128xbf16> -> tensor<1x3x70x64xbf16>
  %n = nn.neg %hi : tensor<1x3x70x64xbf16>
  %r = nn.concat %n, %lo axis 3 : tensor<1x3x70x64xbf16>, tensor<1x3x70x64xbf16> -> tensor<1x3x70x128xbf16>
  %s = nn.broadcast %s0 : tensor<1x1x70x128xbf16> -> tensor<1x3x70x128xbf16>
  %b = nn.mul %r, %s : tensor<1x3x70x128xbf16>
  %y = nn.add %a, %b : tensor<1x3x70x128xbf16>
  func.return %y : tensor<1x3x70x128xbf16>
}
""",
    # grouped-query keys: RoPE on seq-major heads, then each head repeated for 2 query
    # heads (tiles over four dims: one repeated head, 64 rows); and the values
    # transposed and repeated without arithmetic (one copy kernel, not two)
    "gqa_keys_and_values": gqa_keys_values(70, 2, 2, 128),
    # argmax over the rows, split into chunks of rows: the row numbers the index
    # reduction compares are computed per slot (a chunk's base plus the row in the
    # chunk), not broadcast through shared memory
    "argmax_rows_split": """
func.func @main(%x: tensor<8192x32xbf16>) -> tensor<32xi64> {
  %m = nn.reduce_max %x [0] keepdim : tensor<8192x32xbf16> -> tensor<1x32xbf16>
  %i = nn.constant dense<ROWS> : tensor<8192xi64>
  %i2 = nn.reshape %i : tensor<8192xi64> -> tensor<8192x1xi64>
  %ib = nn.broadcast %i2 : tensor<8192x1xi64> -> tensor<8192x32xi64>
  %n = nn.constant 8192 : tensor<8192x32xi64>
  %mb = nn.broadcast %m : tensor<1x32xbf16> -> tensor<8192x32xbf16>
  %eq = nn.compare eq, %x, %mb : tensor<8192x32xbf16>
  %s = nn.select %eq, %ib, %n : tensor<8192x32xi64>
  %r = nn.reduce_min %s [0] : tensor<8192x32xi64> -> tensor<32xi64>
  func.return %r : tensor<32xi64>
}
""".replace("ROWS", str(list(range(8192)))),
    # a PyTorch op kept as a call between kernels: the host function runs it in PyTorch
    "torch_call_between_kernels": """
func.func @main(%x: tensor<6x100xbf16>) -> tensor<6x100xbf16> {
  %e = nn.exp %x : tensor<6x100xbf16>
  %c = nn.torch_call "aten.cumsum.default"(%e) {call = "{'args':[{'operand':0},1],'kwargs':{}}"} : (tensor<6x100xbf16>) -> tensor<6x100xbf16>
  %r = nn.rsqrt %c : tensor<6x100xbf16>
  func.return %r : tensor<6x100xbf16>
}
""",
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where emulation libraries are built (shared by the module's tests)."""
    return tmp_path_factory.mktemp("cuda-emu")


def run_emulated(text: str, workdir: Path, dtype: str, promote: str | None = None) -> CudaFunction:
    """Compile `text` (with `bf16` replaced by `dtype`; with `promote`, the backend's
    pipeline runs that tile-promote instead), run it emulated, and compare with the
    reference interpreter. Returns the compiled function."""
    text = text.replace("bf16", dtype)
    module = fuseopt.parse(text)
    args = random_args(module)
    ref = fuseopt.interpret(module, "main", *args)
    if promote is None:
        fn = CudaBackend().compile(fuseopt.parse(text), "main", {})
    else:
        spec = tile_pipeline().rsplit(",tile-promote", 1)[0] + "," + promote
        lowered = fuseopt.run_pipeline(fuseopt.parse(text), spec)
        fn = CudaFunction(lowered, "main", print_cuda(lowered))
    f = next(o for o in module.ops if isinstance(o, func.FuncOp))
    inputs = [
        torch.from_numpy(a).to(torch_dtype(t.element_type))
        for a, t in zip(args, f.function_type.inputs.data, strict=True)
    ]
    out = EmulatedFunction(fn, workdir)(*inputs)
    tol = 2e-2 if dtype == "bf16" else 1e-4
    for r, o in zip(ref, out, strict=True):
        if np.issubdtype(np.asarray(r).dtype, np.integer):  # indices, counts: exact
            assert np.array_equal(o.numpy().reshape(np.shape(r)), np.asarray(r))
            continue
        r = np.asarray(r, dtype=np.float32)
        got = o.float().numpy().reshape(r.shape)
        # NaN (sqrt of a negative input) and infinities must be where the reference has
        # them; the finite rest is compared relative to its largest value
        assert np.array_equal(np.isnan(got), np.isnan(r))
        inf = np.isinf(r)
        assert np.array_equal(got[inf], r[inf])
        finite = np.isfinite(r)
        if finite.any():
            scale = max(float(np.abs(r[finite]).max()), 1e-6)
            assert float(np.abs(got[finite] - r[finite]).max()) / scale < tol
    return fn


@pytest.mark.parametrize("name", list(CASES))
def test_workload_matches_reference_bf16(name: str, workdir: Path) -> None:
    run_emulated(CASES[name], workdir, "bf16")


@pytest.mark.parametrize("name", ["softmax_ragged", "mlp_ragged", "layernorm_4096"])
def test_workload_matches_reference_f32(name: str, workdir: Path) -> None:
    run_emulated(CASES[name], workdir, "f32")


STAGING = {
    "pipeline_3_stages": "tile-promote",
    "pipeline_2_stages": "tile-promote{num-stages=2}",
    "synchronous": "tile-promote{num-stages=1}",
    "registers": "tile-promote{shared-bytes=0}",
}
"""tile-promote options giving each form of matmul operand staging (pipeline.py)."""


def staging_form(source: str) -> str:
    """The STAGING form a printed matmul kernel uses."""
    if "fo_smem +" not in source and "wmma" not in source:
        return "registers"
    if "fo_cp_async_wait<1>();" in source:
        return "pipeline_3_stages"
    if "% 2) * " in source and "fo_cp_async_wait<0>();" in source:
        return "pipeline_2_stages"
    if "fo_cp_async" not in source and "fo_copy_vec<__nv_bfloat16, 8>(pipe" in source:
        return "synchronous"
    return "other"


@pytest.mark.parametrize("staging", list(STAGING))
@pytest.mark.parametrize("name", ["mlp_ragged", "gated_mlp"])
def test_operand_staging_matches_reference(name: str, staging: str, workdir: Path) -> None:
    # mlp_ragged: M, N and K ragged (50x72 @ 72x100, then K = 100: rows of 200 bytes,
    # chunks not 16-byte aligned); gated_mlp: two dots sharing their A operand
    fn = run_emulated(CASES[name], workdir, "bf16", STAGING[staging])
    matmuls = [k for k in fn.cuda_kernels if k.schedule == "matmul"]
    assert matmuls and all(staging_form(k.source) == staging for k in matmuls)
    # the printer takes exactly the shared memory tile-promote recorded
    recorded = {
        k.sym_name.data: k.attributes["shared_bytes"].value.data  # type: ignore[union-attr]
        for k in fn.module.walk()
        if isinstance(k, tile.KernelOp)
    }
    assert all(k.smem_bytes == recorded[k.ir_name] for k in matmuls)


def test_accumulator_over_the_stages_matches_reference(workdir: Path) -> None:
    # 64x128 tiles, 2 stages of 27 KiB: the 32 KiB accumulator does not fit beside
    # them in 60000 bytes, so the epilogue reuses the stages after the K loop
    fn = run_emulated(CASES["mlp_ragged"], workdir, "bf16", "tile-promote{shared-bytes=60000}")
    matmuls = [k for k in fn.cuda_kernels if k.schedule == "matmul"]
    assert matmuls and all(staging_form(k.source) == "pipeline_2_stages" for k in matmuls)
    assert all("float* accsm = reinterpret_cast<float*>(fo_smem + 0);" in k.source for k in matmuls)
    assert all(k.smem_bytes == 55296 for k in matmuls)


def test_operands_in_registers_match_reference_f32(workdir: Path) -> None:
    fn = run_emulated(CASES["mlp_ragged"], workdir, "f32", STAGING["registers"])
    matmuls = [k for k in fn.cuda_kernels if k.schedule == "matmul"]
    assert matmuls and all(k.smem_bytes == 0 for k in matmuls)


def test_one_synchronous_stage_of_128_tiles_matches_reference(workdir: Path) -> None:
    fn = run_emulated(CASES["mlp_128_tiles"], workdir, "bf16", STAGING["synchronous"])
    matmuls = [k for k in fn.cuda_kernels if k.schedule == "matmul"]
    assert matmuls and all(staging_form(k.source) == "synchronous" for k in matmuls)


@settings(
    max_examples=6,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(graph=nn_graphs())
def test_random_graphs_match_reference(graph: RandomGraph, workdir: Path) -> None:
    """Random nn graphs (tests/random_nn_graphs.py) through the whole CUDA backend, run
    emulated: every schedule and the printer's emission order (late loads) on shapes and
    op mixes the workloads do not have."""
    run_emulated(graph.text, workdir, "f32")


def _column_reduction_loop(
    batches: int, rows: int, cols: int, kind: str, dtype: str, warps: int
) -> str:
    """A tile kernel reducing [1, rows, cols] tiles over the rows inside a loop over the
    batches (the columns strategy with a leading unit dim and its in-loop barriers)."""
    x, y = f"memref<{batches}x{rows}x{cols}x{dtype}>", f"memref<{batches}x{cols}x{dtype}>"
    return f"""
builtin.module {{
  tile.kernel @k grid 1 (%0: {x}, %1: {y}) attributes {{schedule = "row_reduction", iteration_sizes = array<i64: {batches}, {rows}, {cols}>, block_sizes = array<i64: 1, {rows}, {cols}>, reduce_dim = 1 : i64, num_warps = {warps} : i64, num_stages = 1 : i64, vector_width = 4 : i64, shared_bytes = 0 : i64}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %cb = arith.constant {batches} : index
    scf.for %b = %c0 to %cb step %c1 {{
      %t = tile.load %0[%b, %c0, %c0] : {x} -> tensor<1x{rows}x{cols}x{dtype}>
      %r = tile.reduce {kind} %t axis 1 : tensor<1x{rows}x{cols}x{dtype}> -> tensor<1x{cols}x{dtype}>
      tile.store %r, %1[%b, %c0] : tensor<1x{cols}x{dtype}>, {y}
      scf.yield
    }}
    tile.return
  }}
  func.func @main(%0: {x}, %1: {y} {{tile.output}}) {{
    tile.launch @k grid [1] (%0, %1) : {x}, {y}
    func.return
  }}
}}
"""


@pytest.mark.parametrize(
    ("rows", "cols", "kind", "dtype", "warps"),
    [
        pytest.param(256, 4, "sum", "f32", 4, id="one-chunk-a-row"),
        pytest.param(64, 16, "max", "f32", 4, id="lanes-4-apart-nan"),
        pytest.param(32, 128, "min", "i64", 4, id="i64-whole-warp-rows"),
        pytest.param(8, 256, "sum", "f32", 2, id="64-chunks-a-row"),
    ],
)
def test_column_reductions_in_a_loop_match_torch(
    rows: int, cols: int, kind: str, dtype: str, warps: int, workdir: Path
) -> None:
    """The CUDA printer's columns strategy inside a loop (one tile a step, the scratch
    reused across steps; with a row of 64 chunks over 64 threads none), 1 to 64
    chunks a row, f32 with NaNs and i64."""
    module = fuseopt.parse(_column_reduction_loop(3, rows, cols, kind, dtype, warps))
    source = print_cuda(module)
    # the columns strategy printed it: each thread's column totals in registers
    assert any(re.search(r"\bcr\[", k.source) for k in source)
    assert any("cols[" in k.source for k in source) == (cols // 4 < warps * 32)
    if dtype == "i64":
        x = torch.randint(-1000, 1000, (3, rows, cols))
    else:
        x = torch.randn(3, rows, cols)
        x[0, 5, 3], x[2, rows - 1, cols - 1] = float("nan"), float("nan")
    (got,) = EmulatedFunction(CudaFunction(module, "main", source), workdir)(x)
    expected = {"sum": x.sum(1), "max": x.amax(1), "min": x.amin(1)}[kind]
    assert torch.allclose(got.double(), expected.double(), atol=1e-4, equal_nan=True)


@pytest.mark.parametrize(
    ("shape", "one_warp"),
    [
        pytest.param((16, 64, 64), True, id="one-warp"),
        pytest.param((16, 64, 64), False, id="four-warps"),
        pytest.param((3, 5, 24), True, id="ragged-one-warp"),
        pytest.param((2, 7, 200), False, id="ragged-columns"),
    ],
)
def test_column_statistics_stay_in_registers(shape, one_warp: bool, workdir: Path) -> None:  # noqa: ANN001
    """A variance over the middle axis: each column reduction leaves every thread its
    columns' totals in registers (`colred`), which the deviations and the output read
    in place; with one warp the kernel has no shared memory and no barrier at all."""
    promote = "tile-promote{warp-per-row=true}" if one_warp else "tile-promote"
    fn = run_emulated(axis_variance(shape, 1), workdir, "bf16", promote)
    (kernel,) = fn.cuda_kernels
    assert re.search(r"\bcr\[", kernel.source)  # the columns strategy, in registers
    if shape == (16, 64, 64) and one_warp:
        assert kernel.threads == 32 and "__syncthreads" not in kernel.source
        assert kernel.smem_bytes == 0
