"""cumsum compiles (issue 20 item 4, issue 19 item 2): `nn.cumsum` (inclusive prefix
sum along an axis) runs as a scan kernel of its own (convert-nn-to-tile's `scan.py`:
programs over blocks of lines, each walking its lines in tiles with a carry; the CUDA
backend keeps its one-thread-per-line scan), so a model's cumsum no longer splits its
graph. Checked against eager on the interpreter and the Triton backend (integers,
bools, f32, bf16, every axis, a dtype argument, one element, long lines), the scan
schedule through the tile interpreter at shapes that loop, the reference semantics,
the CUDA scans through the emulation, and the Hugging Face decoders' mask
(`find_packed_sequence_indices`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from test_frontend_common import assert_close, randn

import fuseopt
from fuseopt.backends.cuda.backend import CudaBackend
from fuseopt.backends.cuda.emulation import EmulatedFunction, emulator_available

CASES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "last": lambda x: torch.cumsum(x, -1),
    "first": lambda x: torch.cumsum(x, 0) * 2,
    "middle_of_3d": lambda x: torch.cat([x[None], x[None] * 2]).cumsum(1),
    "to_f32": lambda x: torch.cumsum(x, -1, dtype=torch.float32),
    "packed_sequences": lambda x: (x.long() != 1).cumsum(-1),  # HF's mask helper
}


def _input(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.bool:
        return randn(*shape, seed=2) > 0
    if dtype == torch.int64:
        return (randn(*shape, seed=2) * 5).long()
    return randn(*shape, seed=2).to(dtype)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((4, 6), torch.float32),
        ((4, 6), torch.bfloat16),
        ((4, 6), torch.int64),
        ((4, 6), torch.bool),
        ((1, 1), torch.float32),
        ((2, 5000), torch.float32),
    ],
    ids=str,
)
def test_cumsum_matches_eager(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> None:
    fn = CASES[name]
    if name == "packed_sequences" and dtype == torch.bool:
        pytest.skip("the helper takes position ids")
    x = _input(shape, dtype)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="interpret", strict=True)
        got, expected = compiled(x), fn(x)
    if expected.dtype == torch.float32 and shape[-1] > 1000:
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-3)  # long sums
    else:
        assert_close(got, expected)
    assert compiled.regions and not compiled.fallbacks


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_cumsum_on_triton(dtype: torch.dtype) -> None:
    fn = lambda x: torch.cumsum(torch.relu(x) if x.is_floating_point() else x, 1) + 1  # noqa: E731
    x = _input((3, 7, 5), dtype)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="triton", strict=True)
        got, expected = compiled(x), fn(x)
    assert_close(got, expected)
    assert not compiled.fallbacks


def test_cumsum_reference_semantics() -> None:
    text = """
