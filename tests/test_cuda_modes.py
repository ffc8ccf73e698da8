"""The CUDA backend's modes (issue 16 item 5): options checked, max-autotune tunes tile
sizes and warps per kernel through the shared autotuner, reduce-overhead and max-autotune
replay CUDA graphs of multi-kernel functions.

On the CPU the tuner runs with a cost model for a timer (which variant wins is then
known) and, where g++ exists, with the kernels in the CPU emulation (the tuned function
must compute what the reference interpreter computes). The GPU test times for real.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from xdsl.dialects import func

import fuseopt
from fuseopt.backends.cuda.autotune import (
    TUNED_WARPS,
    CudaAutotunedFunction,
    kernel_launches,
    with_warps,
)
from fuseopt.backends.cuda.backend import CudaBackend, CudaFunction
from fuseopt.backends.cuda.emulation import EmulatedFunction, EmulatedKernel, emulator_available
from fuseopt.backends.cuda.printer import CudaKernel, print_cuda
from fuseopt.backends.cuda.runtime import CudaUnavailableError
from fuseopt.backends.cuda_graphs import CudaGraphFunction
from fuseopt.backends.targets import CUDA
from fuseopt.diagnostics import ConfigurationError
from fuseopt.dialects.dtypes import torch_dtype

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_nn_fuse_workloads import mlp, random_args, softmax  # noqa: E402

ROWS = """
func.func @main(%x: tensor<64x256xf32>) -> tensor<64x1xf32> {
  %m = nn.mean %x [1] keepdim : tensor<64x256xf32> -> tensor<64x1xf32>
  %e = nn.exp %m : tensor<64x1xf32>
  func.return %e : tensor<64x1xf32>
}
"""

TWO_KERNELS = """
func.func @main(%x: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %m = nn.softmax %x axis 1 : tensor<64x256xf32>
  %t = nn.transpose %m [1, 0] : tensor<64x256xf32> -> tensor<256x64xf32>
  %s = nn.softmax %t axis 1 : tensor<256x64xf32>
  %b = nn.transpose %s [1, 0] : tensor<256x64xf32> -> tensor<64x256xf32>
  func.return %b : tensor<64x256xf32>
}
"""

CPU = torch.device("cpu")


def autotuned(text: str, **options: object) -> CudaAutotunedFunction:
    """`text`'s @main compiled by the CUDA backend with mode="max-autotune-no-cudagraphs"."""
    fn = CudaBackend().compile(
        fuseopt.parse(text), "main", {"mode": "max-autotune-no-cudagraphs", **options}
    )
    assert isinstance(fn, CudaAutotunedFunction)
    return fn


class CostModel:
    """A loader and timer pair: 'loading' a kernel remembers it, and the timer prices
    the last launch with `cost(kernel, grid, threads)` (the launch itself is not run)."""

    def __init__(self, cost):  # noqa: ANN001 - a (CudaKernel, grid, threads) -> float
        self.cost, self.last = cost, None
        self.seen: list[tuple[CudaKernel, tuple[int, ...], int]] = []

    def loader(self, k: CudaKernel, device: torch.device) -> CostModel:
        """Stands in for the loaded kernel."""
        return self

    def launch(self, grid: tuple[int, ...], threads: int, args: list[torch.Tensor]) -> None:
        """Remember the launch."""
        self.last = (self.current, grid, threads)

    def timer(self, launch) -> float:  # noqa: ANN001
        """Price the launch `launch` makes."""
        launch()
        assert self.last is not None
        self.seen.append(self.last)
        return self.cost(*self.last)


def tune_with(fn: CudaAutotunedFunction, cost) -> CudaFunction:  # noqa: ANN001
    """Tune `fn` on the CPU with cost model `cost` instead of GPU timings."""
    model = CostModel(cost)

    def loader(k: CudaKernel, device: torch.device) -> CostModel:
        model.current = k
        return model

    fn.loader, fn.timer = loader, model.timer
    return fn.tune(CPU, "cost model")


def test_unknown_options_are_rejected_on_a_cpu_machine() -> None:
    model, x = torch.nn.Linear(8, 8), torch.randn(2, 8)
    with pytest.raises(ConfigurationError, match="no option.*'not_an_option'.*block_rows"):
        fuseopt.compile(model, (x,), backend="cuda", not_an_option=1)(x)
    with pytest.raises(ConfigurationError, match="no option.*'num_warps'"):
        CudaBackend().compile(fuseopt.parse(ROWS), "main", {"num_warps": 4})


