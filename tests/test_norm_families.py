"""GroupNorm, InstanceNorm, BatchNorm (inference and training with running statistics)
and the smooth-L1 / Huber losses compile without running any op in PyTorch (issue 19).

AOTAutograd expands them with PyTorch's own decompositions (the table in
frontends/fx/dynamo_backend.py; GroupNorm with fuseopt's, and InstanceNorm without
running statistics through fuseopt's substitute in Dynamo's graph,
frontends/fx/norm_decompositions.py) into reductions and elementwise ops nn has. Checked against eager and a
float64 run at shapes of every rank and size the norms take (one element per group,
one group, one channel per group, ragged sizes), with non-trivial weights, on the
interpreter and the Triton backend, in inference and (interpreter) in training:
outputs, gradients and the updated running statistics."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from test_frontend_common import positive, randn

import fuseopt
from fuseopt.frontends.fx import norm_decompositions
from fuseopt.frontends.fx.dynamo_backend import decompositions

aten = torch.ops.aten

GROUP_NORM_SHAPES = [
    ((2, 8, 5, 3), 4),
    ((1, 6, 7), 3),  # 3-D (N, C, L)
    ((3, 4, 1, 1), 4),  # one element per group: variance 0
    ((2, 6, 2, 3, 5), 2),  # 5-D
    ((1, 12, 17, 9), 1),  # one group (a layer norm over C, H, W)
    ((2, 5, 11), 5),  # a group per channel (an instance norm)
    ((5, 4), 2),  # 2-D (N, C)
]


def _check(
    fn: Callable[..., torch.Tensor],
    inputs: tuple[torch.Tensor, ...],
    backend: str,
    dtype: torch.dtype,
) -> None:
    """`fn` compiled strictly (no op left to PyTorch) matches eager within eager's own
    error against float64 (plus a rounding of the result dtype)."""
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend=backend, strict=True)
        got = compiled(*inputs)
        expected = fn(*inputs)
        reference = fn(*(t.double() if t.is_floating_point() else t for t in inputs))
    assert compiled.regions and not compiled.fallbacks, compiled.fusion_report()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    eps = torch.finfo(dtype).eps
    scale = max(reference.abs().max().item(), 1.0)
    error = (got.double() - reference).abs().max().item()
    eager_error = (expected.double() - reference).abs().max().item()
    assert error <= 2 * eager_error + 4 * eps * scale, (error, eager_error)


def _affine(channels: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    return randn(channels, dtype=dtype, seed=7) + 1, randn(channels, dtype=dtype, seed=8)


@pytest.mark.parametrize(("shape", "groups"), GROUP_NORM_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_group_norm(shape: tuple[int, ...], groups: int, dtype: torch.dtype) -> None:
    x = randn(*shape, dtype=dtype, seed=1) * 3 + 1
    w, b = _affine(shape[1], dtype)
    _check(lambda x, w, b: F.group_norm(x, groups, w, b, 1e-5), (x, w, b), "interpret", dtype)


def test_group_norm_without_affine_f16() -> None:
    x = randn(2, 6, 4, 4, dtype=torch.float16, seed=2) * 50
    _check(lambda x: F.group_norm(x, 3), (x,), "interpret", torch.float16)


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_with_a_large_mean(affine: bool) -> None:
    """The scale-and-shift form (x * scale + shift) stays within twice eager's error when
    the mean is a thousand standard deviations, with and without a weight (PyTorch's
    own CPU decomposition took the other form without one)."""
    x = randn(2, 16, 5, seed=13) * 10 + 10000
    w, b = _affine(16, torch.float32)
    if affine:
        fn = lambda x, w, b: F.group_norm(x, 4, w, b, 1e-5)  # noqa: E731
    else:
        fn = lambda x, w, b: F.group_norm(x, 4, None, None, 1e-5) + 0 * (w + b).sum()  # noqa: E731
    _check(fn, (x, w, b), "interpret", torch.float32)


@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize(
    ("dtype", "parameters"),
    [
        (torch.float32, torch.float32),
        (torch.float64, torch.float64),
        (torch.bfloat16, torch.bfloat16),
        (torch.float16, torch.float16),
        (torch.bfloat16, torch.float32),  # mixed: f32 statistics, as the op returns
    ],
    ids=str,
)
def test_group_norm_decomposition_matches_the_op(
    affine: tuple[bool, bool], dtype: torch.dtype, parameters: torch.dtype
) -> None:
    """fuseopt's decomposition of aten.native_group_norm (the table's entry, on every
    device) returns what the op returns: the output and the (N, groups) mean and rstd
    (which the backward reads), in the op's dtypes."""
    assert decompositions()[aten.native_group_norm.default] is norm_decompositions.native_group_norm
    x = (randn(3, 6, 4, 5, seed=14) * 2 + 3).to(dtype)
    w, b = _affine(6, parameters)
    args = (x, w if affine[0] else None, b if affine[1] else None, 3, 6, 20, 2, 1e-5)
    got = norm_decompositions.native_group_norm(*args)
    expected = aten.native_group_norm.default(*args)
    assert isinstance(got, tuple)
    tolerance = 1e-5 if dtype in (torch.float32, torch.float64) else 2e-2
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.dtype, e.dtype)
        torch.testing.assert_close(g, e, rtol=tolerance, atol=tolerance)