func.func @main(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %r = nn.cumsum %x axis 1 : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  func.return %r : tensor<2x3x4xf32>
}
"""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7
    (got,) = fuseopt.interpret(fuseopt.parse(text), "main", x)
    np.testing.assert_array_equal(got, np.cumsum(x, axis=1))


@pytest.mark.skipif(not emulator_available(), reason="g++ is not installed")
@pytest.mark.parametrize(("axis", "element"), [(0, "f32"), (1, "bf16"), (2, "i64")])
def test_cuda_scan_through_the_emulation(axis: int, element: str, tmp_path: Path) -> None:
    t = f"tensor<3x70x5x{element}>"
    text = (
        f"func.func @main(%x: {t}) -> {t} {{\n"
        f"  %r = nn.cumsum %x axis {axis} : {t} -> {t}\n"
        f"  func.return %r : {t}\n}}\n"
    )
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "i64": torch.int64}[element]
    x = _input((3, 70, 5), dtype)
    fn = CudaBackend().compile(fuseopt.parse(text), "main", {})
    (got,) = EmulatedFunction(fn, tmp_path)(x)
    expected = torch.cumsum(x.double() if dtype != torch.int64 else x, axis).to(dtype)
    assert_close(got.reshape(expected.shape), expected)


def test_hugging_face_decoders_have_no_eager_op_left() -> None:
    """Llama's prefill through its masks (cumsum in find_packed_sequence_indices,
    embedding, advanced indexing): everything compiles."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=1,
        vocab_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    fn = lambda i: model(input_ids=i, use_cache=False).logits  # noqa: E731
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="interpret", strict=True)
        assert_close(compiled(ids), fn(ids))
    assert not compiled.fallbacks, [str(f.target) for f in compiled.fallbacks]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend", ["triton", "cuda"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_cumsum_on_the_gpu(backend: str, dtype: torch.dtype) -> None:
    """Both printed forms on the device: a mask-like int64 prefix over 2048 positions,
    float lines along the first and last axes, between fused kernels."""
    fn = lambda x: (torch.cumsum(x * 2, -1) + torch.cumsum(x, 0)) * 1  # noqa: E731
    x = _input((8, 2048), dtype).cuda()
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend=backend, strict=True)
        got, expected = compiled(x), fn(x)
    if dtype == torch.float32:  # f32 accumulation in a different order over 2048 terms
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-3)
    elif dtype == torch.bfloat16:  # rounding differs from eager's: judge both by float64
        reference = fn(x.double())
        fused_error = (got.double() - reference).abs().max().item()
        eager_error = (expected.double() - reference).abs().max().item()
        assert fused_error <= 2 * eager_error, (fused_error, eager_error)
    else:
        assert torch.equal(got, expected)
    assert not compiled.fallbacks


def _cumsum_text(shape: tuple[int, ...], axis: int, element: str) -> str:
    t = f"tensor<{'x'.join(map(str, shape))}x{element}>"
    return (
        f"func.func @main(%x: {t}) -> {t} {{\n"
        f"  %e = nn.mul %x, %x : {t}\n"
        f"  %r = nn.cumsum %e axis {axis} : {t} -> {t}\n"
        f"  func.return %r : {t}\n}}\n"
    )


SCAN_SHAPES = [
    ((3, 2500), 1),  # three lines of three chunks of 1024, ragged: split across programs
    ((5000,), 0),  # one line: split, five chunks
    ((30, 2100), 1),  # 30 lines of 3 ragged chunks (2100 = 2 x 1024 + 52): 90 programs
    ((70, 3), 0),  # a first-axis scan: 3 columns of 70
    ((40, 700, 7), 1),  # a middle axis: 40 outer indices of 7 columns, two steps each
    ((33, 100, 70), 1),  # 70 columns in blocks narrowed to 16: 33 x 5 programs
    ((1, 1), 1),
    ((33, 7), 1),  # rows not a multiple of a program's rows
]


@pytest.mark.parametrize("element", ["f32", "i64"])
@pytest.mark.parametrize(("shape", "axis"), SCAN_SHAPES, ids=str)
def test_scan_schedule_matches_the_reference(
    shape: tuple[int, ...], axis: int, element: str
) -> None:
    """The scan kernel through the tile interpreter against the nn reference."""
    from test_tile_lowering import TILE, lower_and_compare

    tiled = lower_and_compare(_cumsum_text(shape, axis, element), TILE)
    schedules = [
        op.schedule.data
        for op in tiled.walk()
        if isinstance(op, fuseopt.dialects.tile.KernelOp) and op.schedule is not None
    ]
    assert "scan" in schedules and "whole_tensor" not in schedules
    kernels = [op for op in tiled.walk() if isinstance(op, fuseopt.dialects.tile.KernelOp)]
    split = [k for k in kernels if k.sym_name.data.endswith("_partials")]
    lines = int(np.prod(shape[:axis]))  # few long lines: the split scan
    assert bool(split) == (axis == len(shape) - 1 and shape[axis] > 1024 and lines < 1000)


TRITON_SCAN_SHAPES = [
    *SCAN_SHAPES[:2],
    ((6, 2100), 1),  # 6 lines of 3 ragged chunks: 18 programs
    *SCAN_SHAPES[3:5],  # 40 outer indices: with fewer than 32 it is a whole-tensor kernel
    ((5, 100, 70), 1),  # the narrowed columns over 5 outer indices: 25 programs
    *SCAN_SHAPES[6:],
]
"""SCAN_SHAPES with fewer lines or outer indices where their count only repeats the
programs (the Triton interpreter's time goes with the programs: 18 not 90, 25 not
165), each case's chunks, steps and raggedness kept."""