@pytest.mark.parametrize(
    ("mode", "graphs"),
    [("max-autotune", True), ("max-autotune-no-cudagraphs", False), ("reduce-overhead", True)],
)
def test_modes_build_their_wrappers(mode: str, graphs: bool) -> None:
    fn = CudaBackend().compile(fuseopt.parse(TWO_KERNELS), "main", {"mode": mode})
    assert isinstance(fn, CudaGraphFunction) == graphs
    inner = fn.fn if isinstance(fn, CudaGraphFunction) else fn
    assert isinstance(inner, CudaAutotunedFunction) == mode.startswith("max-autotune")
    assert len(fn.kernels) >= 2  # records forwarded through the wrappers
    if not torch.cuda.is_available():
        with pytest.raises(CudaUnavailableError):
            fn(torch.randn(64, 256))


def test_autotune_picks_the_cheapest_tile_sizes_and_warps() -> None:
    fn = autotuned(ROWS)
    (name,) = kernel_launches(fn.module, "main", fn.cuda_kernels)
    heuristic = kernel_launches(fn.module, "main", fn.cuda_kernels)[name].kernel

    def cost(k: CudaKernel, grid: tuple[int, ...], threads: int) -> float:
        # 16 programs (block-rows=4; the heuristic takes 8 rows), then 256 threads
        return abs(grid[0] - 16) * 1000 + abs(threads - 256)

    tuned = tune_with(fn, cost)
    choice = fn.choices["cost model"][name]
    assert choice["config"] == "block-rows=4 warps=8", choice
    assert {"heuristic", "block-rows=1", "block-rows=2"} <= set(choice["timings"])
    assert "block-rows=8" not in choice["timings"]  # the heuristic's own kernel: timed once
    (k,) = tuned.cuda_kernels
    assert (k.grid, k.threads) == ((16,), 256)
    assert k.source != heuristic.source
    steps = tuned.host_code.launches
    assert [s.grid for s in steps] == [(16,)]  # the tuned kernel's own launch grid
    assert fn.kernels[0].launch.startswith("grid (16), block (256)")


def test_autotune_keeps_the_heuristic_when_it_is_fastest() -> None:
    fn = autotuned(ROWS)
    base = {k.c_name: k.source for k in fn.cuda_kernels}
    tuned = tune_with(fn, lambda k, grid, threads: 0.0 if k.source in base.values() else 1.0)
    assert {k.c_name: k.source for k in tuned.cuda_kernels} == base


def test_autotune_tries_every_candidate_and_warp_count_of_a_matmul() -> None:
    fn = autotuned(mlp(64, 64, 128))
    launches = kernel_launches(fn.module, "main", fn.cuda_kernels)
    tune_with(fn, lambda k, grid, threads: 1.0)
    for name in launches:
        timings = fn.choices["cost model"][name]["timings"]
        assert "heuristic" in timings
        tiled = [t for t in timings if "block-m=" in t and "warps" not in t]
        assert not tiled or len(tiled) >= 4, timings  # a matmul: its candidates
    tried = {t for c in fn.choices["cost model"].values() for t in c["timings"]}
    assert any("block-m=" in t for t in tried), tried
    assert any(f"warps={w}" in t for t in tried for w in TUNED_WARPS), tried


@pytest.mark.skipif(not emulator_available(), reason="g++ is not installed")
def test_tuned_kernels_compute_the_same_results_in_the_emulation(tmp_path: Path) -> None:
    """Tuned to non-default tile sizes and warps, the function still computes what
    the reference interpreter does (kernels run in the CPU emulation)."""
    for text, prefer in ((ROWS, 8), (mlp(50, 72, 100), 2)):
        fn = autotuned(text)
        base = {k.c_name: (k.source, k.threads) for k in fn.cuda_kernels}

        def cost(
            k: CudaKernel, grid: tuple[int, ...], threads: int, prefer=prefer, base=base
        ) -> float:
            # anything but the heuristic, fewer threads preferred
            return (k.source == base[k.c_name][0]) * 1e6 + abs(threads - 32 * prefer)

        tuned = tune_with(fn, cost)
        changed = [k for k in tuned.cuda_kernels if k.source != base[k.c_name][0]]
        assert changed, "the cost model should move at least one kernel off its heuristic"
        module = fuseopt.parse(text)
        args = random_args(module)
        ref = fuseopt.interpret(module, "main", *args)
        f = next(o for o in module.ops if isinstance(o, func.FuncOp))
        inputs = [
            torch.from_numpy(a).to(torch_dtype(t.element_type))
            for a, t in zip(args, f.function_type.inputs.data, strict=True)
        ]
        got = EmulatedFunction(tuned, tmp_path)(*inputs)
        for r, g in zip(ref, got, strict=True):
            r = np.asarray(r, dtype=np.float32)
            scale = max(float(np.abs(r).max()), 1e-6)
            assert float(np.abs(g.float().numpy().reshape(r.shape) - r).max()) / scale < 2e-2


