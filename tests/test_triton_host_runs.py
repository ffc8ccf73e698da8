"""The Triton backend's host function in runs (backends/triton/host_runs.py), on the CPU.

The run form is bound against stand-ins: compiled kernels with the attributes Triton's
CompiledKernel has, the launch loop over a stand-in cuLaunchKernel (tests/
test_host_source.py's FakeDriver), and a module whose launchers record their calls (the
fallback a failed guard takes).
"""

from __future__ import annotations

import ast
import gc
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from xdsl.dialects import func

import fuseopt
from fuseopt.backends.launch_loop import (
    GUARD_FAILED,
    LaunchRun,
    RunLaunch,
    c_launch_loop,
    launch_run_in_python,
)
from fuseopt.backends.triton import host_runs
from fuseopt.backends.triton.host_runs import (
    RunFormUnavailable,
    bind_run_host,
    kernel_parameters,
    print_run_host,
)
from fuseopt.backends.triton.printer import print_triton
from fuseopt.pipelines import STANDARD, run_pipeline
from tests.test_dynamic_sizes import _row_kernel
from tests.test_host_source import THREE_KERNELS, FakeDriver

DYNAMIC = _row_kernel(100, 4, 128)
"""A kernel over buffers of dynamic size (tile IR): its grid and a size come with every
call."""


