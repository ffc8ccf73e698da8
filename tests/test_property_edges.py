"""Property tests on the edge cases an outside fuzzer found bugs in (issue 14).

Each test draws small PyTorch functions from tests/edge_graphs.py, compiles them with
`fuseopt.compile(..., strict=True)` on every backend ("interpret", "triton" in Triton's
CPU interpreter, and "cuda" with its kernels run by the g++ emulation), and checks:

- the region really compiled: no op ran eagerly, and kernels were generated for every
  non-empty result (a test passing because PyTorch ran the graph proves nothing);
- results have eager's shapes and dtypes; integers and booleans equal eager's;
- NaN and +-Inf sit exactly where eager has them (except where eager itself overflowed
  and the float64 result is representable: there a finite answer near float64 is right);
- `exact` cases (max/min, casts) equal eager bit for bit;
- otherwise each row's error against the float64 run is at most SLACK times eager's
  error on that row, plus FLOOR_EPS epsilons of the output dtype (its rounding) and of
  float32 per op along the case's `depth` (each op may round differently from eager).
  Errors are relative to the row's magnitude: its largest float64 value, or the largest
  value of the function run on the inputs' absolute values where that is larger (a sum
  that cancels is only as accurate as the sum of the magnitudes it added).

`pytest tests/test_property_edges.py` checks fixed examples (the derandomized `ci`
profile); `--hypothesis-profile=explore` draws new ones each run for longer bug hunts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
from edge_graphs import (
    EdgeCase,
    cast_cases,
    chain_cases,
    empty_cases,
    nan_inf_cases,
    overflow_cases,
    slice_concat_cases,
    upcast,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp

import fuseopt
from fuseopt import api
from fuseopt.backends.cuda.backend import CudaBackend
from fuseopt.backends.cuda.emulation import EmulatedFunction, emulator_available

EMULATED_CUDA = "cuda-emulated"
"""The name the "cuda" backend is registered under with its kernels run by g++."""

BACKENDS = [
    "interpret",
    "triton",
    pytest.param(
        EMULATED_CUDA,
        marks=pytest.mark.skipif(not emulator_available(), reason="g++ is not installed"),
    ),
]

SLACK = 4.0
"""fuseopt may be this many times less accurate than eager (fusion rounds differently)."""

FLOOR_EPS = 4.0
"""...plus this many epsilons (of the output dtype, and of float32 per op of depth),
relative to the row's largest float64 value."""

EXPLORE_FACTOR = 10
"""Under a randomized profile (`explore`: a bug hunt) each test draws this many times
the examples it draws in the derandomized `ci` profile."""


class EmulatedCudaBackend:
    """The "cuda" backend with its CudaFunction wrapped to run on the CPU emulation."""

    def __init__(self, workdir: Path):
        self.workdir = workdir

    def compile(
        self, module: ModuleOp, func_name: str, options: Mapping[str, Any]
    ) -> EmulatedFunction:
        """Compile as `backend="cuda"` does; run the kernels emulated."""
        return EmulatedFunction(CudaBackend().compile(module, func_name, options), self.workdir)