def test_a_variant_that_fails_to_launch_is_not_chosen(tmp_path: Path) -> None:
    fn = autotuned(ROWS)
    base = {k.c_name: k.source for k in fn.cuda_kernels}

    def loader(k: CudaKernel, device: torch.device) -> EmulatedKernel:
        if k.source not in base.values():
            raise RuntimeError("no such variant on this device")
        return CostModelStub()

    class CostModelStub:
        def launch(self, grid, threads, args) -> None:  # noqa: ANN001
            """Nothing to run."""

    fn.loader, fn.timer = loader, lambda launch: 5.0
    tuned = fn.tune(CPU, "failing")
    assert {k.c_name: k.source for k in tuned.cuda_kernels} == base
    timings = next(iter(fn.choices["failing"].values()))["timings"]
    assert timings["heuristic"] == 5.0
    assert len(timings) > 1
    assert all(us == float("inf") for label, us in timings.items() if label != "heuristic")


def test_forced_sizes_reach_the_tuner_lowering() -> None:
    fn = autotuned(ROWS, block_rows=2)
    assert fn.lowering == CUDA.lowering({"block_rows": 2})
    assert [x.grid for x in fn.host_code.launches] == [(32,)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_max_autotune_on_the_gpu_times_variants_and_matches_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.LayerNorm(512)
    ).cuda()
    x = torch.randn(128, 256, device="cuda")
    for mode in ("max-autotune", "max-autotune-no-cudagraphs"):
        compiled = fuseopt.compile(model, (x,), backend="cuda", mode=mode, strict=True)
        with torch.no_grad():
            want = model(x)
            for _ in range(3):  # tune, then (max-autotune) record and replay graphs
                got = compiled(x)
        torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
    fn = CudaBackend().compile(fuseopt.parse(ROWS), "main", {"mode": "max-autotune-no-cudagraphs"})
    x = torch.randn(64, 256, device="cuda")
    (y,) = fn(x)
    torch.testing.assert_close(y, x.mean(1, keepdim=True).exp(), rtol=1e-4, atol=1e-5)
    (choice,) = fn.choices.values()
    (timings,) = [c["timings"] for c in choice.values()]
    assert len(timings) >= 5 and all(us > 0 for us in timings.values()), timings
    assert any("warps=" in label for label in timings), timings


@pytest.mark.skipif(not emulator_available(), reason="g++ is not installed")
@pytest.mark.parametrize("workload", ["softmax", "mlp"])
def test_every_tuned_warp_count_computes_the_same_results(workload: str, tmp_path: Path) -> None:
    """Warps set on tile IR after tile-promote (the tuner's step 3) print kernels that
    compute what the reference does, at every count the tuner tries."""
    text = softmax(5, 1000) if workload == "softmax" else mlp(50, 72, 100)
    module = fuseopt.parse(text)
    args = random_args(module)
    ref = [np.asarray(r, dtype=np.float32) for r in fuseopt.interpret(module, "main", *args)]
    f = next(o for o in module.ops if isinstance(o, func.FuncOp))
    inputs = [
        torch.from_numpy(a).to(torch_dtype(t.element_type))
        for a, t in zip(args, f.function_type.inputs.data, strict=True)
    ]
    fn = CudaBackend().compile(fuseopt.parse(text), "main", {})
    assert isinstance(fn, CudaFunction)
    names = [k.ir_name for k in fn.cuda_kernels]
    for warps in TUNED_WARPS:
        variant = with_warps(fn.module, names, warps)
        got = EmulatedFunction(CudaFunction(variant, "main", print_cuda(variant)), tmp_path)
        for r, g in zip(ref, got(*inputs), strict=True):
            scale = max(float(np.abs(r).max()), 1e-6)
            error = float(np.abs(g.float().numpy().reshape(r.shape) - r).max()) / scale
            assert error < 2e-2, (warps, error)
