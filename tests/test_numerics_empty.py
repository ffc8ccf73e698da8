"""Reductions over axes of size 0 and ops on empty tensors, as PyTorch defines them.

A sum over an empty axis is 0, a mean NaN, a max or min an error (torch.amax raises,
even when its result is empty); softmax, log_softmax and the norms of an empty tensor
are the empty tensor. The reference interpreter raised NumPy's "zero-size array to
reduction operation maximum which has no identity" for softmax over an empty axis
(issue 14). Checked:
- the nn reference interpreter, op by op against torch (a max or min over an empty
  axis raises `EmptyReductionError`, never a NumPy error), composites and their
  decomposition;
- whole models through `fuseopt.compile` with the interpret and Triton backends
  against eager (strict: nothing falls back; on Triton, a region with a reduction over
  an axis of size 0 runs eagerly, as convert-nn-to-tile rejects it);
- the Triton and CUDA (g++ emulation) kernels of empty tensors.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fuseopt
from fuseopt.interpreter import EmptyReductionError, InterpretError
from fuseopt.pipelines import FUSE

REDUCTIONS = {
    "sum": torch.sum,
    "mean": torch.mean,
    "reduce_max": torch.amax,
    "reduce_min": torch.amin,
}

EMPTY_REDUCTIONS = [
    ((4, 0), [1]),
    ((0, 3), [0]),
    ((0, 0), [1]),  # an empty result: torch.amax still raises
    ((0,), [0]),
    ((2, 0, 3), [1]),
    ((2, 0, 3), [0, 1, 2]),
    ((0, 4), [1]),  # a non-empty axis: every op gives an empty result
]


def _type(shape: tuple[int, ...]) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + "f32>"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("kind", list(REDUCTIONS))
@pytest.mark.parametrize("shape,axes", EMPTY_REDUCTIONS, ids=str)
def test_interpreter_reduces_empty_axes_as_torch(
    shape: tuple[int, ...], axes: list[int], kind: str
) -> None:
    result = tuple(n for i, n in enumerate(shape) if i not in axes)
    text = f"""func.func @main(%x: {_type(shape)}) -> {_type(result)} {{
  %r = nn.{kind} %x {axes} : {_type(shape)} -> {_type(result)}
  func.return %r : {_type(result)}
}}"""
    x = torch.zeros(shape)
    try:
        expected = REDUCTIONS[kind](x, axes)
    except (IndexError, RuntimeError):
        with pytest.raises(EmptyReductionError, match=r"has size 0.*torch\.amax"):
            fuseopt.interpret(fuseopt.parse(text), "main", x)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no NumPy "Mean of empty slice" either
        (y,) = fuseopt.interpret(fuseopt.parse(text), "main", x)
    np.testing.assert_array_equal(y, expected.numpy())


def test_an_empty_max_is_an_interpret_error() -> None:
    assert issubclass(EmptyReductionError, InterpretError)
    assert issubclass(InterpretError, ValueError)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,axis", [((4, 0), 1), ((0, 8), 1), ((0, 8), 0)], ids=str)
@pytest.mark.parametrize("decompose", [False, True], ids=["composite", "decomposed"])
def test_softmax_of_an_empty_tensor_is_empty(
    op: str, shape: tuple[int, ...], axis: int, decompose: bool
) -> None:
    t = _type(shape)
    text = f"""func.func @main(%x: {t}) -> {t} {{
  %r = nn.{op} %x axis {axis} : {t}
  func.return %r : {t}
}}"""
    module = fuseopt.parse(text)
    if decompose:
        module = fuseopt.run_pipeline(module, FUSE)
    (y,) = fuseopt.interpret(module, "main", np.zeros(shape, np.float32))
    assert y.shape == shape


@pytest.mark.parametrize("decompose", [False, True], ids=["composite", "decomposed"])
def test_norms_of_an_empty_tensor_are_empty(decompose: bool) -> None:
    x, w = _type((4, 0)), _type((0,))
    text = f"""func.func @main(%x: {x}, %w: {w}) -> ({x}, {x}) {{
  %l = nn.layer_norm %x weight %w bias %w {{eps = 1.0e-05 : f64}} : {x}, {w}, {w} -> {x}
  %r = nn.rms_norm %x weight %w {{eps = 1.0e-06 : f64}} : {x}, {w} -> {x}
  func.return %l, %r : {x}, {x}
}}"""
    module = fuseopt.parse(text)
    if decompose:
        module = fuseopt.run_pipeline(module, FUSE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outs = fuseopt.interpret(module, "main", np.zeros((4, 0)), np.zeros(0))
    assert [o.shape for o in outs] == [(4, 0), (4, 0)]


MODELS: dict[str, tuple[Callable[..., object], tuple[int, ...]]] = {
    "softmax_empty_axis": (lambda x: torch.softmax(x, -1), (4, 0)),
    "log_softmax_empty_axis": (lambda x: torch.log_softmax(x, -1), (4, 0)),
    "safe_softmax_empty_axis": (lambda x: torch.ops.aten._safe_softmax(x, -1), (4, 0)),
    "softmax_no_rows": (lambda x: torch.softmax(x * 2, -1), (0, 8)),
    "sum_empty_axis": (lambda x: x.sum(-1) + 1, (4, 0)),
    "mean_empty_axis": (lambda x: x.mean(-1, keepdim=True) * 2, (4, 0)),
    "sum_all": (lambda x: x.sum(), (0,)),
    "mean_all": (lambda x: x.mean(), (3, 0)),
    "var_std_empty_axis": (lambda x: (x.var(-1), x.std(-1)), (4, 0)),
    "var_mean_empty_axis": (lambda x: torch.var_mean(x, -1), (4, 0)),
    "amax_no_rows": (lambda x: x.amax(-1), (0, 4)),
    "layer_norm_empty": (lambda x: F.layer_norm(x, (0,)), (4, 0)),
    "native_layer_norm_stats": (
        lambda x: torch.ops.aten.native_layer_norm(x, [0], None, None, 1e-5),
        (4, 0),
    ),
    "layer_norm_no_rows": (lambda x: F.layer_norm(x, (8,)), (0, 8)),
    "rms_norm_empty": (lambda x: F.rms_norm(x, (0,)), (4, 0)),
    "exp_no_rows": (lambda x: torch.exp(x) + 1, (0, 4)),
}


TILE_REJECTS = {
    "sum_empty_axis",
    "mean_empty_axis",
    "sum_all",
    "mean_all",
    "var_std_empty_axis",
    "var_mean_empty_axis",
    "native_layer_norm_stats",
}
"""Models with a reduction over an axis of size 0 and a non-empty result: convert-nn-to-
tile rejects the kernel with a located error, so on Triton the region runs eagerly."""


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("backend", ["interpret", "triton"])
def test_empty_models_match_eager(backend: str, name: str) -> None:
    fn, shape = MODELS[name]
    x = torch.randn(shape)
    torch._dynamo.reset()
    strict = backend == "interpret" or name not in TILE_REJECTS
    compiled = fuseopt.compile(fn, backend=backend, strict=strict)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager's own "var(): degrees of freedom is <= 0"
        expected, actual = fn(x), compiled(x)
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    for a, e in zip(actual, expected, strict=True):
        assert a.shape == e.shape and a.dtype == e.dtype
        torch.testing.assert_close(a, e, equal_nan=True)


def test_empty_tensors_run_as_cuda_kernels(tmp_path: Path) -> None:
    from fuseopt.backends.cuda.backend import CudaBackend
    from fuseopt.backends.cuda.emulation import EmulatedFunction, emulator_available

    if not emulator_available():
        pytest.skip("g++ is not installed")
    x, e, r = _type((4, 0)), _type((0, 8)), _type((0,))
    text = f"""func.func @main(%x: {x}, %e: {e}) -> ({x}, {e}, {r}) {{
  %s = nn.softmax %x axis 1 : {x}
  %p = nn.exp %e : {e}
  %q = nn.sum %e [1] : {e} -> {r}
  func.return %s, %p, %q : {x}, {e}, {r}
}}"""
    fn = CudaBackend().compile(fuseopt.parse(text), "main", {})
    outs = EmulatedFunction(fn, tmp_path)(torch.zeros(4, 0), torch.zeros(0, 8))
    assert [tuple(o.shape) for o in outs] == [(4, 0), (0, 8), (0,)]
    assert math.prod(o.numel() for o in outs) == 0