@pytest.fixture(scope="module", autouse=True)
def _backends(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A private kernel cache, and the emulated CUDA backend registered for the module."""
    root = tmp_path_factory.mktemp("edges")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FUSEOPT_CACHE_DIR", str(root / "cache"))
        patch.setitem(api.BACKENDS, EMULATED_CUDA, lambda: EmulatedCudaBackend(root / "emu"))
        yield


def as_tuple(out: object) -> tuple[torch.Tensor, ...]:
    """A function's result as a tuple of tensors."""
    return tuple(out) if isinstance(out, tuple | list) else (out,)  # type: ignore[arg-type]


def check_case(case: EdgeCase, backend: str) -> None:
    """Compile `case` on `backend` (strict), and judge it against eager and float64."""
    with torch.no_grad():
        expected = as_tuple(case.fn(*case.inputs))
        reference = as_tuple(case.fn(*(upcast(t) for t in case.inputs)))
        magnitude = as_tuple(
            case.fn(*(upcast(t).abs() if t.is_floating_point() else t for t in case.inputs))
        )
        compiled = fuseopt.compile(case.fn, backend=backend, strict=True)
        actual = as_tuple(compiled(*case.inputs))
    assert compiled.regions, "nothing compiled: the whole graph ran eagerly"
    assert not compiled.fallbacks, compiled.fusion_report()
    # results computed from no data at all (a sum over a size-0 axis) are constants,
    # and results equal to an input (a lossless round trip such as f16 -> f32 -> f16)
    # are the input: canonicalize folds both, and they need no kernel
    from_data = any(t.numel() for t in case.inputs)
    computed = [e for e in expected if e.numel() and not is_an_input(e, case.inputs)]
    if computed and from_data:
        assert compiled.kernels, "no kernel generated for a non-empty result"
    assert len(actual) == len(expected)
    for i, (a, e, r, m) in enumerate(zip(actual, expected, reference, magnitude, strict=True)):
        floor = error_floor(e.dtype, case.depth)
        assert_matches(a, e, r, case.is_exact(i), floor, f"result {i}", m)


def is_an_input(result: torch.Tensor, inputs: tuple[torch.Tensor, ...]) -> bool:
    """Whether `result` is bit for bit one of `inputs` (same dtype, shape and values)."""
    return any(
        t.dtype == result.dtype and t.shape == result.shape and torch.equal(t, result)
        for t in inputs
    )


def error_floor(dtype: torch.dtype, depth: int) -> float:
    """The row-relative error allowed beyond SLACK times eager's: FLOOR_EPS epsilons of
    `dtype` (the final rounding) and of float32 for each of `depth` ops."""
    if not dtype.is_floating_point:
        return 0.0
    return FLOOR_EPS * (torch.finfo(dtype).eps + depth * torch.finfo(torch.float32).eps)


def _show(mask: torch.Tensor, *named: tuple[str, torch.Tensor]) -> str:
    where = mask.nonzero()[:4].tolist()
    flat = [tuple(i) for i in where]
    return "; ".join(
        f"at {list(i)}: " + ", ".join(f"{n}={t[i].item()!r}" for n, t in named) for i in flat
    )


def assert_matches(
    actual: torch.Tensor,
    eager: torch.Tensor,
    ref: torch.Tensor,
    exact: bool,
    floor: float,
    what: str,
    magnitude: torch.Tensor | None = None,
) -> None:
    """`actual` against `eager` and the float64 `ref` (see the module docstring); `floor`
    is the row-relative error allowed beyond SLACK times eager's; `magnitude` (the function
    of the inputs' absolute values, float64) widens a row's scale where it is larger."""
    assert actual.shape == eager.shape, f"{what}: shape {actual.shape}, eager {eager.shape}"
    assert actual.dtype == eager.dtype, f"{what}: dtype {actual.dtype}, eager {eager.dtype}"
    if eager.numel() == 0:
        return
    if exact or not eager.is_floating_point():
        same = (actual == eager) | (actual.isnan() & eager.isnan())
        assert bool(same.all()), f"{what} differs from eager: " + _show(
            ~same, ("fuseopt", actual), ("eager", eager)
        )
        return
    a, e, r = actual.double(), eager.double(), ref.double()
    representable = ref.to(actual.dtype).isfinite()
    eager_overflowed = ~e.isfinite() & representable
    pattern = (a.isnan() != e.isnan()) | (a.isposinf() != e.isposinf())
    pattern |= a.isneginf() != e.isneginf()
    bad = pattern & ~eager_overflowed
    assert not bool(bad.any()), f"{what}: NaN/Inf not where eager has them: " + _show(
        bad, ("fuseopt", a), ("eager", e), ("float64", r)
    )
    rows = lambda t: t.reshape(-1, t.shape[-1]) if t.dim() >= 2 else t.reshape(1, -1)  # noqa: E731
    a, e, r = rows(a), rows(e), rows(r)
    finite_ref = r.isfinite()
    scale = torch.where(finite_ref, r.abs(), 0).amax(-1, keepdim=True)
    if magnitude is not None and magnitude.shape == ref.shape:
        m = rows(magnitude.double())
        scale = torch.maximum(scale, torch.where(m.isfinite(), m.abs(), 0).amax(-1, keepdim=True))
    scale = torch.where(scale > 0, scale, 1.0)
    ours = torch.where(a.isfinite() & finite_ref, (a - r).abs() / scale, 0)
    theirs = torch.where(e.isfinite() & finite_ref, (e - r).abs() / scale, 0)
    bound = (SLACK * theirs.amax(-1, keepdim=True) + floor).expand_as(ours)
    worse = ours > bound
    assert not bool(worse.any()), (
        f"{what}: row-relative error against float64 above {SLACK}x eager's + {floor:.2e}: "
        + _show(
            worse, ("fuseopt", a), ("eager", e), ("float64", r), ("err", ours), ("bound", bound)
        )
    )


def check_property(
    cases: st.SearchStrategy[EdgeCase], backend: str, examples: Mapping[str, int]
) -> None:
    """Check `cases` on `backend` for `examples[backend]` examples in the `ci` profile
    (EXPLORE_FACTOR times more under a randomized one)."""
    factor = 1 if settings.default.derandomize else EXPLORE_FACTOR

    @settings(
        max_examples=examples[backend] * factor,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases)
    def holds(case: EdgeCase) -> None:
        check_case(case, backend)

    holds()


def _per_backend(interpret: int, triton: int, cuda: int) -> dict[str, int]:
    return {"interpret": interpret, "triton": triton, EMULATED_CUDA: cuda}


# Examples per backend in the `ci` profile: the file stays near 90 s on two cores. Each
# CUDA kernel costs a g++ run (about 2 s), a 400-op chain 10 s to compile on any backend.
NAN_INF_EXAMPLES = _per_backend(12, 12, 4)
CAST_EXAMPLES = _per_backend(12, 12, 4)
EMPTY_EXAMPLES = _per_backend(8, 8, 4)
CHAIN_EXAMPLES = _per_backend(1, 1, 1)
SLICE_CONCAT_EXAMPLES = _per_backend(8, 8, 3)
OVERFLOW_EXAMPLES = _per_backend(10, 10, 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_inf_through_max_min_and_reductions(backend: str) -> None:
    """(a) NaN and +-Inf through every max/min (amax, amin, max, min, maximum, minimum,
    clamp, hardtanh, relu6, relu) and every reduction (sum, mean, softmax, log_softmax,
    layer_norm, rms_norm and its pattern): NaN/Inf where eager puts them."""
    check_property(nan_inf_cases(), backend, NAN_INF_EXAMPLES)


@pytest.mark.parametrize("backend", BACKENDS)
def test_casts_between_every_dtype_pair(backend: str) -> None:
    """(b) Casts between each pair of f32, f16, bf16, bool and int64, alone, before and
    after exact arithmetic, on negative, fractional and large values: eager's bits."""
    check_property(cast_cases(), backend, CAST_EXAMPLES)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_size_tensors(backend: str) -> None:
    """(c) Zero-size tensors: batch 0, and reductions over a size-0 axis where torch
    defines the result (sum 0, mean NaN, logsumexp -inf, softmax empty)."""
    check_property(empty_cases(), backend, EMPTY_EXAMPLES)


@pytest.mark.parametrize("backend", BACKENDS)
def test_long_elementwise_chains(backend: str) -> None:
    """(d) Random DAGs of 200-450 unary and binary elementwise ops (values kept in
    [-2, 2]) through the whole pipeline."""
    check_property(chain_cases(), backend, CHAIN_EXAMPLES)


@pytest.mark.parametrize("backend", BACKENDS)
def test_odd_widths_after_slices_and_concats(backend: str) -> None:
    """(e) Slices and concats along the last or a middle axis giving widths 1, 3, 7, 682
    or 1000 (non-power-of-two tiles), then a reduction, softmax or normalization."""
    check_property(slice_concat_cases(), backend, SLICE_CONCAT_EXAMPLES)


@pytest.mark.parametrize("backend", BACKENDS)
def test_f16_bf16_overflow_in_decompositions(backend: str) -> None:
    """(f) f16/bf16 softplus, mish, sigmoid, silu, gelu (both), elu, tanh, softmax and
    log_softmax on inputs up to +-60, and layer_norm / rms-norm on rows of large
    magnitude (random, constant, offset): no Inf/NaN eager does not have, eager's accuracy."""
    check_property(overflow_cases(), backend, OVERFLOW_EXAMPLES)
