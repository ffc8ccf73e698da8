"""nn.attention: the op (verifier, reference semantics), its decomposition, and the
flash-attention schedule through the tile interpreter, the Triton interpreter and the
CUDA printer (nvcc where present, the CPU emulation where g++ is). Its capture from
PyTorch programs is tested in test_attention_capture.py, its operand layouts (head
transposes, a packed projection) and pipeline stages in test_attention_layouts.py.

Every numeric check is against a float64 reference computed by PyTorch (repeat_interleave
for grouped-query heads, an explicit causal/boolean mask), with the 16-bit tolerance set
by what PyTorch's own SDPA in that dtype gets wrong against the same reference."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from random_nn_graphs import interpret_both_ways

import fuseopt
from fuseopt.backends.cuda.backend import CudaBackend
from fuseopt.backends.cuda.emulation import EmulatedFunction, emulator_available
from fuseopt.backends.cuda.runtime import find_nvcc
from fuseopt.dialects import nn, tile
from fuseopt.pipelines import STANDARD

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def _tt(shape: tuple[int, ...], element: str) -> str:
    return "tensor<" + "x".join(str(d) for d in shape) + f"x{element}>"


def attention_text(
    q: tuple[int, ...],
    k: tuple[int, ...],
    ev: int,
    element: str,
    causal: bool = False,
    mask: tuple[tuple[int, ...], str] | None = None,
    scale: float | None = None,
) -> str:
    """A function @main(q, k, v[, mask]) -> attention(q, k, v)."""
    v = (*k[:-1], ev)
    out = (*q[:-1], ev)
    types = [_tt(q, element), _tt(k, element), _tt(v, element)]
    args = ["%q", "%k", "%v"]
    if mask is not None:
        types.append(_tt(*mask))
        args.append("%m")
    params = ", ".join(f"{a}: {t}" for a, t in zip(args, types, strict=True))
    factor = scale if scale is not None else 1 / math.sqrt(q[-1])
    flags = (" mask %m" if mask else "") + (" causal" if causal else "")
    return (
        f"func.func @main({params}) -> {_tt(out, element)} {{\n"
        f"  %o = nn.attention %q, %k, %v{flags} {{scale = {factor!r} : f64}} : "
        f"{', '.join(types)} -> {_tt(out, element)}\n"
        f"  func.return %o : {_tt(out, element)}\n}}\n"
    )


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    causal: bool,
    scale: float | None = None,
) -> torch.Tensor:
    """float64 attention: heads repeated, masks explicit, rows with no key kept are 0."""
    group = q.shape[1] // k.shape[1]
    kk, vv = (x.double().repeat_interleave(group, 1) for x in (k, v))
    scores = q.double() @ kk.transpose(-1, -2) * (scale or 1 / math.sqrt(q.shape[-1]))
    lq, s = scores.shape[-2:]
    if causal:
        scores = scores.masked_fill(~torch.ones(lq, s, dtype=torch.bool).tril(), -math.inf)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask
    probs = torch.softmax(scores, -1).nan_to_num(0.0)
    return probs @ vv


def torch_sdpa_error(q, k, v, mask, causal, scale=None) -> float:  # noqa: ANN001
    """How far PyTorch's own SDPA in the inputs' dtype is from `reference`."""
    group = q.shape[1] // k.shape[1]
    kk, vv = (x.repeat_interleave(group, 1) for x in (k, v))
    m = mask
    if causal:
        tri = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        m = (
            tri
            if m is None
            else (m & tri if m.dtype == torch.bool else m.masked_fill(~tri, -math.inf))
        )
    got = F.scaled_dot_product_attention(q, kk, vv, attn_mask=m, scale=scale).nan_to_num(0.0)
    return (got.double() - reference(q, k, v, mask, causal, scale)).abs().max().item()


CASES = {
    # name: (q shape, k shape, value head dim, causal, mask (shape, kind) or None)
    "plain": ((1, 2, 20, 16), (1, 2, 30, 16), 16, False, None),
    "causal_square": ((1, 2, 64, 32), (1, 2, 64, 32), 32, True, None),
    "causal_ragged_gqa": ((2, 4, 100, 64), (2, 2, 120, 64), 64, True, ((2, 1, 1, 120), "bool")),
    "causal_long_query": ((1, 1, 70, 16), (1, 1, 33, 16), 16, True, None),
    "odd_head_dims": ((1, 2, 33, 40), (1, 2, 70, 40), 24, True, None),
    "additive_row_mask": ((2, 2, 5, 32), (2, 1, 77, 32), 32, False, ((1, 1, 1, 77), "add")),
    "full_bool_mask": ((1, 2, 9, 16), (1, 2, 17, 16), 16, False, ((1, 2, 9, 17), "bool")),
    "one_element": ((1, 1, 1, 1), (1, 1, 1, 1), 1, False, None),
    "decode_gqa": ((3, 8, 1, 64), (3, 2, 150, 64), 64, False, ((3, 1, 1, 150), "add")),
    "head_dim_256": ((1, 1, 16, 256), (1, 1, 40, 256), 256, True, None),
    "split_decode_gqa": ((2, 8, 1, 32), (2, 2, 600, 32), 32, False, ((2, 1, 1, 600), "bool")),
    "split_rows": ((1, 1, 20, 16), (1, 1, 1100, 16), 16, False, None),
}
"""Shapes at the schedule's edges: ragged blocks, padded head dims, causal with more
or fewer queries than keys, packed grouped-query heads (`decode_gqa`, the masked
`additive_row_mask`), and key chunks merged by a combine kernel (`split_*`)."""

PLANS = {
    # name: (packed, splits)
    "causal_ragged_gqa": (False, 1),
    "decode_gqa": (True, 1),
    "additive_row_mask": (True, 1),
    "split_decode_gqa": (True, 2),
    "split_rows": (False, 4),
}


def make_inputs(case: str, dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, ...]:
    qs, ks, ev, _, mask = CASES[case]
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(qs, generator=g).to(dtype)
    k = torch.randn(ks, generator=g).to(dtype)
    v = torch.randn((*ks[:-1], ev), generator=g).to(dtype)
    if mask is None:
        return q, k, v
    shape, kind = mask
    if kind == "bool":
        m = torch.rand(shape, generator=g) > 0.3
        m[..., 0] = True  # every row keeps a key (the eager reference then has no NaN)
        return q, k, v, m
    return q, k, v, (torch.randn(shape, generator=g) * 2).to(dtype)


def case_text(case: str, element: str) -> str:
    qs, ks, ev, causal, mask = CASES[case]
    m = None
    if mask is not None:
        m = (mask[0], "i1" if mask[1] == "bool" else element)
    return attention_text(qs, ks, ev, element, causal, m)


def tolerance(case: str, dtype: torch.dtype, inputs: tuple[torch.Tensor, ...]) -> float:
    """f32: 1e-5; 16-bit: twice PyTorch's own SDPA error on these inputs, at least 1e-2."""
    if dtype == torch.float32:
        return 1e-5
    mask = inputs[3] if len(inputs) > 3 else None
    return max(2 * torch_sdpa_error(*inputs[:3], mask, CASES[case][3]), 1e-2)


