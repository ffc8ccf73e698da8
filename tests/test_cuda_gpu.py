"""The CUDA backend on a GPU: every workload of the workload suite against eager and float64.

Skipped without a CUDA GPU. Each case compiles the workload's eager module with
`fuseopt.compile(..., backend="cuda")` at a benchmark shape, runs it on fresh
random inputs (non-trivial weights), and judges it with the benchmark's correctness
gate (`benchmarks.accuracy`): error against a float64 reference within 2x eager's own
error (at least a per-dtype floor), no NaN/Inf. Ragged shapes (not multiples of the
tile or vector sizes) check the masked tails; every form of matmul operand staging
tile-promote can record runs on the hardware. Sizes are chosen so the whole file runs
in about a minute on an H100; the largest sweeps (softmax over 16k+ rows, mlp
"large") are left to the benchmark.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # benchmarks/ is a top-level directory, not installed
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import accuracy  # noqa: E402
from benchmarks.workloads import all_workloads  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SKIPPED_SHAPES = {
    ("softmax", "16kx32768"),
    ("softmax", "64kx32768"),
    ("softmax", "256kx32768"),
    ("mlp", "large"),
    ("mlp_heavy", "large"),
    ("mlp_stacked", "large"),
}
"""Shapes too large for a quick check (the benchmark checks them before timing)."""

CASES = [
    pytest.param(w, s, id=f"{w.name}-{s.label}")
    for w in all_workloads()
    for s in w.shapes
    if (w.name, s.label) not in SKIPPED_SHAPES
]


def _check(
    name: str, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], rowwise: bool = False
) -> str:
    """Compile with the cuda backend, run, and judge against float64 and eager."""
    import fuseopt

    class _W:  # the parts of a Workload that Reference reads
        pass

    w = _W()
    w.rowwise = rowwise  # type: ignore[attr-defined]
    w.reference_dtype = torch.float64  # type: ignore[attr-defined]
    ref = accuracy.Reference(w, model, inputs)  # type: ignore[arg-type]
    with torch.no_grad():
        eager = accuracy.as_tuple(model(*inputs))
        dtypes = tuple(t.dtype for t in eager)
        eager_stats = ref.error_of(eager, dtypes)
        start = time.perf_counter()
        compiled = fuseopt.compile(model, inputs, backend="cuda")
        compile_s = time.perf_counter() - start
        out = compiled(*inputs)
        torch.cuda.synchronize()
    stats = ref.error_of(out, dtypes)
    tol = accuracy.tolerance_from_eager(eager_stats, dtypes[0])
    verdict = accuracy.judge(stats, tol)
    kernels = compiled.kernels
    summary = (
        f"{name}: {verdict.message}; {len(kernels)} kernel(s), "
        f"{len(compiled.fallbacks)} eager op(s), compile {compile_s:.2f}s"
    )
    print(summary)
    assert verdict.ok, summary
    return summary


@pytest.mark.parametrize("workload,shape", CASES)
def test_workload_matches_eager(workload, shape) -> None:  # noqa: ANN001
    device = torch.device("cuda")
    dtype = torch.bfloat16
    model = workload.make_model(shape.dims, dtype, device, 0)
    inputs = workload.make_inputs(shape.dims, dtype, device, 1)
    _check(f"{workload.name}-{shape.label}", model, inputs, workload.rowwise)
    del model, inputs
    torch.cuda.empty_cache()


class _Ragged(torch.nn.Module):
    """rmsnorm * silu gate, softmax, layernorm and gelu(x + b) on ragged shapes."""

    def __init__(self, cols: int, device: torch.device, dtype: torch.dtype):
        super().__init__()
        g = torch.Generator(device=device).manual_seed(3)
        self.w = torch.nn.Parameter(
            1 + 0.3 * torch.randn(cols, generator=g, device=device).to(dtype)
        )
        self.b = torch.nn.Parameter(0.2 * torch.randn(cols, generator=g, device=device).to(dtype))

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> tuple[torch.Tensor, ...]:
        acc = torch.promote_types(x.dtype, torch.float32)
        xf = x.to(acc)
        r = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * self.w
        r = r * torch.nn.functional.silu(gate)
        s = torch.softmax(x, dim=-1)
        ln = torch.nn.functional.layer_norm(x, (x.shape[-1],), self.w, self.b, 1e-5)
        gb = torch.nn.functional.gelu(x + self.b)
        return r, s, ln, gb


@pytest.mark.parametrize("rows,cols", [(37, 1000), (5, 77), (3, 12345), (129, 4096)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_ragged_shapes_match_eager(rows: int, cols: int, dtype: torch.dtype) -> None:
    device = torch.device("cuda")
    g = torch.Generator(device=device).manual_seed(rows * cols)
    x = torch.randn(rows, cols, generator=g, device=device).to(dtype)
    gate = torch.randn(rows, cols, generator=g, device=device).to(dtype)
    _check(f"ragged-{rows}x{cols}-{dtype}", _Ragged(cols, device, dtype), (x, gate))


class _Mlp(torch.nn.Module):
    def __init__(self, d: int, di: int, device: torch.device, dtype: torch.dtype):
        super().__init__()
        self.up = torch.nn.Linear(d, di, device=device, dtype=dtype)
        self.down = torch.nn.Linear(di, d, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x))) + x


@pytest.mark.parametrize("m,d,di", [(100, 72, 200), (300, 264, 520), (64, 128, 256)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_ragged_mlp_matches_eager(m: int, d: int, di: int, dtype: torch.dtype) -> None:
    device = torch.device("cuda")
    torch.manual_seed(m + d)
    model = _Mlp(d, di, device, dtype)
    x = torch.randn(m, d, device=device, dtype=dtype)
    _check(f"mlp-{m}x{d}x{di}-{dtype}", model, (x,))


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("amax-rows", lambda x: x.amax(-1)),
        ("amin-columns", lambda x: x.amin(0)),
        ("amax-middle", lambda x: x.view(8, 16, -1).amax(1)),
        ("maximum-relu", lambda x: torch.maximum(x, x.flip(0)).relu()),
    ],
)
def test_max_and_min_propagate_nan_on_the_gpu(name: str, fn) -> None:  # noqa: ANN001
    """fo_max / fo_min (one max.NaN / min.NaN instruction on sm_80+) return NaN when
    either operand is NaN, as PyTorch does, in row, column and middle-axis reductions
    and elementwise; the rest of the result is exact."""
    import fuseopt

    torch.manual_seed(7)
    x = torch.randn(128, 96, device="cuda", dtype=torch.bfloat16)
    x[3, 5] = x[100, 0] = x[64, 95] = float("nan")
    compiled = fuseopt.compile(fn, (x,), backend="cuda", strict=True)
    got, expected = compiled(x), fn(x)
    assert got.isnan().any(), name
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)


def test_warm_compile_comes_from_the_cache() -> None:
    import fuseopt

    device = torch.device("cuda")
    model = _Mlp(64, 128, device, torch.bfloat16)
    x = torch.randn(32, 64, device=device, dtype=torch.bfloat16)
    fuseopt.compile(model, (x,), backend="cuda")
    start = time.perf_counter()
    again = fuseopt.compile(_Mlp(64, 128, device, torch.bfloat16), (x,), backend="cuda")
    warm = time.perf_counter() - start
    print(f"warm compile {warm:.3f}s for {len(again.kernels)} kernel(s)")
    assert warm < 10.0


def test_nvrtc_compiles_and_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With cuda-python installed, kernels compile through NVRTC (nvcc is never asked)
    and run correctly; skipped where cuda-python is absent (then nvcc compiles)."""
    from fuseopt.backends.cuda import runtime

    if runtime._nvrtc() is None:
        pytest.skip("cuda-python (NVRTC) is not installed")
    assert runtime.compiler_identity().startswith("nvrtc-"), runtime.compiler_identity()
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(tmp_path))  # a cold cache: everything compiles
    nvcc_calls: list[str] = []
    real_nvcc = runtime._nvcc_cubin

    def counting_nvcc(source: str, name: str, arch: str) -> bytes:
        nvcc_calls.append(name)
        return real_nvcc(source, name, arch)

    monkeypatch.setattr(runtime, "_nvcc_cubin", counting_nvcc)
    torch.manual_seed(7)
    model = torch.nn.Sequential(
        torch.nn.Linear(264, 520), torch.nn.GELU(), torch.nn.LayerNorm(520)
    ).to("cuda", torch.bfloat16)
    x = torch.randn(72, 264, device="cuda", dtype=torch.bfloat16)
    _check("nvrtc linear+gelu+layernorm", model, (x,))
    assert not nvcc_calls, f"NVRTC refused {nvcc_calls}; nvcc compiled them"