def _form(ir: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run form of `ir`'s @main (nn IR, lowered here, or tile IR) and its printed
    kernels by launcher name."""
    module = fuseopt.parse(ir)
    if "tile.kernel" not in ir:
        run_pipeline(module, STANDARD)
    printed = print_triton(module)
    main = next(op for op in module.ops if isinstance(op, func.FuncOp))
    form = print_run_host(main, {k.ir_name: k for k in printed.kernels})
    return form, {k.launcher: k for k in printed.kernels}


def _compiled(function: int, buffers: int, sizes: int = 0, **metadata: Any) -> SimpleNamespace:
    """A stand-in for a Triton CompiledKernel taking `buffers` pointers, `sizes` int32
    sizes and a block-size constant, with the scratch attributes of Triton 3.6."""
    names = [f"p{i}" for i in range(buffers)] + [f"n{i}" for i in range(sizes)] + ["BLOCK"]
    signature = {n: "*fp32" for n in names[:buffers]}
    signature |= {n: "i32" for n in names[buffers : buffers + sizes]}
    signature["BLOCK"] = "constexpr"
    fields = {
        "num_warps": 4,
        "shared": 1024,
        "num_ctas": 1,
        "global_scratch_size": 0,
        "profile_scratch_size": 0,
        "launch_cooperative_grid": False,
        "launch_pdl": False,
    } | metadata
    src = SimpleNamespace(signature=signature, fn=SimpleNamespace(arg_names=names), constants={})
    return SimpleNamespace(metadata=SimpleNamespace(**fields), src=src, function=function)


@pytest.fixture
def this_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed Triton counted as one whose kernel parameters are known."""
    import triton

    version = ".".join(triton.__version__.split(".")[:2])
    monkeypatch.setattr(host_runs, "KNOWN_TRITON", (version,))


class RecordingModule:
    """The printed module as the fallback sees it: each launcher records its call."""

    def __init__(self, launchers: list[str]):
        self.calls: list[tuple[str, list[int]]] = []
        for name in launchers:
            setattr(self, name, self._launcher(name))

    def _launcher(self, name: str):  # noqa: ANN202 - a launcher
        def launch(*args: Any, grid: tuple[int, ...] | None = None) -> None:
            values = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
            self.calls.append((name, values))

        return launch


def _bind(form: dict[str, Any], kernels: dict[str, Any], driver: FakeDriver, kind: str):  # noqa: ANN202
    """`form` bound with one stand-in compiled kernel per launcher (handles 100, 101,
    ...), through the C loop or its Python twin."""
    handles = {name: 100 + i for i, name in enumerate(kernels)}
    compiled = {
        name: _compiled(handles[name], len(k.args) or len(k.params) - len(k.sizes), len(k.sizes))
        for name, k in kernels.items()
    }
    for name, k in kernels.items():
        driver.counts[handles[name]] = len(k.params) + 2  # values, then two scratch nulls
    if kind == "c":
        loop = c_launch_loop()
        if loop is None:
            pytest.skip("no C compiler to build the launch loop")
        launcher = (loop, lambda run: run.address, driver.address)
    else:
        launcher = (launch_run_in_python(driver.function), lambda run: run, driver.address)
    module = RecordingModule(list(kernels))
    fn = bind_run_host(
        form,
        module,
        lambda name: (compiled[name], kernels[name].grid),
        launcher,
        lambda index: 0x5EED + index,
        2,
        str,
    )
    return fn, handles, module


def test_the_run_form_launches_through_runs_with_the_launchers_as_fallback() -> None:
    form, _ = _form(THREE_KERNELS)
    assert [len(run) for run in form["runs"]] == [1, 2]  # the GEMM splits the runs
    (fn,) = ast.parse(form["source"]).body
    calls = [ast.unparse(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)]
    assert calls.count("fuseopt_launch_run") == 2
    fallback = [c for c in calls if c.startswith("fuseopt_module.launch_")]
    assert len(fallback) == 3  # every launch, once, under its run's failed guard
    assert not [n for n in ast.walk(fn) if isinstance(n, ast.For | ast.While)]


@pytest.mark.usefixtures("this_triton")
@pytest.mark.parametrize("kind", ["c", "python"])
def test_a_bound_run_form_launches_each_kernel_with_its_arguments(kind: str) -> None:
    form, kernels = _form(THREE_KERNELS)
    driver = FakeDriver()
    fn, handles, module = _bind(form, kernels, driver, kind)
    gc.collect()  # the run arrays live as long as the function
    x, w, b = torch.randn(64, 256), torch.randn(256, 128), torch.randn(64, 128)
    (out,) = fn(x, w, b, device=torch.device("cpu"))
    assert module.calls == []
    assert [c[0] for c in driver.calls] == list(handles.values())
    assert {c[4] for c in driver.calls} == {0x5EED + 2}
    assert {c[2] for c in driver.calls} == {(128, 1, 1)}  # 4 warps
    assert {c[3] for c in driver.calls} == {1024}
    assert [c[1] for c in driver.calls] == [(*k.grid, 1, 1)[:3] for k in kernels.values()]
    assert driver.calls[0][5][0] == x.data_ptr()
    assert driver.calls[1][5][1] == b.data_ptr()
    assert driver.calls[2][5][1] == out.data_ptr()
    assert all(c[5][-2:] == [0, 0] for c in driver.calls)  # the scratch pointers are null


@pytest.mark.usefixtures("this_triton")
@pytest.mark.parametrize("kind", ["c", "python"])
def test_a_misaligned_input_sends_its_run_through_the_launchers(kind: str) -> None:
    form, kernels = _form(THREE_KERNELS)
    driver = FakeDriver()
    fn, handles, module = _bind(form, kernels, driver, kind)
    storage = torch.randn(64 * 256 + 1)
    x = storage[1:].view(64, 256)  # 4 bytes past an aligned address
    w, b = torch.randn(256, 128), torch.randn(64, 128)
    fn(x, w, b, device=torch.device("cpu"))
    first = next(iter(kernels))
    assert [c[0] for c in module.calls] == [first]  # the run reading x: launchers, once
    assert module.calls[0][1][0] == x.data_ptr()
    assert [c[0] for c in driver.calls] == list(handles.values())[1:]  # the other run: C


def test_temporaries_only_kernels_read_are_workspace_pointers() -> None:
    """Every temporary a kernel reads is passed as the workspace's pointer plus its
    offset; the one the two last kernels pass between them gets no tensor per call (the
    GEMM's operand and result do, made from the workspace)."""
    form, _ = _form(THREE_KERNELS)
    source = form["source"]
    (run1,) = [line.strip() for line in source.splitlines() if "fuseopt_run1_values[" in line]
    assert run1 == (
        "fuseopt_run1_values[0:5] = (workspace_pointer + 65536, in2.data_ptr(), "
        "workspace_pointer, workspace_pointer, out0.data_ptr(), )"
    )
    main_path = source.split("    if failed_1:")[0]  # the lines every call runs
    assert main_path.count("fuseopt_reinterpret(") == 2  # the GEMM's input and output


@pytest.mark.usefixtures("this_triton")
@pytest.mark.parametrize("kind", ["c", "python"])
def test_a_fallback_makes_the_temporaries_its_launchers_take(kind: str) -> None:
    """A failed guard in the run after the GEMM: its launchers get the temporary the
    run passes by pointer as a tensor, made in the fallback, the one the first kernel
    writes and the second reads, aligned."""
    form, kernels = _form(THREE_KERNELS)
    driver = FakeDriver()
    fn, handles, module = _bind(form, kernels, driver, kind)
    storage = torch.randn(64 * 128 + 1)
    b = storage[1:].view(64, 128)  # 4 bytes past an aligned address
    x, w = torch.randn(64, 256), torch.randn(256, 128)
    (out,) = fn(x, w, b, device=torch.device("cpu"))
    second, third = list(kernels)[1:]
    assert [c[0] for c in module.calls] == [second, third]
    (_, written), (_, read) = module.calls
    assert written[1] == b.data_ptr() and read[1] == out.data_ptr()
    assert written[2] == read[0] and written[2] % 16 == 0
    assert [c[0] for c in driver.calls] == [handles[list(kernels)[0]]]  # the first run: C


@pytest.mark.usefixtures("this_triton")
@pytest.mark.parametrize("kind", ["c", "python"])
def test_a_dynamic_kernel_takes_its_grid_and_sizes_per_call(kind: str) -> None:
    form, kernels = _form(DYNAMIC)
    assert all(step["grid"] == "dynamic" for run in form["runs"] for step in run)
    driver = FakeDriver()
    fn, _, module = _bind(form, kernels, driver, kind)
    for rows in (5, 1, 300):
        driver.calls.clear()
        fn(torch.randn(rows, 100), device=torch.device("cpu"))
        assert module.calls == []
        (launch,) = driver.calls
        assert launch[5][-3] == rows  # the size, after the pointers (then two nulls)
        assert launch[1] == (-(-rows // 4), 1, 1)  # 4 rows a program
    driver.calls.clear()
    fn(torch.randn(0, 100), device=torch.device("cpu"))
    assert driver.calls == []  # an empty grid launches nothing


@pytest.mark.usefixtures("this_triton")
def test_a_kernel_not_yet_compiled_leaves_the_form_unbound() -> None:
    form, kernels = _form(THREE_KERNELS)
    launcher = (launch_run_in_python(FakeDriver().function), lambda run: run, 0)
    args = (RecordingModule([]), lambda name: None, launcher, lambda i: 0, 0, str)
    assert bind_run_host(form, *args) is None


@pytest.mark.usefixtures("this_triton")
def test_kernel_parameters_take_pointers_sizes_and_scratch_nulls() -> None:
    assert kernel_parameters(_compiled(7, 2, 1), 2, 1) == (7, 128, 1024, 2)
    older = _compiled(7, 2)  # a Triton without profile scratch
    del older.metadata.profile_scratch_size
    assert kernel_parameters(older, 2, 0)[3] == 1
    constant = _compiled(7, 2, 1)  # a size Triton made a constant (equal to 1, say)
    constant.src.constants = {(2,): 1}
    with pytest.raises(RunFormUnavailable, match="not 2 pointers, 1 i32"):
        kernel_parameters(constant, 2, 1)


@pytest.mark.usefixtures("this_triton")
@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"num_ctas": 2}, "launch the run form does not make"),
        ({"launch_pdl": True}, "launch the run form does not make"),
        ({"global_scratch_size": 64}, "needs global_scratch"),
        ({"profile_scratch_size": 64}, "needs profile_scratch"),
        ({"instrumentation_mode": "gsan"}, "launch the run form does not make"),
    ],
)
def test_kernel_parameters_refuse_launches_they_do_not_know(
    change: dict[str, Any], why: str
) -> None:
    with pytest.raises(RunFormUnavailable, match=why):
        kernel_parameters(_compiled(7, 2, **change), 2, 0)
    with pytest.raises(RunFormUnavailable, match="not 3 pointers"):
        kernel_parameters(_compiled(7, 2), 3, 0)