def check(
    case: str, dtype: torch.dtype, got: torch.Tensor, inputs: tuple[torch.Tensor, ...]
) -> None:
    mask = inputs[3] if len(inputs) > 3 else None
    want = reference(*inputs[:3], mask, CASES[case][3])
    assert got.dtype == dtype and got.shape == want.shape
    err = (got.double() - want).abs().max().item()
    assert err <= tolerance(case, dtype, inputs), (case, err)


# ---------------------------------------------------------------- the op


def test_verifier_rejects_bad_attention() -> None:
    good = attention_text((1, 4, 8, 16), (1, 2, 8, 16), 16, "f32")
    fuseopt.parse(good)
    bad = {
        "not a multiple": attention_text((1, 3, 8, 16), (1, 2, 8, 16), 16, "f32"),
        "mask must be rank 4": attention_text(
            (1, 2, 8, 16), (1, 2, 8, 16), 16, "f32", mask=((2, 8, 8), "i1")
        ),
        "each dim 1 or": attention_text(
            (1, 2, 8, 16), (1, 2, 8, 16), 16, "f32", mask=((1, 2, 3, 8), "i1")
        ),
        "mask must be i1": attention_text(
            (1, 2, 8, 16), (1, 2, 8, 16), 16, "f32", mask=((1, 1, 1, 8), "i64")
        ),
    }
    for why, text in bad.items():
        with pytest.raises(Exception, match=why):
            fuseopt.parse(text)
    value_t = _tt((1, 2, 9, 16), "f32")
    ragged_value = (
        f"func.func @main(%q: {_tt((1, 2, 8, 16), 'f32')}, %k: {_tt((1, 2, 8, 16), 'f32')}, "
        f"%v: {value_t}) -> {_tt((1, 2, 8, 16), 'f32')} {{\n"
        f"  %o = nn.attention %q, %k, %v {{scale = 0.25 : f64}} : {_tt((1, 2, 8, 16), 'f32')}, "
        f"{_tt((1, 2, 8, 16), 'f32')}, {value_t} -> {_tt((1, 2, 8, 16), 'f32')}\n"
        f"  func.return %o : {_tt((1, 2, 8, 16), 'f32')}\n}}\n"
    )
    with pytest.raises(Exception, match="key must be"):
        fuseopt.parse(ragged_value)


