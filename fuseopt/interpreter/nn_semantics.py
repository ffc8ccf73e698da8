"""Reference semantics of the nn dialect, as xDSL interpreter functions over NumPy.

Each op computes in float64 (int64 for integers) and rounds once into its result
type (see `dtypes`), so results are correctly rounded per op. This is the oracle
every pass and backend is checked against; it favours clarity over speed.

Empty tensors follow PyTorch: a sum over an axis of size 0 is 0, a mean NaN, a max or
min raises `EmptyReductionError` (torch.amax raises); a softmax, log_softmax or norm of
an empty tensor is the empty tensor.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.ir import Attribute

from fuseopt.dialects import nn
from fuseopt.interpreter.dtypes import compute_dtype, to_element_type
from fuseopt.interpreter.errors import EmptyReductionError, IndexOutOfRangeError
from fuseopt.interpreter.torch_calls import run_torch_call

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


UNARY: dict[type[nn.UnaryElementwiseOp], Callable[[np.ndarray], np.ndarray]] = {
    nn.NegOp: np.negative,
    nn.AbsOp: np.abs,
    nn.ExpOp: np.exp,
    nn.Exp2Op: np.exp2,
    nn.LogOp: np.log,
    nn.Log1pOp: np.log1p,
    nn.SqrtOp: np.sqrt,
    nn.RsqrtOp: lambda x: 1 / np.sqrt(x),
    nn.ReciprocalOp: lambda x: 1 / x,
    nn.TanhOp: np.tanh,
    nn.SigmoidOp: _sigmoid,
    nn.ReluOp: lambda x: np.maximum(x, 0),
    nn.SiluOp: lambda x: x * _sigmoid(x),
    nn.ErfOp: _erf,
    nn.SinOp: np.sin,
    nn.CosOp: np.cos,
    nn.FloorOp: np.floor,
    nn.CeilOp: np.ceil,
    nn.TruncOp: np.trunc,
}
"""Unary elementwise ops (gelu has an attribute and is handled apart)."""


def _signs_differ(r: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where a remainder `r` is non-zero with a sign other than the divisor `b`'s."""
    return (r != 0) & ((r < 0) != (b < 0))


def _floor_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """PyTorch's floor division: Python's for integers (0 for a zero divisor, NumPy's);
    for floats c10's div_floor_floating, whose special cases (a zero quotient's sign,
    b = 0, infinities) `nn.FloorDivOp` lists."""
    if a.dtype.kind != "f":
        return np.floor_divide(a, b)
    mod = np.fmod(a, b)
    div = (a - mod) / b
    div = np.where(_signs_differ(mod, b), div - 1, div)
    floor = np.floor(div)
    floor = np.where(div - floor > 0.5, floor + 1, floor)
    out = np.where(div != 0, floor, np.copysign(0.0, a / b))
    return np.where(b == 0, a / b, out)


def _trunc_div(a: np.ndarray, b: np.ndarray, element: Attribute) -> np.ndarray:
    """Division rounded toward zero: for floats trunc of the quotient rounded to f32,
    then to `element` (as eager's kernels round it; rounding float64's quotient to f32
    again is exact, 53 >= 2 * 24 + 2 bits), C's `/` for integers (0 for a zero
    divisor)."""
    if a.dtype.kind == "f":
        quotient = to_element_type((a / b).astype(np.float32), element)
        return np.trunc(np.asarray(quotient, dtype=np.float64))
    return np.floor_divide(a - np.fmod(a, b), np.where(b == 0, 1, b)) * (b != 0)


def _remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Python's `%`: fmod, plus b where the remainder's sign differs from b's."""
    r = np.fmod(a, b)
    return np.where(_signs_differ(r, b), r + b, r)


BINARY: dict[type[nn.BinaryElementwiseOp], Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    nn.AddOp: np.add,
    nn.SubOp: np.subtract,
    nn.MulOp: np.multiply,
    nn.DivOp: np.divide,
    nn.MaxOp: np.maximum,
    nn.MinOp: np.minimum,
    nn.PowOp: np.power,
    nn.FloorDivOp: _floor_div,
    nn.RemainderOp: _remainder,
    nn.FmodOp: np.fmod,
}

COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}

REDUCE: dict[type[nn.ReductionOp], Callable[..., np.ndarray]] = {
    nn.SumOp: np.sum,
    nn.ReduceMaxOp: np.max,
    nn.ReduceMinOp: np.min,
    nn.MeanOp: np.mean,
}


def _result(op_result_type: object, value: np.ndarray) -> np.ndarray:
    assert isinstance(op_result_type, TensorType)
    with np.errstate(all="ignore"):
        out = to_element_type(value, op_result_type.element_type)
    return np.broadcast_to(out, op_result_type.get_shape()).copy() if out.ndim == 0 else out


def _args(args: PythonValues) -> list[np.ndarray]:
    return [compute_dtype(np.asarray(a)) for a in args]


def _trailing_axes(x: np.ndarray, k: int) -> tuple[int, ...]:
    return tuple(range(x.ndim - k, x.ndim))


def attention(
    op: nn.AttentionOp, q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None
) -> np.ndarray:
    """`nn.attention` in float64: key/value heads repeated over their query group, the
    scores masked (i1: -inf where false; float: added; causal: -inf above the top-left
    diagonal), a softmax in which a row with no finite score is all zeros, then `@ v`."""
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * op.scale_value
    lq, s = scores.shape[-2:]
    if op.is_causal:
        scores = np.where(np.tril(np.ones((lq, s), dtype=bool)), scores, -np.inf)
    if mask is not None:
        m = np.asarray(mask)
        scores = np.where(m.astype(bool), scores, -np.inf) if m.dtype == np.bool_ else scores + m
    if scores.size == 0 or v.shape[-1] == 0:
        return np.zeros((*q.shape[:-1], v.shape[-1]))
    with np.errstate(invalid="ignore"):
        peak = np.max(scores, axis=-1, keepdims=True)
        safe = np.where(np.isfinite(peak), peak, 0.0)
        e = np.exp(scores - safe)
        total = np.sum(e, axis=-1, keepdims=True)
        probs = np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)
    return np.matmul(probs, v)