def test_an_unknown_triton_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_runs, "KNOWN_TRITON", ("0.0",))
    with pytest.raises(RunFormUnavailable, match="are not known"):
        kernel_parameters(_compiled(7, 2), 2, 0)


@pytest.mark.parametrize("kind", ["c", "python"])
def test_a_failed_guard_launches_nothing(kind: str) -> None:
    driver = FakeDriver()
    driver.counts[11] = 2
    driver.counts[22] = 3
    run = LaunchRun(
        [RunLaunch(11, (1, 1, 1), 32, 0, 2), RunLaunch(22, (1, 1, 1), 32, 0, 2, 1)],
        driver.address,
        aligned=[0, 1, 2],
        small=[3],
    )
    if kind == "c":
        loop = c_launch_loop()
        if loop is None:
            pytest.skip("no C compiler to build the launch loop")
        issue = lambda: loop(run.address, 0)  # noqa: E731
    else:
        issue = lambda: launch_run_in_python(driver.function)(run, 0)  # noqa: E731
    run.values[0:4] = (4096, 8192, 16384, 2**31 - 1)
    assert issue() == 0
    assert [c[5] for c in driver.calls] == [[4096, 8192], [16384, 2**31 - 1, 0]]
    for bad in ((4100, 8192, 16384, 5), (4096, 8192, 16384, 2**31)):
        driver.calls.clear()
        run.values[0:4] = bad
        assert issue() == GUARD_FAILED
        assert driver.calls == []