@pytest.mark.parametrize("case", sorted(CASES))
def test_reference_semantics_match_pytorch(case: str) -> None:
    inputs = make_inputs(case, torch.float32)
    (got,) = fuseopt.interpret(
        fuseopt.parse(case_text(case, "f32")), "main", *(x.numpy() for x in inputs)
    )
    check(case, torch.float32, torch.from_numpy(np.asarray(got)), inputs)


def test_a_row_with_no_key_kept_is_zero() -> None:
    """Masked-out rows give 0 (PyTorch's _safe_softmax), not NaN, in the reference and
    in the Triton kernel."""
    text = attention_text((1, 1, 4, 16), (1, 1, 8, 16), 16, "f32", mask=((1, 1, 4, 8), "i1"))
    q, k, v = (torch.randn(1, 1, n, 16) for n in (4, 8, 8))
    mask = torch.ones(1, 1, 4, 8, dtype=torch.bool)
    mask[0, 0, 2] = False
    (ref,) = fuseopt.interpret(
        fuseopt.parse(text), "main", q.numpy(), k.numpy(), v.numpy(), mask.numpy()
    )
    (got,) = fuseopt.load_mlir(text, backend="triton")(q, k, v, mask)
    for out in (torch.from_numpy(np.asarray(ref)), got):
        assert torch.isfinite(out).all() and (out[0, 0, 2] == 0).all()
        torch.testing.assert_close(out[0, 0, :2], reference(q, k, v, mask, False)[0, 0, :2].float())


# ---------------------------------------------------------------- schedule


@pytest.mark.parametrize("case", sorted(CASES))
def test_schedule_matches_reference_in_the_tile_interpreter(case: str) -> None:
    module = fuseopt.parse(case_text(case, "f32"))
    inputs = [x.numpy() for x in make_inputs(case, torch.float32)]
    (expected,) = fuseopt.interpret(module, "main", *inputs)
    tiled = fuseopt.run_pipeline(module.clone(), STANDARD)
    kernels = [op for op in tiled.walk() if isinstance(op, tile.KernelOp)]
    splits = PLANS.get(case, (False, 1))[1]
    assert [k.require_schedule() for k in kernels] == [tile.Schedule.ATTENTION] * (
        2 if splits > 1 else 1
    )
    for (actual,) in interpret_both_ways(tiled, "main", *inputs):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", sorted(PLANS))
def test_plan_packs_groups_and_splits_short_queries(case: str) -> None:
    """Grouped heads whose rows need no mask of their own share one program (each K/V
    block read once per group); few programs over many keys split the keys."""
    from fuseopt.passes.convert_nn_to_tile.attention import plan_attention

    op = next(
        o for o in fuseopt.parse(case_text(case, "f32")).walk() if isinstance(o, nn.AttentionOp)
    )
    plan = plan_attention(op)
    assert (plan.packed, plan.splits) == PLANS[case]
    assert plan.chunk % plan.blocks.block_n == 0 or plan.splits == 1


@pytest.mark.parametrize("sizes", [(16, 16), (32, 16), (64, 32)])
def test_forced_block_sizes_match(sizes: tuple[int, int]) -> None:
    """Every query/key block pair (the causal split at BM a multiple of BN) computes the same."""
    case = "causal_ragged_gqa"
    module = fuseopt.parse(case_text(case, "f32"))
    inputs = [x.numpy() for x in make_inputs(case, torch.float32)]
    (expected,) = fuseopt.interpret(module, "main", *inputs)
    bm, bn = sizes
    spec = STANDARD.replace(
        "convert-nn-to-tile", f"convert-nn-to-tile{{attention-block-m={bm} attention-block-n={bn}}}"
    )
    tiled = fuseopt.run_pipeline(module.clone(), spec)
    kernel = next(op for op in tiled.walk() if isinstance(op, tile.KernelOp))
    assert kernel.array_attr("block_sizes") == (1, 1, bm, bn)
    (actual,) = fuseopt.interpret(tiled, "main", *inputs)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def test_large_head_dims_are_decomposed() -> None:
    """Head dims past MAX_HEAD_DIM are expanded by nn-decompose (matmul, softmax, matmul)
    and still match."""
    text = attention_text((1, 1, 4, 320), (1, 1, 6, 320), 16, "f32", causal=True)
    module = fuseopt.parse(text)
    decomposed = fuseopt.run_pipeline(module.clone(), "nn-decompose")
    assert not [op for op in decomposed.walk() if isinstance(op, nn.AttentionOp)]
    args = [
        np.random.default_rng(0).standard_normal(s).astype(np.float32)
        for s in ((1, 1, 4, 320), (1, 1, 6, 320), (1, 1, 6, 16))
    ]
    (want,) = fuseopt.interpret(module, "main", *args)
    (got,) = fuseopt.interpret(fuseopt.run_pipeline(module.clone(), STANDARD), "main", *args)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", sorted(CASES))