@register_impls
class NNFunctions(InterpreterFunctions):
    """Interpreter implementations of every nn op."""

    @impl(nn.GeluOp)
    def run_gelu(self, interpreter: Interpreter, op: nn.GeluOp, args: PythonValues):
        (x,) = _args(args)
        return (_result(op.result.type, _gelu(x, op.approximation)),)

    @impl(nn.CompareOp)
    def run_compare(self, interpreter: Interpreter, op: nn.CompareOp, args: PythonValues):
        a, b = _args(args)
        return (_result(op.result.type, COMPARE[op.predicate.data](a, b)),)

    @impl(nn.SelectOp)
    def run_select(self, interpreter: Interpreter, op: nn.SelectOp, args: PythonValues):
        c, a, b = args
        return (_result(op.result.type, np.where(np.asarray(c, dtype=bool), a, b)),)

    @impl(nn.CastOp)
    def run_cast(self, interpreter: Interpreter, op: nn.CastOp, args: PythonValues):
        (x,) = _args(args)
        return (_result(op.result.type, x),)

    @impl(nn.ConstantOp)
    def run_constant(self, interpreter: Interpreter, op: nn.ConstantOp, args: PythonValues):
        t = op.result.type
        assert isinstance(t, TensorType)
        v = op.value
        if isinstance(v, DenseIntOrFPElementsAttr):
            data = np.array(v.get_values()).reshape(t.get_shape())
        else:
            data = np.full(t.get_shape(), v.value.data)
        return (_result(t, data),)

    @impl(nn.TorchCallOp)
    def run_torch_call(self, interpreter: Interpreter, op: nn.TorchCallOp, args: PythonValues):
        elements = [v.type.element_type for v in op.inputs]  # type: ignore[attr-defined]
        outs = [r.type.element_type for r in op.outputs]  # type: ignore[attr-defined]
        return tuple(run_torch_call(op.target.data, op.call.data, args, elements, outs))

    @impl(nn.MatmulOp)
    def run_matmul(self, interpreter: Interpreter, op: nn.MatmulOp, args: PythonValues):
        a, b = _args(args)
        if op.transpose_a is not None:
            a = np.swapaxes(a, -1, -2)
        if op.transpose_b is not None:
            b = np.swapaxes(b, -1, -2)
        return (_result(op.result.type, np.matmul(a, b)),)

    @impl(nn.AttentionOp)
    def run_attention(self, interpreter: Interpreter, op: nn.AttentionOp, args: PythonValues):
        q, k, v, *rest = _args(args)
        return (_result(op.result.type, attention(op, q, k, v, rest[0] if rest else None)),)

    @impl(nn.ReshapeOp)
    def run_reshape(self, interpreter: Interpreter, op: nn.ReshapeOp, args: PythonValues):
        t = op.result.type
        assert isinstance(t, TensorType)
        return (np.reshape(np.asarray(args[0]), t.get_shape()).copy(),)

    @impl(nn.TransposeOp)
    def run_transpose(self, interpreter: Interpreter, op: nn.TransposeOp, args: PythonValues):
        return (np.transpose(np.asarray(args[0]), op.perm).copy(),)

    @impl(nn.SliceOp)
    def run_slice(self, interpreter: Interpreter, op: nn.SliceOp, args: PythonValues):
        index = tuple(slice(lo, hi, st) for lo, hi, st in op.bounds)
        return (np.asarray(args[0])[index].copy(),)

    @impl(nn.BroadcastOp)
    def run_broadcast(self, interpreter: Interpreter, op: nn.BroadcastOp, args: PythonValues):
        t = op.result.type
        assert isinstance(t, TensorType)
        return (np.broadcast_to(np.asarray(args[0]), t.get_shape()).copy(),)

    @impl(nn.ConcatOp)
    def run_concat(self, interpreter: Interpreter, op: nn.ConcatOp, args: PythonValues):
        return (np.concatenate([np.asarray(a) for a in args], axis=op.axis.value.data),)

    @impl(nn.CumsumOp)
    def run_cumsum(self, interpreter: Interpreter, op: nn.CumsumOp, args: PythonValues):
        (x,) = _args(args)
        summed = np.cumsum(x, axis=op.axis_value) if x.ndim else x
        return (_result(op.result.type, summed),)

    @impl(nn.TakeOp)
    def run_take(self, interpreter: Interpreter, op: nn.TakeOp, args: PythonValues):
        x, index = np.asarray(args[0]), np.asarray(args[1], dtype=np.int64)
        bad = (index < 0) | (index >= x.size)
        if bad.any():
            raise IndexOutOfRangeError(op, int(index[bad].flat[0]), x.size)
        return (x.reshape(-1)[index].copy(),)

    @impl(nn.SoftmaxOp)
    def run_softmax(self, interpreter: Interpreter, op: nn.SoftmaxOp, args: PythonValues):
        (x,) = _args(args)
        if x.size == 0:
            return (_result(op.result.type, x),)
        axis = op.axis.value.data
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return (_result(op.result.type, e / np.sum(e, axis=axis, keepdims=True)),)

    @impl(nn.LogSoftmaxOp)
    def run_log_softmax(self, interpreter: Interpreter, op: nn.LogSoftmaxOp, args: PythonValues):
        (x,) = _args(args)
        if x.size == 0:
            return (_result(op.result.type, x),)
        axis = op.axis.value.data
        shifted = x - np.max(x, axis=axis, keepdims=True)
        lse = np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
        return (_result(op.result.type, shifted - lse),)

    @impl(nn.RmsNormOp)
    def run_rms_norm(self, interpreter: Interpreter, op: nn.RmsNormOp, args: PythonValues):
        x, *params = _args(args)
        if x.size == 0:
            return (_result(op.result.type, x),)
        axes = _trailing_axes(x, op.norm_rank)
        y = x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + op.eps.value.data)
        if op.weight is not None:
            y = y * params[0]
        return (_result(op.result.type, y),)

    @impl(nn.LayerNormOp)
    def run_layer_norm(self, interpreter: Interpreter, op: nn.LayerNormOp, args: PythonValues):
        x, *params = _args(args)
        if x.size == 0:
            return (_result(op.result.type, x),)
        axes = _trailing_axes(x, op.norm_rank)
        mean = np.mean(x, axis=axes, keepdims=True)
        var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
        y = (x - mean) / np.sqrt(var + op.eps.value.data)
        if op.weight is not None:
            y = y * params.pop(0)
        if op.bias is not None:
            y = y + params.pop(0)
        return (_result(op.result.type, y),)

    @impl(nn.LinearOp)
    def run_linear(self, interpreter: Interpreter, op: nn.LinearOp, args: PythonValues):
        x, w, *bias = _args(args)
        y = np.matmul(x, w.T)
        if bias:
            y = y + bias[0]
        return (_result(op.result.type, y),)

    @impl(nn.FusionOp)
    def run_fusion(self, interpreter: Interpreter, op: nn.FusionOp, args: PythonValues):
        return interpreter.run_ssacfg_region(op.body, args, "nn.fusion")

    @impl_terminator(nn.YieldOp)
    def run_yield(
        self, interpreter: Interpreter, op: nn.YieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()


def _unary_impl(fn: Callable[[np.ndarray], np.ndarray]):  # noqa: ANN202
    def run(self, interpreter: Interpreter, op: nn.UnaryElementwiseOp, args: PythonValues):  # noqa: ANN001
        (x,) = _args(args)
        with np.errstate(all="ignore"):
            return (_result(op.result.type, fn(x)),)

    return run


def _binary_impl(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]):  # noqa: ANN202
    def run(self, interpreter: Interpreter, op: nn.BinaryElementwiseOp, args: PythonValues):  # noqa: ANN001
        a, b = _args(args)
        with np.errstate(all="ignore"):
            return (_result(op.result.type, fn(a, b)),)

    return run


