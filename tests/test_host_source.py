"""Printed host functions (backends/host_source.py) and the CUDA backend's launch loop
(backends/launch_loop.py), on the CPU.

The host function of a region is printed once, at compile time, for both backends: its
calls are launches, allocations, views and library calls, with no loop over steps. The
CUDA backend issues the launches between two library calls with one call of a C loop
over cuLaunchKernel, checked here against a stand-in for cuLaunchKernel.
"""

from __future__ import annotations

import ast
import ctypes
import gc
import logging
import re

import pytest
import torch

import fuseopt
from fuseopt.backends.cuda.backend import CudaBackend
from fuseopt.backends.launch_loop import (
    LaunchRun,
    RunLaunch,
    c_launch_loop,
    launch_failed,
    launch_run_in_python,
)
from fuseopt.backends.triton.printer import print_triton
from fuseopt.pipelines import STANDARD, run_pipeline

THREE_KERNELS = """
func.func @main(%x: tensor<64x256xf32>, %w: tensor<256x128xf32>, %b: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %a = nn.softmax %x axis 1 : tensor<64x256xf32>
  %m = nn.matmul %a, %w : tensor<64x256xf32>, tensor<256x128xf32> -> tensor<64x128xf32>
  %t = nn.add %m, %b : tensor<64x128xf32>
  %s = nn.softmax %t axis 0 : tensor<64x128xf32>
  %u = nn.softmax %s axis 1 : tensor<64x128xf32>
  func.return %u : tensor<64x128xf32>
}
"""
"""Three kernels and a library GEMM between the first and the second."""

ALLOWED_CALLS = {
    "triton": re.compile(r"launch_\w+|empty|fuseopt_reinterpret|torch\.mm|\w+\.view"),
    "cuda": re.compile(
        r"empty|fuseopt_reinterpret|torch\.mm|\w+\.view|\w+\.data_ptr|fuseopt_launch_run"
        r"|fuseopt_stream|fuseopt_launch_failed"
    ),
}
"""What a host function may call: launchers (or the launch loop), allocations, views,
library GEMMs."""


def _host_source(backend: str) -> str:
    """The printed host function of THREE_KERNELS on `backend`."""
    if backend == "cuda":
        return CudaBackend().compile(fuseopt.parse(THREE_KERNELS), "main", {}).host_code.source
    module = fuseopt.parse(THREE_KERNELS)
    run_pipeline(module, STANDARD)
    return print_triton(module).host_sources[0]


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_the_host_function_calls_only_launches_allocations_and_libraries(backend: str) -> None:
    tree = ast.parse(_host_source(backend))
    (fn,) = tree.body
    assert isinstance(fn, ast.FunctionDef)
    calls = [ast.unparse(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)]
    assert calls, "no calls at all"
    assert [c for c in calls if not ALLOWED_CALLS[backend].fullmatch(c)] == []
    loops = (ast.For, ast.While, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.Dict)
    assert not [n for n in ast.walk(fn) if isinstance(n, loops)]
    assert sum(c == "torch.mm" for c in calls) == 1
    if backend == "triton":
        assert sum(c.startswith("launch_") for c in calls) == 3
    else:  # one run before the GEMM, one after it
        assert calls.count("fuseopt_launch_run") == 2


def test_cuda_launches_between_library_calls_are_one_run() -> None:
    host = CudaBackend().compile(fuseopt.parse(THREE_KERNELS), "main", {}).host_code
    assert [len(run) for run in host.runs] == [1, 2]
    assert host.info.launches[1] == "library_gemm"
    assert [p.values for p in host.launches] == [2, 3, 2]  # pointers only: static sizes


# --------------------------------------------------------------------------- the loop

_LAUNCH = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    *[ctypes.c_uint] * 7,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
)


class FakeDriver:
    """A stand-in for cuLaunchKernel: records each launch with the argument values it
    reads through `kernelParams`; fails the launch of `failing` with CUresult 700."""

    def __init__(self, failing: int | None = None):
        self.calls: list[tuple] = []
        self.failing = failing
        self.counts: dict[int, int] = {}
        self.function = _LAUNCH(self._launch)
        self.address = ctypes.cast(self.function, ctypes.c_void_p).value or 0

    def _launch(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra) -> int:  # noqa: ANN001
        pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        n = self.counts[f]
        values = [ctypes.c_void_p.from_address(pointers[i]).value or 0 for i in range(n)]
        self.calls.append((f, (gx, gy, gz), (bx, by, bz), smem, stream, values, extra))
        return 700 if f == self.failing else 0


def _run(driver: FakeDriver) -> LaunchRun:
    launches = [
        RunLaunch(11, (4, 1, 1), 128, 0, 2),
        RunLaunch(22, (0, 1, 1), 256, 1024, 3),  # grid set per call
        RunLaunch(33, (2, 3, 1), 64, 49152, 1),
    ]
    for x in launches:
        driver.counts[x.function] = x.values
    run = LaunchRun(launches, driver.address)
    run.values[0:6] = (1000, 2000, 3000, 4000, 77, 5000)
    return run