# --------------------------------------------------------------------------- on a GPU

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _bound_forms(f: Any) -> list[Any]:
    """The host functions a TritonFunction bound in runs (not its launchers' function)."""
    plain = f.host(False)
    return [fn for fn in getattr(f._threads, "fast", {}).values() if fn is not plain]


@gpu
def test_on_the_gpu_the_second_call_runs_in_runs_and_matches() -> None:
    f = fuseopt.load_mlir(THREE_KERNELS, backend="triton")
    x = torch.randn(64, 256, device="cuda")
    w, b = torch.randn(256, 128, device="cuda"), torch.randn(64, 128, device="cuda")
    reference = torch.softmax(torch.softmax(torch.softmax(x, 1) @ w + b, 0), 1)
    for _ in range(3):
        (out,) = f(x, w, b)
        torch.testing.assert_close(out, reference, rtol=1e-4, atol=1e-5)
        assert len(_bound_forms(f)) == 1  # bound once the first call compiled every kernel
    storage = torch.randn(64 * 256 + 1, device="cuda")
    odd = storage[1:].view(64, 256)  # misaligned: its run goes through the launchers
    odd.copy_(x)
    (out,) = f(odd, w, b)
    torch.testing.assert_close(out, reference, rtol=1e-4, atol=1e-5)


@gpu
def test_on_the_gpu_a_dynamic_run_form_serves_every_size() -> None:
    f = fuseopt.load_mlir(DYNAMIC, backend="triton")
    for rows in (3, 3, 1, 0, 257, 4096):
        x = torch.randn(rows, 100, device="cuda")
        (y,) = f(x)
        torch.testing.assert_close(y, x.exp().sum(1), rtol=1e-5, atol=1e-5)
    assert len(_bound_forms(f)) == 1


@gpu
def test_on_the_gpu_reduce_overhead_records_beside_a_bound_run_form() -> None:
    """reduce-overhead's first call runs the function plainly (binding its run form);
    its graphs record the launchers' host function; both give the eager result."""
    f = fuseopt.load_mlir(THREE_KERNELS, backend="triton", mode="reduce-overhead")
    x = torch.randn(64, 256, device="cuda")
    w, b = torch.randn(256, 128, device="cuda"), torch.randn(64, 128, device="cuda")
    for _ in range(4):
        x.copy_(torch.randn_like(x))
        reference = torch.softmax(torch.softmax(torch.softmax(x, 1) @ w + b, 0), 1)
        (out,) = f(x, w, b)
        torch.testing.assert_close(out, reference, rtol=1e-4, atol=1e-5)


def test_inputs_on_two_devices_are_refused_before_any_launch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A CPU tensor among CUDA inputs would reach cuLaunchKernel as a host pointer: both
    the checked and the trusting paths refuse inputs whose device index differs from
    the first input's (here the weight says it is on GPU 0, the others on the CPU)."""
    f = fuseopt.load_mlir(THREE_KERNELS, backend="triton")
    x, w, b = torch.randn(64, 256), torch.randn(256, 128), torch.randn(64, 128)
    on_gpu = torch.randn(256, 128)
    real = torch.Tensor.get_device
    monkeypatch.setattr(torch.Tensor, "get_device", lambda t: 0 if t is on_gpu else real(t))
    with pytest.raises(fuseopt.CompileError, match="input 1 is on .*, input 0 on cpu"):
        f(x, on_gpu, b)
    trusting = f.trusting([True, False, False])
    with pytest.raises(fuseopt.CompileError, match="a compiled function runs on one device"):
        trusting(x, on_gpu, b)
    (out,) = trusting(x, w, b)
    assert out.shape == (64, 128)


@gpu
def test_on_the_gpu_a_cpu_input_among_cuda_ones_is_refused() -> None:
    f = fuseopt.load_mlir(THREE_KERNELS, backend="triton")
    x, b = torch.randn(64, 256, device="cuda"), torch.randn(64, 128, device="cuda")
    with pytest.raises(fuseopt.CompileError, match="input 1 is on cpu, input 0 on cuda"):
        f(x, torch.randn(256, 128), b)