def test_group_norm_decomposition_leaves_odd_inputs_to_pytorch() -> None:
    """Groups that do not divide the channels, empty groups (eager's mean is 0 there)
    and mixed dtypes the op rejects go to PyTorch (NotImplemented)."""
    x = randn(2, 6, 4, seed=15)
    native = norm_decompositions.native_group_norm
    assert native(x, None, None, 2, 6, 4, 4, 1e-5) is NotImplemented
    assert native(torch.empty(2, 6, 0), None, None, 2, 6, 0, 3, 1e-5) is NotImplemented
    w = randn(6, seed=16).to(torch.bfloat16)
    assert native(x, w, None, 2, 6, 4, 3, 1e-5) is NotImplemented


def _check_affine_gradients(
    make: Callable[[], torch.nn.Module], weight_seed: int, x: torch.Tensor, cotangent_seed: int
) -> None:
    """One training step of a norm module `make` builds, with non-trivial weight and
    bias (seeds `weight_seed`, `weight_seed + 1`), compiled with the interpreter: the
    output and the input, weight and bias gradients under a random cotangent as eager."""
    eager, ours = make(), make()
    channels = eager.weight.shape[0]
    with torch.no_grad():
        eager.weight.copy_(randn(channels, seed=weight_seed) + 1)
        eager.bias.copy_(randn(channels, seed=weight_seed + 1))
    ours.load_state_dict(eager.state_dict())
    torch._dynamo.reset()
    compiled = torch.compile(ours, backend="fuseopt", options={"backend": "interpret"})
    x = x.requires_grad_()
    x_ours = x.detach().clone().requires_grad_()
    expected, got = eager(x), compiled(x_ours)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    (expected * randn(*x.shape, seed=cotangent_seed)).sum().backward()
    (got * randn(*x.shape, seed=cotangent_seed)).sum().backward()
    torch.testing.assert_close(x_ours.grad, x.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ours.weight.grad, eager.weight.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ours.bias.grad, eager.bias.grad, rtol=1e-4, atol=1e-4)


def test_group_norm_training_gradients() -> None:
    """Backward through GroupNorm (PyTorch's decomposition of the backward reads the
    forward's mean and rstd): input, weight and bias gradients as eager."""
    x = randn(4, 6, 5, 3, seed=18) * 2 + 1
    _check_affine_gradients(lambda: torch.nn.GroupNorm(3, 6), 16, x, 19)


@pytest.mark.parametrize("affine", [True, False])
def test_instance_norm(affine: bool) -> None:
    x = randn(3, 4, 5, 7, seed=3) - 2
    w, b = _affine(4, torch.float32)
    fn = (
        (lambda x, w, b: F.instance_norm(x, weight=w, bias=b))
        if affine
        else (lambda x, w, b: F.instance_norm(x) + 0 * w.sum() + 0 * b.sum())
    )
    _check(fn, (x, w, b), "interpret", torch.float32)