LOOPS = ["c", "python"]
"""The C launch loop (skipped without a C compiler) and its Python twin."""


def _c_loop():  # noqa: ANN202 - the ctypes function
    loop = c_launch_loop()
    if loop is None:
        pytest.skip("no C compiler to build the launch loop")
    return loop


def _issue(kind: str, run: LaunchRun, driver: FakeDriver, stream: int) -> int:
    if kind == "c":
        return _c_loop()(run.address, stream)
    return launch_run_in_python(driver.function)(run, stream)


@pytest.mark.parametrize("kind", LOOPS)
def test_a_run_launches_each_kernel_with_its_values(kind: str) -> None:
    driver = FakeDriver()
    run = _run(driver)
    run.geometry[5:8] = (7, 1, 1)
    assert _issue(kind, run, driver, 0xABC) == 0
    assert [c[:6] for c in driver.calls] == [
        (11, (4, 1, 1), (128, 1, 1), 0, 0xABC, [1000, 2000]),
        (22, (7, 1, 1), (256, 1, 1), 1024, 0xABC, [3000, 4000, 77]),
        (33, (2, 3, 1), (64, 1, 1), 49152, 0xABC, [5000]),
    ]
    assert all(c[6] is None for c in driver.calls)


@pytest.mark.parametrize("kind", LOOPS)
def test_an_empty_grid_launches_nothing(kind: str) -> None:
    driver = FakeDriver()
    run = _run(driver)  # launch 22's grid left at 0: a dynamic size of 0
    assert _issue(kind, run, driver, 0) == 0
    assert [c[0] for c in driver.calls] == [11, 33]


@pytest.mark.parametrize("kind", LOOPS)
def test_a_failed_launch_stops_the_run_and_is_named(kind: str) -> None:
    driver = FakeDriver(failing=22)
    run = _run(driver)
    run.geometry[5:8] = (1, 1, 1)
    code = _issue(kind, run, driver, 0)
    assert code == 1000 * 1 + 700
    assert [c[0] for c in driver.calls] == [11, 22]  # 33 not launched
    error = launch_failed(code, ["k_a", "k_b", "k_c"], lambda r: f"CUresult {r}")
    assert "cuLaunchKernel of k_b failed: CUresult 700" in str(error)


def test_the_run_arrays_read_back_as_stored() -> None:
    driver = FakeDriver()
    run = _run(driver)
    run.values[2] = 0  # a null pointer reads back as 0
    assert run.arguments(1) == [0, 4000, 77]
    assert run.grid(2) == (2, 3, 1)


def test_the_bound_host_function_launches_through_the_c_loop() -> None:
    """The printed host function bound as the GPU binds it (the C loop, run addresses),
    against a stand-in driver: after a garbage collection (the run arrays live as long
    as the function), each launch gets its kernel's handle, the stream and the data
    pointers of the buffers the call made."""
    loop = _c_loop()
    host = CudaBackend().compile(fuseopt.parse(THREE_KERNELS), "main", {}).host_code
    driver = FakeDriver()
    handles = {k.kernel.c_name: 100 + i for i, k in enumerate(host.launches)}
    for p in host.launches:
        driver.counts[handles[p.kernel.c_name]] = p.values
    fn = host.bind(
        lambda k: (handles[k.c_name], 0),
        loop,
        lambda run: run.address,
        driver.address,
        lambda index: 0x5EED + index,
        3,
        str,
    )
    gc.collect()
    x, w, b = torch.randn(64, 256), torch.randn(256, 128), torch.randn(64, 128)
    (out,) = fn(x, w, b, device=torch.device("cpu"))
    assert [c[0] for c in driver.calls] == [100, 101, 102]
    assert {c[4] for c in driver.calls} == {0x5EED + 3}
    assert driver.calls[0][5][0] == x.data_ptr()  # the first kernel reads the input
    assert driver.calls[1][5][1] == b.data_ptr()  # the second the bias
    assert driver.calls[2][5][1] == out.data_ptr()  # the last writes the output
    assert [c[1] for c in driver.calls] == [(*p.grid, 1, 1)[:3] for p in host.launches]


def test_a_launch_loop_that_does_not_load_falls_back_to_python(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A cached build that cannot be loaded (a noexec temporary directory, a binary of
    another machine) is logged, and launches go through Python."""
    _c_loop()

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("file too short")

    c_launch_loop.cache_clear()
    monkeypatch.setattr(ctypes, "CDLL", refuse)
    try:
        with caplog.at_level(logging.INFO, logger="fuseopt"):
            assert c_launch_loop() is None
        assert "did not load (file too short)" in caplog.text
    finally:
        c_launch_loop.cache_clear()
