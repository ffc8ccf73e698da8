"""The Triton backend on a CUDA GPU (skipped without one).

Self-contained checks for one batched run on the H100 (well under two minutes):
- every workload of the workload suite at realistic sizes (bf16) against a float64 reference,
  no worse than twice eager's error (the benchmark's gate, `benchmarks.accuracy`);
- mode="reduce-overhead": CUDA graphs replay on the same input buffers, read inputs in
  place, and never overwrite results the caller still holds;
- mode="max-autotune": candidates are timed, the choice is cached, results stay right.

A report (median kernel times from `triton.testing.do_bench`, fuseopt vs eager, and the
roofline at 3.0 TB/s) is printed at the end and written to `$OUT/triton_gpu_report.md`
when `OUT` is set (the device runner's output folder).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from test_triton_helpers import check_workload, workload

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

COPY_BANDWIDTH = 3.0e12
"""Bytes/s of a large device-to-device copy on the H100 (docs/performance.md)."""

SHAPES: list[tuple[str, str, dict[str, int]]] = [
    ("rmsnorm", "decode", {"batch": 1, "seq": 1, "hidden": 5120}),
    ("rmsnorm", "prefill", {"batch": 1, "seq": 2048, "hidden": 5120}),
    ("rmsnorm_silu_gate", "prefill", {"batch": 1, "seq": 2048, "hidden": 5120}),
    ("softmax", "4096x8192", {"rows": 4096, "cols": 8192}),
    ("softmax", "1024x32768", {"rows": 1024, "cols": 32768}),
    ("layernorm", "8192x4096", {"rows": 8192, "hidden": 4096}),
    ("gelu_bias", "8192x8192", {"rows": 8192, "cols": 8192}),
    ("rmsnorm_rope", "4x2048x32x128", {"batch": 4, "seq": 2048, "heads": 32, "head_dim": 128}),
    ("mlp", "memory_bound", {"m": 16384, "d": 256, "di": 1024}),
    ("mlp", "medium", {"m": 2048, "d": 1024, "di": 4096}),
    ("mlp", "small", {"m": 128, "d": 1024, "di": 4096}),
    ("mlp_heavy", "memory_bound", {"m": 16384, "d": 256, "di": 1024}),
    ("mlp_stacked", "small", {"m": 128, "d": 1024, "di": 4096}),
    ("gated_mlp", "4096x4096x11008", {"m": 4096, "d": 4096, "di": 11008}),
    ("llama_block", "h4096_s2048", {"hidden": 4096, "heads": 32, "seq": 2048, "di": 11008}),
]
"""(workload, label, dims): benchmark shapes (shapes that share kernels with another
entry or with the autotuning tests where possible: Triton compiles each source once)."""

REPORT: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _report(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    old = os.environ.get("FUSEOPT_CACHE_DIR")
    os.environ["FUSEOPT_CACHE_DIR"] = str(tmp_path_factory.mktemp("fuseopt-cache"))
    yield
    if old is None:
        os.environ.pop("FUSEOPT_CACHE_DIR", None)
    else:
        os.environ["FUSEOPT_CACHE_DIR"] = old
    header = [
        f"# Triton backend on {torch.cuda.get_device_name()} (torch {torch.__version__})",
        "",
        "| workload | shape | ok | compile s | fuseopt us | eager us | roofline us | % roofline | kernels |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    text = "\n".join(header + REPORT) + "\n"
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "triton_gpu_report.md").write_text(text)
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        with capture.global_and_fixture_disabled():
            print("\n" + text)


def _bench(fn, *args: torch.Tensor) -> float:  # noqa: ANN001
    from triton.testing import do_bench

    with torch.no_grad():
        return 1000.0 * float(do_bench(lambda: fn(*args), warmup=5, rep=25, return_mode="median"))


@pytest.mark.parametrize("name,label,dims", SHAPES, ids=[f"{n}-{lb}" for n, lb, _ in SHAPES])
def test_workload_on_gpu(name: str, label: str, dims: dict[str, int]) -> None:
    device = torch.device("cuda")
    start = time.perf_counter()
    checked = check_workload(name, dims, torch.bfloat16, device, strict=True)
    seconds = time.perf_counter() - start
    w = workload(name)
    model = w.make_model(dims, torch.bfloat16, device, 0)
    inputs = w.make_inputs(dims, torch.bfloat16, device, 7)
    ours, eager = _bench(checked.compiled, *inputs), _bench(model, *inputs)
    floor = w.min_bytes(dims, torch.bfloat16) / COPY_BANDWIDTH * 1e6
    pct = f"{100 * floor / ours:.0f}%" if w.flops(dims) == 0 else "-"
    REPORT.append(
        f"| {name} | {label} | {'yes' if checked.ok else 'NO'} | {seconds:.1f} | {ours:.1f} "
        f"| {eager:.1f} | {floor:.1f} | {pct} | {len(checked.compiled.kernels)} |"
    )
    assert checked.ok, checked.message
    assert all(
        k.source is not None or k.schedule == "library_gemm" for k in checked.compiled.kernels
    )


def _graph_function(compiled: object) -> object:
    """The CUDA-graph function of a one-region model: the whole graph's when it has
    one (two launches or more), else the region's."""
    wholes = list(compiled.record.whole_graphs.values())  # type: ignore[attr-defined]
    if wholes:
        (whole,) = wholes
        return whole
    (region,) = compiled.regions  # type: ignore[attr-defined]
    return region.compiled