def _reduce_impl(fn: Callable[..., np.ndarray]):  # noqa: ANN202
    def run(self, interpreter: Interpreter, op: nn.ReductionOp, args: PythonValues):  # noqa: ANN001
        (x,) = _args(args)
        axes = op.axis_list
        keep = op.keepdim is not None
        _check_not_empty(op, x, axes)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's "Mean of empty slice"
            return (_result(op.result.type, fn(x, axis=axes, keepdims=keep)),)

    return run


def _check_not_empty(op: nn.ReductionOp, x: np.ndarray, axes: tuple[int, ...]) -> None:
    """A max or min needs elements: raise as torch.amax does (even for an empty result)."""
    if isinstance(op, nn.ReduceMaxOp | nn.ReduceMinOp):
        for a in axes:
            if x.shape[a] == 0:
                raise EmptyReductionError(op, a)


def _run_trunc_div(self, interpreter: Interpreter, op: nn.TruncDivOp, args: PythonValues):  # noqa: ANN001, ANN202
    """nn.trunc_div: its float quotient rounds to the result's element type first."""
    element = op.result.type.element_type
    return _binary_impl(lambda a, b: _trunc_div(a, b, element))(self, interpreter, op, args)


# Table-driven families: attach one `@impl` per op, then (re-)register the class.
for _op, _fn in UNARY.items():
    setattr(NNFunctions, f"run_{_op.name[3:]}", impl(_op)(_unary_impl(_fn)))
for _op, _fn in BINARY.items():
    setattr(NNFunctions, f"run_{_op.name[3:]}", impl(_op)(_binary_impl(_fn)))
NNFunctions.run_trunc_div = impl(nn.TruncDivOp)(_run_trunc_div)
for _op, _fn in REDUCE.items():
    setattr(NNFunctions, f"run_{_op.name[3:]}", impl(_op)(_reduce_impl(_fn)))
NNFunctions = register_impls(NNFunctions)
