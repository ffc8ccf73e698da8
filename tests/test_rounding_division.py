"""floor, ceil, trunc, floor_divide, div(rounding_mode=...), remainder and fmod (nn.floor,
nn.ceil, nn.trunc, nn.floor_div, nn.trunc_div, nn.remainder, nn.fmod) against eager,
bit for bit, in f32, bf16 and int64, with signed zeros, infinities, NaN, zero divisors
and divisors of either sign: through the reference interpreter, Triton's interpreter,
and the CUDA backend (emulated on the CPU with g++, and compiled with nvcc)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import fuseopt
from fuseopt.backends.cuda.backend import CudaBackend
from fuseopt.backends.cuda.emulation import EmulatedFunction, emulator_available

FLOAT_A = [7, -7, 7, -7, 0, -0.0, 5.5, -5.5, 1, math.inf, -math.inf, math.nan, 1e-30, -3, 2.5, 9]
FLOAT_B = [3, 3, -3, -3, 3, -3, 2, 2, 0.1, 2, -2, 2, 3, math.inf, 0, -0.0]
"""Hand-picked float pairs: each sign combination, zero quotients of either sign, 1 over
0.1 (whose rounded quotient is 10, the exact one just below), infinities, NaN, and
zero divisors."""


def operands(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The hand-picked pairs, then 48 seeded random pairs (quotients below 2**20, where
    PyTorch's float floor division is exact)."""
    g = torch.Generator().manual_seed(0)
    if dtype == torch.int64:
        a = torch.randint(-60, 60, (4, 16), generator=g)
        b = torch.randint(1, 9, (4, 16), generator=g) * torch.where(
            torch.rand(4, 16, generator=g) < 0.5, -1, 1
        )
        return a, b
    a = torch.cat([torch.tensor(FLOAT_A), torch.randn(48, generator=g) * 40]).reshape(4, 16)
    b = torch.cat([torch.tensor(FLOAT_B), torch.randn(48, generator=g) * 4 + 0.5]).reshape(4, 16)
    return a.to(dtype), b.to(dtype)


OPS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "floor_divide": torch.floor_divide,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "python_operators": lambda a, b: a // b - a % b,
    "scalars": lambda a, b: torch.remainder(a, 3) + torch.fmod(b, -2) + a // -4 - 5 % b,
    "rounding": lambda a, b: torch.floor(a) + torch.ceil(b) - torch.trunc(a - b),
}

DTYPES = [torch.float32, torch.bfloat16, torch.int64]

COMPOUND = ("python_operators", "scalars", "rounding")
"""Cases of several ops: in bf16 they match eager bit for bit with eager's per-op
rounding (`precision="eager"`); the default rounds a fused group once, at its end."""


def _options(name: str, dtype: torch.dtype) -> dict[str, str]:
    return {"precision": "eager"} if dtype == torch.bfloat16 and name in COMPOUND else {}


def assert_same(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal values, NaN where eager has NaN, and the same sign of every zero."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if not want.dtype.is_floating_point:
        assert torch.equal(got, want)
        return
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan), (got, want)
    assert torch.equal(got[~nan], want[~nan]), (got, want)
    assert torch.equal(got[~nan].signbit(), want[~nan].signbit()), (got, want)