@pytest.mark.parametrize(
    "name,dims,graphs",
    [
        ("mlp", {"m": 8, "d": 1024, "di": 4096}, True),  # decode-like: 2 kernels
        ("rmsnorm", {"batch": 1, "seq": 1, "hidden": 5120}, False),  # 1 kernel: no graph
    ],
    ids=["mlp-decode", "rmsnorm-decode"],
)
def test_reduce_overhead_replays_cuda_graphs_in_place(
    name: str, dims: dict[str, int], graphs: bool
) -> None:
    import fuseopt

    w = workload(name)
    device = torch.device("cuda")
    model = w.make_model(dims, torch.bfloat16, device, 0)
    (x,) = w.make_inputs(dims, torch.bfloat16, device, 1)
    with torch.no_grad():
        compiled = fuseopt.compile(
            model, (x,), backend="triton", mode="reduce-overhead", strict=True
        )
        held = []
        for seed in range(2, 7):
            x.copy_(w.make_inputs(dims, torch.bfloat16, device, seed)[0])  # same buffer, new data
            held.append((compiled(x), model(x)))
        for seed in range(7, 10):  # fresh input tensors: copied into static buffers
            (fresh,) = w.make_inputs(dims, torch.bfloat16, device, seed)
            held.append((compiled(fresh), model(fresh)))
        for got, want in held:  # earlier results were not overwritten by later replays
            torch.testing.assert_close(got, want, rtol=3e-2, atol=3e-2)
        fn = _graph_function(compiled)
        pools = list(getattr(fn, "graphs", {}).values())
        assert any(pools) == graphs
        # the fresh inputs replay a graph that copies them; the weights stay in place
        copies = [len(g.copied) for pool in pools for g in pool]
        assert (1 in copies and max(copies) == 1) == graphs, copies
        del held, got, want  # results still referenced would block the graphs' replays
        plain = fuseopt.compile(model, (x,), backend="triton", strict=True)
        graphed_us, plain_us = _bench(compiled, x), _bench(plain, x)
        eager_us = _bench(model, x)
    REPORT.append(
        f"| {name} reduce-overhead | decode {dims} | yes | - | {graphed_us:.1f} (plain {plain_us:.1f}) "
        f"| {eager_us:.1f} | - | - | {len(compiled.kernels)} |"
    )


@pytest.mark.parametrize(
    "name,dims",
    [
        ("rmsnorm", {"batch": 1, "seq": 2048, "hidden": 5120}),
        ("mlp", {"m": 2048, "d": 1024, "di": 4096}),
    ],
    ids=["rmsnorm-prefill", "mlp-medium"],
)
def test_max_autotune_times_candidates_and_caches_the_choice(
    name: str, dims: dict[str, int]
) -> None:
    device = torch.device("cuda")
    start = time.perf_counter()
    checked = check_workload(
        name, dims, torch.bfloat16, device, mode="max-autotune", calls=3, strict=True
    )
    cold = time.perf_counter() - start
    assert checked.ok, checked.message
    from fuseopt.backends.autotune import AutotunedFunction

    fn = _graph_function(checked.compiled)
    tuned = fn if isinstance(fn, AutotunedFunction) else fn.fn  # under CudaGraphFunction
    assert isinstance(tuned, AutotunedFunction) and tuned.choices, "no autotuning choice"
    start = time.perf_counter()
    again = check_workload(name, dims, torch.bfloat16, device, mode="max-autotune", strict=True)
    warm = time.perf_counter() - start
    assert again.ok, again.message
    w = workload(name)
    inputs = w.make_inputs(dims, torch.bfloat16, device, 7)
    model = w.make_model(dims, torch.bfloat16, device, 0)
    ours, eager = _bench(again.compiled, *inputs), _bench(model, *inputs)
    choice = "; ".join(
        f"{k}: {v['config']} {v['us']:.1f}us" for k, v in next(iter(tuned.choices.values())).items()
    )
    REPORT.append(
        f"| {name} max-autotune | {choice} | yes | {cold:.1f} cold, {warm:.1f} warm | {ours:.1f} "
        f"| {eager:.1f} | - | - | {len(again.compiled.kernels)} |"
    )
