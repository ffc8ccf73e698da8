"""The attention kernel's operand layouts: q, k, v and the output read and written
through their head transposes (BERT, GPT-2) and from one packed projection (GPT-2's
c_attn), and the kernel's pipeline stages within shared memory; each through the tile
interpreter and Triton's CPU interpreter against the reference (the schedule itself:
test_attention.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from random_nn_graphs import interpret_both_ways
from test_attention import _tt

import fuseopt
from fuseopt.dialects import tile
from fuseopt.pipelines import STANDARD


def head_transposed_text(
    b: int, s: int, hq: int, hkv: int, e: int, element: str, out_used_twice: bool = False
) -> str:
    """@main(q, k, v) in [B, S, H, E], as projections write them: each transposed to
    [B, H, S, E] for the attention, the output transposed back (what BERT and GPT-2 do
    around SDPA)."""
    q, kv = (b, s, hq, e), (b, s, hkv, e)
    qt, kvt = (b, hq, s, e), (b, hkv, s, e)
    lines = [
        f"func.func @main(%q: {_tt(q, element)}, %k: {_tt(kv, element)}, "
        f"%v: {_tt(kv, element)}) -> {_tt(q, element)} {{",
        f"  %qt = nn.transpose %q [0, 2, 1, 3] : {_tt(q, element)} -> {_tt(qt, element)}",
        f"  %kt = nn.transpose %k [0, 2, 1, 3] : {_tt(kv, element)} -> {_tt(kvt, element)}",
        f"  %vt = nn.transpose %v [0, 2, 1, 3] : {_tt(kv, element)} -> {_tt(kvt, element)}",
        f"  %o = nn.attention %qt, %kt, %vt {{scale = {1 / math.sqrt(e)!r} : f64}} : "
        f"{_tt(qt, element)}, {_tt(kvt, element)}, {_tt(kvt, element)} -> {_tt(qt, element)}",
    ]
    if out_used_twice:
        lines.append(f"  %o2 = nn.add %o, %o : {_tt(qt, element)}")
        lines.append(
            f"  %r = nn.transpose %o2 [0, 2, 1, 3] : {_tt(qt, element)} -> {_tt(q, element)}"
        )
    else:
        lines.append(
            f"  %r = nn.transpose %o [0, 2, 1, 3] : {_tt(qt, element)} -> {_tt(q, element)}"
        )
    lines += [f"  func.return %r : {_tt(q, element)}", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("shape", "copies"),
    [
        ((2, 40, 4, 4, 16), 0),  # all three operands and the output, a ragged key end
        ((1, 33, 4, 4, 32), 0),
        ((2, 40, 4, 2, 16), 2),  # grouped heads packed as rows: only K and V fold
        ((2, 24, 4, 4, 24), 4),  # head dim 24 pads to 32: a padded column would read
        #                          the next head, so nothing folds
        ((1, 512, 4, 4, 16), 0),  # keys split in two chunks: the combine kernel writes
        ((1, 700, 2, 2, 32), 0),  # the output sequence-major (Qwen2's prefill)
    ],
    ids=str,
)
def test_head_transposes_fold_into_the_attention_kernel(
    shape: tuple[int, ...], copies: int
) -> None:
    """BERT and GPT-2 transpose q, k, v to [B, H, S, E] for attention and the output
    back: the kernel reads and writes [B, S, H * E] views instead, and the transposes
    launch no copy kernel; results match the reference."""
    b, s, hq, hkv, e = shape
    text = head_transposed_text(b, s, hq, hkv, e, "f32")
    module = fuseopt.parse(text)
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((b, s, h, e)).astype(np.float32) for h in (hq, hkv, hkv)]
    (expected,) = fuseopt.interpret(module, "main", *inputs)
    tiled = fuseopt.run_pipeline(module.clone(), STANDARD)
    kernels = [op for op in tiled.walk() if isinstance(op, tile.KernelOp)]
    copy_kernels = [k for k in kernels if k.require_schedule() != tile.Schedule.ATTENTION]
    assert len(copy_kernels) == copies, [k.sym_name.data for k in kernels]
    for (actual,) in interpret_both_ways(tiled, "main", *inputs):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def packed_qkv_text(b: int, s: int, h: int, e: int, sliced_twice: bool = False) -> str:
    """@main(qkv) with qkv [B, S, 3 * H * E] as one projection writes it (GPT-2's
    c_attn): split into q, k, v column blocks, each reshaped to heads and transposed,
    attention, the output transposed back. `sliced_twice`: k's slice is also returned."""
    width = h * e
    full, part, heads, moved = (b, s, 3 * width), (b, s, width), (b, s, h, e), (b, h, s, e)
    f32 = "f32"
    results = [_tt(heads, f32)] + ([_tt(part, f32)] if sliced_twice else [])
    lines = [f"func.func @main(%qkv: {_tt(full, f32)}) -> ({', '.join(results)}) {{"]
    for i, name in enumerate("qkv"):
        lines += [
            f"  %{name}s = nn.slice %qkv [0:{b}, 0:{s}, {i * width}:{(i + 1) * width}] : "
            f"{_tt(full, f32)} -> {_tt(part, f32)}",
            f"  %{name}r = nn.reshape %{name}s : {_tt(part, f32)} -> {_tt(heads, f32)}",
            f"  %{name}t = nn.transpose %{name}r [0, 2, 1, 3] : {_tt(heads, f32)} -> "
            f"{_tt(moved, f32)}",
        ]
    lines += [
        f"  %o = nn.attention %qt, %kt, %vt {{scale = {1 / math.sqrt(e)!r} : f64}} : "
        f"{_tt(moved, f32)}, {_tt(moved, f32)}, {_tt(moved, f32)} -> {_tt(moved, f32)}",
        f"  %r = nn.transpose %o [0, 2, 1, 3] : {_tt(moved, f32)} -> {_tt(heads, f32)}",
        f"  func.return {', '.join(['%r'] + (['%ks'] if sliced_twice else []))} : "
        f"{', '.join(results)}",
        "}",
    ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("shape", [(2, 40, 4, 16), (1, 17, 2, 32)], ids=str)
def test_packed_qkv_is_read_in_place(shape: tuple[int, ...]) -> None:
    """GPT-2's q, k and v are column blocks of one projection's output: the kernel
    reads each head from that buffer (rows 3 * H * E wide, at the block's column
    offset), so the slices launch no copy kernels; results match the reference."""
    b, s, h, e = shape
    module = fuseopt.parse(packed_qkv_text(b, s, h, e))
    qkv = np.random.default_rng(5).standard_normal((b, s, 3 * h * e)).astype(np.float32)
    (expected,) = fuseopt.interpret(module, "main", qkv)
    tiled = fuseopt.run_pipeline(module.clone(), STANDARD)
    kernels = [op for op in tiled.walk() if isinstance(op, tile.KernelOp)]
    assert [k.sym_name.data for k in kernels] == ["attention"]
    params = [str(a.type) for a in kernels[0].body.block.args]
    assert params[:3] == [f"memref<{b}x{s}x{3 * h * e}xf32>"] * 3, params
    for (actual,) in interpret_both_ways(tiled, "main", qkv):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def test_a_slice_used_elsewhere_is_still_copied() -> None:
    """A column slice with another use stays a copy of its own (the kernel reads the
    other two blocks in place); results match."""
    module = fuseopt.parse(packed_qkv_text(2, 24, 4, 16, sliced_twice=True))
    qkv = np.random.default_rng(6).standard_normal((2, 24, 192)).astype(np.float32)
    expected = fuseopt.interpret(module, "main", qkv)
    tiled = fuseopt.run_pipeline(module.clone(), STANDARD)
    kernels = [op for op in tiled.walk() if isinstance(op, tile.KernelOp)]
    assert len(kernels) == 2, [k.sym_name.data for k in kernels]
    for actual, want in zip(fuseopt.interpret(tiled, "main", qkv), expected, strict=True):
        np.testing.assert_allclose(actual, want, rtol=1e-5, atol=1e-5)


def test_an_output_used_elsewhere_keeps_its_transpose() -> None:
    text = head_transposed_text(2, 40, 4, 4, 16, "f32", out_used_twice=True)
    module = fuseopt.parse(text)
    rng = np.random.default_rng(4)
    inputs = [rng.standard_normal((2, 40, 4, 16)).astype(np.float32) for _ in range(3)]
    (expected,) = fuseopt.interpret(module, "main", *inputs)
    tiled = fuseopt.run_pipeline(module.clone(), STANDARD)
    (actual,) = fuseopt.interpret(tiled, "main", *inputs)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
    attention = next(
        k for k in tiled.walk() if isinstance(k, tile.KernelOp) and k.sym_name.data == "attention"
    )
    assert [str(a.type) for a in attention.body.block.args][0] == "memref<2x40x64xf32>"
    assert str(attention.body.block.args[-1].type) == "memref<2x4x40x16xf32>"


@pytest.mark.parametrize(
    ("element", "causal", "stages"),
    [("f32", "", 2), ("bf16", "", 3), ("bf16", "causal ", 3), ("f32", "causal ", 1)],
)
def test_attention_stages_fit_shared_memory(element: str, causal: str, stages: int) -> None:
    """128-wide heads: at 3 stages the f32 key loop's K and V tiles would need 256 KiB
    of shared memory (Triton refused it on an H100: 246272 > 232448 bytes), so
    tile-promote stages it 2 deep (1 for the causal kernel's 128-key blocks); bf16
    keeps 3, causal too (its full and diagonal key loops run one after the other:
    their tiles are not added up)."""
    from fuseopt.passes.tile_promote import SHARED_BUDGET, attention_shared_bytes

    shape = (1, 4, 384, 128)
    t = _tt(shape, element)
    text = (
        f"func.func @main(%q: {t}, %k: {t}, %v: {t}) -> {t} {{\n"
        f"  %o = nn.attention %q, %k, %v {causal}{{scale = 0.088 : f64}} : "
        f"{t}, {t}, {t} -> {t}\n"
        f"  func.return %o : {t}\n}}\n"
    )
    tiled = fuseopt.run_pipeline(fuseopt.parse(text), STANDARD)
    (kernel,) = [op for op in tiled.walk() if isinstance(op, tile.KernelOp)]
    assert kernel.num_stages is not None and kernel.num_stages.value.data == stages
    assert attention_shared_bytes(kernel, stages) <= SHARED_BUDGET


def test_split_attention_writes_its_output_sequence_major(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A split plan's combine kernel writes the [B, S, H * E] output in place of the
    output transpose, correct through the Triton backend (CPU interpreter) and the CUDA
    kernels (emulated). The Triton run forces 16 x 16 attention tiles so that 128 keys
    split (two chunks; the default tiles split from 512 keys, which the interpreter
    takes three minutes over)."""
    import dataclasses

    import torch

    from fuseopt.backends.kernel_cache import KernelCache
    from fuseopt.backends.triton import backend

    small = dataclasses.replace(backend.TRITON, attention_blocks=(16, 16))
    monkeypatch.setattr(backend, "TRITON", small)
    b, h, e = 1, 4, 16
    text = head_transposed_text(b, 128, h, h, e, "f32")
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((b, 128, h, e)).astype(np.float32) for _ in range(3)]
    (expected,) = fuseopt.interpret(fuseopt.parse(text), "main", *inputs)
    cache = KernelCache(str(tmp_path / "c"))
    fn = backend.compile_module(fuseopt.parse(text), "main", {}, cache)
    assert [k.name for k in fn.kernels] == ["attention", "attention_combine"]
    (got,) = fn(*(torch.from_numpy(x) for x in inputs))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)

    from test_cuda_emulated import emulator_available, run_emulated

    if emulator_available():
        run_emulated(head_transposed_text(b, 512, h, h, e, "f32"), tmp_path, "f32")