@pytest.mark.parametrize("backend", ["interpret", "triton"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(OPS))
def test_matches_eager_bit_for_bit(name: str, dtype: torch.dtype, backend: str) -> None:
    """One kernel, no fallback, eager's exact values (signed zeros included)."""
    a, b = operands(dtype)
    fn = OPS[name]
    compiled = fuseopt.compile(fn, backend=backend, **_options(name, dtype))
    got = compiled(a, b)
    assert not compiled.fallbacks
    assert_same(got, fn(a, b))


@pytest.mark.parametrize("backend", ["interpret", "triton"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_remainder_reads_a_scalar_in_the_tensors_type(dtype: torch.dtype, backend: str) -> None:
    """`x % 0.1` on a 16-bit tensor is the remainder by the 16-bit 0.1, as eager's
    kernels read the scalar (a number or a 0-d f32 tensor), on either side."""
    x = torch.tensor([1.0, 7.0, -3.5, 250.0]).to(dtype)
    cases = [
        lambda t: t % 0.1,
        lambda t: torch.fmod(t, 0.3),
        lambda t: t % torch.tensor(0.1),
        lambda t: torch.tensor(0.1) % t,
    ]
    for fn in cases:
        assert_same(fuseopt.compile(fn, backend=backend)(x), fn(x))


def test_rounding_a_bool_tensor_is_refused_as_eager_refuses_it() -> None:
    """floor of a bool tensor runs in PyTorch (listed), which raises as eager does."""
    x = torch.tensor([True, False])
    with pytest.raises(RuntimeError):
        torch.floor(x)
    compiled = fuseopt.compile(torch.floor, backend="interpret")
    with pytest.raises(Exception, match="bool|Bool"):
        compiled(x)


@pytest.mark.parametrize("backend", ["interpret", "triton"])
def test_default_precision_rounds_what_a_rounding_op_reads(backend: str) -> None:
    """Under the default f32 policy a rounding op reads a computed bf16 operand rounded,
    as eager does: floor(x * 0.37) jumps where eager's does."""
    g = torch.Generator().manual_seed(1)
    a = (torch.randn(64, 64, generator=g) * 30).bfloat16()
    fn = lambda t: torch.floor(t * 0.37) + 1  # noqa: E731
    assert torch.equal(fuseopt.compile(fn, backend=backend)(a), fn(a))


@pytest.mark.skipif(not emulator_available(), reason="the CUDA emulation needs g++")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_backend_matches_eager_bit_for_bit(dtype: torch.dtype, tmp_path: Path) -> None:
    """The CUDA backend's kernels (run through the CPU emulation) give eager's values."""
    a, b = operands(dtype)
    for name, fn in OPS.items():
        module = fuseopt.parse(fuseopt.export(fn, (a, b)))
        compiled = CudaBackend().compile(module, "forward", _options(name, dtype))
        (got,) = EmulatedFunction(compiled, tmp_path)(a, b)
        assert_same(got.reshape(a.shape), fn(a, b)), name


def test_cuda_kernels_compile_with_nvcc(tmp_path: Path) -> None:
    """Every op's CUDA kernel compiles for sm_90 (skipped without nvcc)."""
    from test_cuda_compile import NVCC, nvcc_failures

    if NVCC is None:
        pytest.skip("nvcc is not installed")
    sources = [
        kernel.source
        for dtype in DTYPES
        for fn in OPS.values()
        for kernel in CudaBackend()
        .compile(fuseopt.parse(fuseopt.export(fn, operands(dtype))), "forward", {})
        .cuda_kernels
    ]
    failures = nvcc_failures(sources, tmp_path)
    assert not failures, "\n\n".join(failures)


def test_integer_rounding_is_the_input(caplog: pytest.LogCaptureFixture) -> None:
    """floor, ceil and trunc of an integer tensor are the tensor: no kernel work, no
    fallback."""
    x = torch.arange(-5, 5)
    with caplog.at_level(logging.WARNING, logger="fuseopt"):
        compiled = fuseopt.compile(lambda t: torch.floor(t) + torch.trunc(t) * 2, backend="triton")
        assert torch.equal(compiled(x), x * 3)
    assert not compiled.fallbacks and not caplog.records


def test_unknown_rounding_mode_is_refused_with_the_op() -> None:
    """An op outside the IR (div with a rounding mode nn does not know) is not silently
    rewritten: PyTorch refuses the mode before fuseopt sees it."""
    with pytest.raises(RuntimeError, match="rounding_mode"):
        torch.div(torch.ones(2), torch.ones(2), rounding_mode="ceil")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend", ["triton", "cuda"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gpu_matches_eager_cuda_bit_for_bit(dtype: torch.dtype, backend: str) -> None:
    """On the GPU, against eager's CUDA kernels (whose 16-bit kernels may round where
    the CPU's do not)."""
    a, b = (t.cuda() for t in operands(dtype))
    for name, fn in OPS.items():
        compiled = fuseopt.compile(fn, backend=backend, **_options(name, dtype))
        got = compiled(a, b)
        assert not compiled.fallbacks, name
        assert_same(got.cpu(), fn(a, b).cpu())