STAGING = {
    "pipeline_3_stages": "tile-promote",
    "pipeline_2_stages": "tile-promote{num-stages=2}",
    "synchronous": "tile-promote{num-stages=1}",
    "registers": "tile-promote{shared-bytes=0}",
}
"""tile-promote options giving each form of matmul operand staging the CUDA printer obeys."""


@pytest.mark.parametrize("staging", list(STAGING))
@pytest.mark.parametrize("m,d,di", [(300, 264, 520), (256, 512, 1024)])
def test_operand_staging_forms_run_on_the_gpu(m: int, d: int, di: int, staging: str) -> None:
    """Each staging form tile-promote can record (cp.async pipelines of 3 and 2 stages,
    one synchronous buffer, operands read from global memory) on real hardware: a
    ragged and an aligned MLP (GEMM + gelu, GEMM) against the nn reference."""
    import numpy as np
    from test_nn_fuse_workloads import mlp, random_args

    import fuseopt
    from fuseopt.backends.cuda.backend import CudaFunction, tile_pipeline
    from fuseopt.backends.cuda.printer import print_cuda

    text = mlp(m, d, di)
    reference = fuseopt.parse(text)
    args = random_args(reference, seed=5)
    expected = fuseopt.interpret(reference, "main", *args)
    spec = tile_pipeline().replace("nn-fuse", "nn-fuse{route=kernel}")
    spec = spec.rsplit(",tile-promote", 1)[0] + "," + STAGING[staging]
    lowered = fuseopt.run_pipeline(fuseopt.parse(text), spec)
    stagings = [
        k.attributes["operand_staging"].data
        for k in lowered.walk()
        if "operand_staging" in k.attributes
    ]
    assert stagings and set(stagings) == {"registers" if staging == "registers" else "shared"}
    fn = CudaFunction(lowered, "main", print_cuda(lowered))
    inputs = [torch.from_numpy(a).to(torch.bfloat16).cuda() for a in args]
    (out,) = fn(*inputs)
    got = out.float().cpu().numpy().reshape(expected[0].shape)
    scale = max(float(np.abs(expected[0]).max()), 1e-6)
    assert float(np.abs(got - expected[0]).max()) / scale < 2e-2