@pytest.mark.parametrize(("shape", "axis"), TRITON_SCAN_SHAPES, ids=str)
def test_scan_schedule_on_triton_is_exact_on_integers(shape: tuple[int, ...], axis: int) -> None:
    """Integer scans on Triton (CPU interpreter) equal eager's exactly: a dropped or
    doubled element at a chunk edge, in the carry or in the split's partials shows."""
    x = _input(shape, torch.int64)
    fn = lambda v: torch.cumsum(v * 3 + 1, axis)  # noqa: E731
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="triton", strict=True)
        got = compiled(x)
    assert "scan" in [k.schedule for k in compiled.kernels]
    assert torch.equal(got, fn(x))


def test_a_few_long_columns_stay_a_whole_tensor_kernel() -> None:
    """cumsum over the first axis of 65536 x 32: two programs of 16 columns would each
    walk 65536 rows, so it stays a whole-tensor kernel (no split along such an axis)."""
    from fuseopt.pipelines import STANDARD

    lowered = fuseopt.run_pipeline(fuseopt.parse(_cumsum_text((65536, 32), 0, "f32")), STANDARD)
    schedules = [
        op.schedule.data for op in lowered.walk() if isinstance(op, fuseopt.dialects.tile.KernelOp)
    ]
    assert "whole_tensor" in schedules and "scan" not in schedules, schedules
    wide = fuseopt.run_pipeline(fuseopt.parse(_cumsum_text((4096, 4096), 0, "f32")), STANDARD)
    (scan,) = [
        k
        for k in wide.walk()
        if isinstance(k, fuseopt.dialects.tile.KernelOp) and k.schedule.data == "scan"
    ]
    assert scan.array_attr("block_sizes")[-1] == 16  # 256 programs, not 64


@pytest.mark.parametrize(("shape", "axis"), TRITON_SCAN_SHAPES[:4], ids=str)
def test_scan_schedule_on_triton(shape: tuple[int, ...], axis: int) -> None:
    """The scan kernels on Triton (CPU interpreter), bf16 judged by float64 against
    eager's error."""
    x = _input(shape, torch.bfloat16)
    fn = lambda v: torch.cumsum(v * v, axis)  # noqa: E731
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="triton", strict=True)
        got, expected = compiled(x), fn(x)
    assert "scan" in [k.schedule for k in compiled.kernels]
    reference = fn(x.double())
    fused_error = (got.double() - reference).abs().max().item()
    eager_error = (expected.double() - reference).abs().max().item()
    assert fused_error <= max(2 * eager_error, 1e-2), (fused_error, eager_error)


@pytest.mark.skipif(not emulator_available(), reason="g++ is not installed")
@pytest.mark.parametrize(
    ("shape", "axis"), [((3, 70, 5), 1), ((9, 40), 1), ((2, 3000), 1)], ids=str
)
def test_cuda_prints_a_scan_kernel(shape: tuple[int, ...], axis: int, tmp_path: Path) -> None:
    """A scan kernel from the default pipeline (what `fuse-opt -t cuda` prints) runs on
    the CUDA printer's line scan, through the emulation."""
    from fuseopt.backends.cuda.backend import CudaFunction
    from fuseopt.backends.cuda.printer import print_cuda
    from fuseopt.pipelines import STANDARD

    lowered = fuseopt.run_pipeline(fuseopt.parse(_cumsum_text(shape, axis, "f32")), STANDARD)
    assert any(
        isinstance(op, fuseopt.dialects.tile.KernelOp) and op.schedule.data == "scan"
        for op in lowered.walk()
    )
    fn = CudaFunction(lowered, "main", print_cuda(lowered))
    x = _input(shape, torch.float32)
    (got,) = EmulatedFunction(fn, tmp_path)(x)
    torch.testing.assert_close(got.reshape(shape), torch.cumsum(x * x, axis), rtol=1e-5, atol=1e-4)