def test_decomposition_matches_reference(case: str) -> None:
    module = fuseopt.parse(case_text(case, "f32"))
    inputs = [x.numpy() for x in make_inputs(case, torch.float32)]
    (expected,) = fuseopt.interpret(module, "main", *inputs)
    decomposed = fuseopt.run_pipeline(module.clone(), "nn-decompose{attention=true}")
    assert not [op for op in decomposed.walk() if isinstance(op, nn.AttentionOp)]
    (got,) = fuseopt.interpret(decomposed, "main", *inputs)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- Triton


TRITON_CASES = [
    ("plain", "f32"),
    ("causal_ragged_gqa", "bf16"),
    ("causal_long_query", "f16"),
    ("odd_head_dims", "f32"),
    ("additive_row_mask", "bf16"),
    ("full_bool_mask", "f32"),
    ("one_element", "f32"),
    ("decode_gqa", "bf16"),
    ("split_decode_gqa", "bf16"),
    ("split_rows", "f32"),
]


@pytest.mark.parametrize("case,element", TRITON_CASES, ids=[f"{c}-{e}" for c, e in TRITON_CASES])
def test_triton_kernel_matches(case: str, element: str) -> None:
    dtype = DTYPES[element]
    inputs = make_inputs(case, dtype)
    (got,) = fuseopt.load_mlir(case_text(case, element), backend="triton")(*inputs)
    check(case, dtype, got, inputs)


@pytest.mark.parametrize("backend", ["interpret", "triton"])
def test_a_row_masked_with_finfo_min_averages_like_pytorch(backend: str) -> None:
    """An additive finfo.min mask over a whole row is not -inf: the softmax is uniform
    there (PyTorch's result), in the reference and in the kernel (whose base-2 scaling
    must not overflow it to -inf)."""
    low = torch.finfo(torch.float32).min
    text = attention_text((1, 1, 2, 16), (1, 1, 4, 16), 16, "f32", mask=((1, 1, 2, 4), "f32"))
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 1, n, 16, generator=g) for n in (2, 4, 4))
    mask = torch.zeros(1, 1, 2, 4)
    mask[0, 0, 1] = low
    (got,) = fuseopt.load_mlir(text, backend=backend)(q, k, v, mask)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(got[0, 0, 1], v[0, 0].mean(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- CUDA


def _cuda_sources(case: str, element: str) -> list[str]:
    fn = CudaBackend().compile(fuseopt.parse(case_text(case, element)), "main", {})
    return [k.source for k in fn.kernels if k.source]


@pytest.mark.parametrize(
    "case", ["causal_ragged_gqa", "decode_gqa", "odd_head_dims", "split_decode_gqa"]
)
def test_cuda_source_compiles(case: str, tmp_path: Path) -> None:
    sources = _cuda_sources(case, "bf16")
    assert len(sources) == (2 if case.startswith("split") else 1)
    assert all("schedule: attention" in s for s in sources) and "wmma" in sources[0]
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    for i, source in enumerate(sources):  # each kernel is its own translation unit
        (tmp_path / f"k{i}.cu").write_text(source)
        r = subprocess.run(
            [nvcc, "-arch=sm_90", "-c", f"k{i}.cu"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.skipif(not emulator_available(), reason="g++ is not installed")
@pytest.mark.parametrize(
    "case,element",
    [("causal_square", "f32"), ("additive_row_mask", "bf16"), ("split_rows", "f32")],
)
def test_cuda_kernel_matches_through_the_emulation(case: str, element: str, tmp_path: Path) -> None:
    dtype = DTYPES[element]
    inputs = make_inputs(case, dtype)
    fn = CudaBackend().compile(fuseopt.parse(case_text(case, element)), "main", {})
    (got,) = EmulatedFunction(fn, tmp_path)(*inputs)
    check(case, dtype, got, inputs)


# ---------------------------------------------------------------- sequence-major operands