@pytest.mark.parametrize("shape", [(2, 8, 4, 4), (3, 5, 7), (2, 3, 2, 3, 4)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_instance_norm_is_one_kernel(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    """F.instance_norm becomes fuseopt's substitute in Dynamo's graph: statistics and
    the per-channel weight and bias in one Triton kernel, no copy kernels for the
    repeated weight and bias (PyTorch's composite repeats them N times)."""
    x = randn(*shape, dtype=dtype, seed=21) * 2 - 1
    w, b = _affine(shape[1], dtype)
    fn = lambda x, w, b: F.instance_norm(x, weight=w, bias=b, eps=1e-5)  # noqa: E731
    _check(fn, (x, w, b), "triton", dtype)
    compiled = fuseopt.compile(fn, (x, w, b), backend="triton", strict=True)
    assert len(compiled.kernels) == 1, [k.name for k in compiled.kernels]


def test_instance_norm_substitute_keeps_pytorchs_rules() -> None:
    """The substitute computes F.instance_norm's result, and where PyTorch has rules of
    its own (a weight of another dtype or shape, one spatial element) it runs PyTorch's
    function, so the same inputs are refused. The substitution copies Dynamo's graph and
    leaves it as it was."""
    x = randn(2, 3, 5, seed=27)
    w, b = _affine(3, torch.float32)
    torch.testing.assert_close(
        norm_decompositions.instance_norm(x, None, None, w, b), F.instance_norm(x, weight=w, bias=b)
    )
    for bad in (w.double(), w.reshape(3, 1)):
        try:
            expected: object = F.instance_norm(x, weight=bad, bias=b)
        except (RuntimeError, ValueError) as e:
            expected = type(e)
        try:
            got: object = norm_decompositions.instance_norm(x, None, None, bad, b)
        except (RuntimeError, ValueError) as e:
            got = type(e)
        if isinstance(expected, torch.Tensor):
            assert isinstance(got, torch.Tensor)
            torch.testing.assert_close(got, expected)
        else:
            assert got == expected
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        norm_decompositions.instance_norm(randn(2, 3, 1, seed=28))
    gm = torch.fx.symbolic_trace(lambda t: F.instance_norm(t))
    substituted = norm_decompositions.substitute_composites(gm)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets == [F.instance_norm]
    assert norm_decompositions.instance_norm in [n.target for n in substituted.graph.nodes]


def test_instance_norm_with_running_statistics_is_pytorchs() -> None:
    """With running statistics the substitute calls F.instance_norm itself: outputs,
    input gradients and the updated running mean and variance as eager."""
    eager = torch.nn.InstanceNorm2d(4, affine=True, track_running_stats=True).train()
    ours = torch.nn.InstanceNorm2d(4, affine=True, track_running_stats=True).train()
    ours.load_state_dict(eager.state_dict())
    torch._dynamo.reset()
    compiled = torch.compile(ours, backend="fuseopt", options={"backend": "interpret"})
    x = (randn(3, 4, 5, 6, seed=22) * 2 + 1).requires_grad_()
    x_ours = x.detach().clone().requires_grad_()
    expected, got = eager(x), compiled(x_ours)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    expected.square().sum().backward()
    got.square().sum().backward()
    torch.testing.assert_close(x_ours.grad, x.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ours.running_mean, eager.running_mean)
    torch.testing.assert_close(ours.running_var, eager.running_var)


def test_instance_norm_training_gradients() -> None:
    """Backward through the substitute (autograd of its statistics): input, weight and
    bias gradients as eager."""
    x = randn(3, 5, 9, seed=25) * 3
    _check_affine_gradients(lambda: torch.nn.InstanceNorm1d(5, affine=True), 23, x, 26)


@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (2, 7), (3, 5, 9), (1, 2, 1, 1, 3)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_batch_norm_inference(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    c = shape[1]
    x = randn(*shape, dtype=dtype, seed=4)
    mean, var = randn(c, dtype=dtype, seed=5), positive(c, dtype=dtype, seed=6)
    w, b = _affine(c, dtype)
    fn = lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False, eps=1e-3)  # noqa: E731
    _check(fn, (x, mean, var, w, b), "interpret", dtype)


def test_batch_norm_batch_statistics() -> None:
    """training=True without running statistics: normalized by the batch's own."""
    x = randn(6, 3, 4, 5, seed=9) * 2
    w, b = _affine(3, torch.float32)
    fn = lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)  # noqa: E731
    _check(fn, (x, w, b), "interpret", torch.float32)


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b)),
        ("batch_norm_eval", lambda x, w, b: F.batch_norm(x, b, w.abs() + 0.5, w, b)),
        ("instance_norm", lambda x, w, b: F.instance_norm(x, weight=w, bias=b)),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_norms_on_triton(name: str, fn: Callable[..., torch.Tensor], dtype: torch.dtype) -> None:
    x = randn(2, 4, 6, 5, dtype=dtype, seed=10) + 0.5
    w, b = _affine(4, dtype)
    _check(fn, (x, w, b), "triton", dtype)


