"""GroupNorm and InstanceNorm on a CUDA GPU with the Triton backend (skipped without one):
fuseopt's decompositions (frontends/fx/norm_decompositions.py) give eager's results,
forward and backward, in the kernel counts the CPU tests promise. On a GPU PyTorch's
own GroupNorm decomposition takes another form than on the CPU (it stores the
normalized input between two kernels), so only this file exercises the change where it
matters."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import fuseopt

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

GPU = torch.device("cuda")

NORMS = {
    "group_norm": (lambda x, w, b: F.group_norm(x, 4, w, b, 1e-5), 3),
    "instance_norm": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b, eps=1e-5), 1),
}
"""name -> (function, Triton kernels it compiles to)."""


@pytest.mark.parametrize("name", list(NORMS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_norm_forward_on_gpu(name: str, dtype: torch.dtype) -> None:
    """Within twice eager's error against float64 (plus a rounding of the dtype), in
    the promised number of kernels."""
    fn, kernels = NORMS[name]
    g = torch.Generator(device=GPU).manual_seed(0)
    x = (torch.randn(4, 16, 9, 13, device=GPU, generator=g) * 3 + 2).to(dtype)
    w = (torch.randn(16, device=GPU, generator=g) + 1).to(dtype)
    b = torch.randn(16, device=GPU, generator=g).to(dtype)
    torch._dynamo.reset()
    with torch.no_grad():
        compiled = fuseopt.compile(fn, backend="triton", strict=True)
        got = compiled(x, w, b)
        expected = fn(x, w, b)
        reference = fn(x.double(), w.double(), b.double())
    assert len(compiled.kernels) == kernels, [k.name for k in compiled.kernels]
    error = (got.double() - reference).abs().max().item()
    eager_error = (expected.double() - reference).abs().max().item()
    eps = torch.finfo(dtype).eps
    assert error <= 2 * eager_error + 4 * eps * max(reference.abs().max().item(), 1.0)


@pytest.mark.parametrize("module", ["GroupNorm", "InstanceNorm2d"])
def test_norm_training_gradients_on_gpu(module: str) -> None:
    """One training step: output and the input, weight and bias gradients as eager."""
    torch.manual_seed(0)
    make = (
        (lambda: torch.nn.GroupNorm(4, 16))
        if module == "GroupNorm"
        else (lambda: torch.nn.InstanceNorm2d(16, affine=True))
    )
    eager, ours = make().to(GPU), make().to(GPU)
    with torch.no_grad():
        eager.weight.copy_(torch.randn(16, device=GPU) + 1)
        eager.bias.copy_(torch.randn(16, device=GPU))
    ours.load_state_dict(eager.state_dict())
    torch._dynamo.reset()
    compiled = torch.compile(ours, backend="fuseopt", options={"backend": "triton"})
    x = (torch.randn(4, 16, 9, 13, device=GPU) * 2 + 1).requires_grad_()
    x_ours = x.detach().clone().requires_grad_()
    expected, got = eager(x), compiled(x_ours)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    seed = torch.randn(4, 16, 9, 13, device=GPU)
    (expected * seed).sum().backward()
    (got * seed).sum().backward()
    torch.testing.assert_close(x_ours.grad, x.grad, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(ours.weight.grad, eager.weight.grad, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(ours.bias.grad, eager.bias.grad, rtol=1e-3, atol=1e-3)