def _two_softmaxes(x: torch.Tensor) -> torch.Tensor:
    """Two row kernels (softmax over rows, then over the transposed rows)."""
    return torch.softmax(torch.softmax(x * 1.5, -1).t() * 2.0, -1).t()


def test_reduce_overhead_replays_cuda_graphs_on_the_cuda_backend() -> None:
    """mode="reduce-overhead" wraps the CUDA backend's function in CudaGraphFunction:
    results equal the plain function's on the same inputs, on fresh input addresses
    (static graph) and repeated ones (in-place graph), and outputs are never overwritten
    while the caller holds them."""
    import fuseopt
    from fuseopt.backends.cuda_graphs import CudaGraphFunction

    plain = fuseopt.compile(_two_softmaxes, backend="cuda", strict=True)
    graphs = fuseopt.compile(_two_softmaxes, backend="cuda", mode="reduce-overhead", strict=True)
    xs = [torch.randn(64, 256, device="cuda") for _ in range(4)]
    expected = [plain(x) for x in xs]
    got = [graphs(x) for x in xs] + [graphs(xs[0]), graphs(xs[0])]
    for out, want in zip(got, [*expected, expected[0], expected[0]], strict=True):
        torch.testing.assert_close(out, want, rtol=0, atol=0)
    region = graphs.regions[0]
    assert isinstance(region.compiled, CudaGraphFunction), type(region.compiled)