def test_batch_norm_training_step_updates_running_statistics() -> None:
    """A BatchNorm2d module in training mode: output, the gradients of input, weight
    and bias, and the running mean / variance after two steps, as eager."""
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4)).train()
    with torch.no_grad():
        eager[1].weight.copy_(randn(4, seed=11) + 1)
        eager[1].bias.copy_(randn(4, seed=12))
    ours = type(eager)(*[type(m)(**_init_args(m)) for m in eager]).train()
    ours.load_state_dict(eager.state_dict())
    torch._dynamo.reset()
    compiled = torch.compile(ours, backend="fuseopt", options={"backend": "interpret"})
    for step in range(2):
        x = randn(5, 3, 6, 7, seed=20 + step).requires_grad_()
        x_ours = x.detach().clone().requires_grad_()
        expected, got = eager(x), compiled(x_ours)
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
        expected.square().sum().backward()
        got.square().sum().backward()
        torch.testing.assert_close(x_ours.grad, x.grad, rtol=1e-4, atol=1e-4)
    bn_eager, bn_ours = eager[1], ours[1]
    torch.testing.assert_close(bn_ours.weight.grad, bn_eager.weight.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(bn_ours.bias.grad, bn_eager.bias.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(bn_ours.running_mean, bn_eager.running_mean)
    torch.testing.assert_close(bn_ours.running_var, bn_eager.running_var)
    assert int(bn_ours.num_batches_tracked) == 2


def _init_args(m: torch.nn.Module) -> dict[str, object]:
    if isinstance(m, torch.nn.Conv2d):
        return {"in_channels": 3, "out_channels": 4, "kernel_size": 1}
    return {"num_features": 4}


def test_group_norm_gradients() -> None:
    """GroupNorm's backward (decomposed) gives eager's gradients."""
    x = (randn(2, 6, 3, 5, seed=30) * 2).requires_grad_()
    w = (randn(6, seed=31) + 1).requires_grad_()
    b = randn(6, seed=32).requires_grad_()
    fn = lambda x, w, b: F.group_norm(x, 3, w, b).sin().sum()  # noqa: E731
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="fuseopt", options={"backend": "interpret"})
    args_ours = [t.detach().clone().requires_grad_() for t in (x, w, b)]
    fn(x, w, b).backward()
    compiled(*args_ours).backward()
    for ours, theirs in zip(args_ours, (x, w, b), strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    ("loss", "parameter"),
    [("smooth_l1", 1.0), ("smooth_l1", 0.3), ("smooth_l1", 0.0), ("huber", 0.7)],
    ids=str,
)
def test_smooth_l1_and_huber(loss: str, parameter: float, reduction: str) -> None:
    a, b = randn(4, 33, seed=40) * 2, randn(4, 33, seed=41)
    if loss == "smooth_l1":
        fn = lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=parameter)  # noqa: E731
    else:
        fn = lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=parameter)  # noqa: E731
    _check(fn, (a, b), "interpret", torch.float32)


def test_huber_loss_on_triton_bf16() -> None:
    a, b = randn(3, 40, dtype=torch.bfloat16, seed=42), randn(3, 40, dtype=torch.bfloat16)
    _check(lambda a, b: F.huber_loss(a, b), (a, b), "triton", torch.bfloat16)


@pytest.mark.parametrize(
    ("size", "stride", "reshape"),
    [([4, 6], [6, 1], True), ([2, 12], [12, 1], True), ([4, 6], [1, 4], False)],
    ids=str,
)
def test_as_strided_is_a_reshape_only_when_it_reads_in_order(
    size: list[int], stride: list[int], reshape: bool
) -> None:
    """as_strided of a contiguous tensor in row-major order compiles; any other stride
    pattern runs in PyTorch, logged, with eager's result."""
    x = randn(2, 3, 4, seed=50)
    fn = lambda x: torch.as_strided(x * 2, size, stride) + 1  # noqa: E731
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="interpret")
        torch.testing.assert_close(compiled(x), fn(x))
    assert bool(compiled.fallbacks) != reshape, compiled.fusion_report()


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: torch.as_strided((a * 2).t(), (2, 2), (1, 4)) + 1,  # a transposed input
        lambda a: torch.as_strided((a * 2)[:, 1:], (2, 2), (3, 1), 1) + 1,  # a sliced one
        lambda a: torch.as_strided((a * 2)[1:], (2, 2), (1, 2)) + 1,  # at a storage offset
        lambda a: torch.as_strided(a * 2, (2, 2), (1, 2), 3) + 1,  # reads within a
    ],
)
def test_as_strided_of_views_keeps_eager_results(fn: Callable[..., torch.Tensor]) -> None:
    """as_strided reads memory by strides: where a contiguous copy of its input would
    read other elements, its whole graph runs eagerly (logged), never a wrong result."""
    a = randn(4, 4, seed=51)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="interpret")
        torch.testing.assert_close(compiled(a), fn(a))
    assert compiled.fallbacks
