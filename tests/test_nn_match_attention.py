"""nn-match-attention: attention written out as ops becomes one nn.attention.

The pass is checked against the reference interpreter (the module before and after it on
random inputs) over the FileCheck cases, and end to end: modules that write attention by
hand (as Hugging Face's "eager" attention does) compile to one nn.attention per
attention and match eager PyTorch."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from xdsl.dialects import func

import fuseopt
from fuseopt.dialects import nn

CASES = Path(__file__).parent.parent / "filecheck" / "passes" / "nn-match-attention.mlir"


def _random_args(module, seed: int) -> list[np.ndarray]:  # noqa: ANN001 - a ModuleOp
    """Random inputs of the first function: floats in [-1.5, 1.5], booleans with about
    a third false."""
    rng = np.random.default_rng(seed)
    fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
    args = []
    for t in fn.function_type.inputs.data:
        shape = tuple(t.get_shape())
        if str(t.element_type) == "i1":
            args.append(rng.uniform(size=shape) > 0.33)
        else:
            args.append(rng.uniform(-1.5, 1.5, size=shape).astype(np.float32))
    return args


def _chunks() -> list[str]:
    return [c for c in CASES.read_text().split("// -----") if "func.func" in c]


@pytest.mark.parametrize("index", range(len(_chunks())))
def test_pass_keeps_the_reference_semantics(index: int) -> None:
    text = _chunks()[index]
    module = fuseopt.parse(text)
    name = next(op for op in module.walk() if op.name == "func.func").sym_name.data  # type: ignore[attr-defined]
    args = _random_args(module, index)
    want = fuseopt.interpret(module, name, *args)
    matched = fuseopt.run_pipeline(module.clone(), "nn-match-attention")
    got = fuseopt.interpret(matched, name, *args)
    bf16 = "bf16" in text
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(
            np.asarray(g, dtype=np.float64),
            np.asarray(w, dtype=np.float64),
            rtol=2e-2 if bf16 else 1e-5,
            atol=2e-2 if bf16 else 1e-6,
        )


class Handwritten(torch.nn.Module):
    """Attention as a model writes it: scores, scale, mask, softmax, @ v."""

    def __init__(self, form: str):
        super().__init__()
        self.form = form

    def forward(self, q, k, v, mask=None):  # noqa: ANN001, ANN201
        if self.form == "grouped":  # repeat_kv, then attention over the repeated heads
            group = q.shape[1] // k.shape[1]
            b, h, s, d = k.shape
            k = k[:, :, None].expand(b, h, group, s, d).reshape(b, h * group, s, d)
            v = v[:, :, None].expand(b, h, group, s, d).reshape(b, h * group, s, d)
        scores = q @ k.transpose(-1, -2)
        scores = scores * 0.3 if self.form == "grouped" else scores / math.sqrt(q.shape[-1])
        if self.form == "causal":
            lq, s = scores.shape[-2:]
            above = torch.ones(lq, s, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(above, float("-inf"))
        if mask is not None:
            scores = scores + mask
        probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        return probs @ v


def _inputs(form: str, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(3)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=g).to(dtype)

    if form == "grouped":
        return r(2, 4, 6, 16), r(2, 2, 9, 16), r(2, 2, 9, 16)
    if form == "additive":
        return r(2, 3, 7, 16), r(2, 3, 11, 16), r(2, 3, 11, 16), r(2, 1, 1, 11)
    return r(1, 2, 10, 16), r(1, 2, 10, 16), r(1, 2, 10, 16)


@pytest.mark.parametrize("form", ["additive", "causal", "grouped"])
@pytest.mark.parametrize("element", ["f32", "bf16"])
def test_handwritten_attention_compiles_to_nn_attention(form: str, element: str) -> None:
    dtype = torch.float32 if element == "f32" else torch.bfloat16
    model, inputs = Handwritten(form), _inputs(form, dtype)
    compiled = fuseopt.compile(model, backend="triton")
    with torch.no_grad():
        got = compiled(*inputs)
        want = model(*(x.double() for x in inputs))
    fused = [fuseopt.api.fused_module(r) for r in compiled.regions]
    attention = [op for m in fused for op in m.walk() if isinstance(op, nn.AttentionOp)]
    assert len(attention) == 1
    assert [k.schedule for k in compiled.kernels].count("attention") == 1
    if form == "grouped":  # the repeated heads are read unrepeated
        assert attention[0].key.type.get_shape()[1] == 2  # type: ignore[attr-defined]
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol)
