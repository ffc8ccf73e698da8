"""The Triton direct launch path (`launchers.direct_runner`) without a GPU.

Triton 3.6 and later always install launch hooks as (empty) `HookChain`s, so an empty
chain must not send every launch through the slow standard runner, while a hook that a
profiler adds later must, and so must a bare callable (older Triton); a misaligned
pointer launches nothing (the caller takes the JIT). Checked with a stand-in
CompiledKernel, buffers and stream getter.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from triton import knobs

from fuseopt.backends.triton import launchers


class FakeCompiled:
    """The attributes of a Triton CompiledKernel that direct_runner reads."""

    def __init__(self) -> None:
        self.function = 7
        self.packed_metadata = ("meta",)
        self.direct: list[tuple[Any, ...]] = []
        self.standard: list[tuple[Any, ...]] = []

    def run(self, *args: Any) -> None:
        self.direct.append(args)

    def __getitem__(self, grid: tuple[int, int, int]):  # noqa: ANN204
        def runner(*args: Any) -> None:
            self.standard.append((grid, *args))

        return runner


class Buffer:
    """A stand-in tensor: a data pointer on a device."""

    def __init__(self, name: str, pointer: int = 4096, device: int = 0) -> None:
        self.name, self.pointer, self.device = name, pointer, device

    def data_ptr(self) -> int:
        return self.pointer

    def get_device(self) -> int:
        return self.device

    def __repr__(self) -> str:
        return self.name


@pytest.fixture
def fake_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        torch._C, "_cuda_getCurrentRawStream", lambda device: 1000 + device, raising=False
    )


def test_empty_hook_chains_take_the_direct_path(fake_stream: None) -> None:
    k = FakeCompiled()
    launch = launchers.direct_runner(k, (4, 2))
    a, b = Buffer("a"), Buffer("b")
    assert launch(a, b)
    assert k.standard == []
    assert k.direct == [(4, 2, 1, 1000, 7, ("meta",), None, None, None, a, b)]


def test_the_stream_is_the_kernels_device_s(fake_stream: None) -> None:
    k = FakeCompiled()
    assert launchers.direct_runner(k, (1,), device=3)(Buffer("x", device=3))
    assert k.direct[0][3] == 1003


def test_a_misaligned_pointer_launches_nothing(fake_stream: None) -> None:
    k = FakeCompiled()
    launch = launchers.direct_runner(k, (1,))
    assert not launch(Buffer("a"), Buffer("b", pointer=4100))
    assert k.direct == [] and k.standard == []


@pytest.mark.parametrize("hook", ["chain", "callable"])
def test_an_installed_hook_takes_the_standard_runner(
    fake_stream: None, monkeypatch: pytest.MonkeyPatch, hook: str
) -> None:
    k = FakeCompiled()
    launch = launchers.direct_runner(k, (3,))
    if hook == "chain":
        chain = knobs.HookChain()
        monkeypatch.setattr(knobs.runtime, "launch_exit_hook", chain)
        chain.add(lambda *args: None)  # a profiler attaches after the runner was made
    else:
        monkeypatch.setattr(knobs.runtime, "launch_enter_hook", print)
    x = Buffer("x")
    assert launch(x)
    assert k.direct == [] and k.standard == [((3, 1, 1), x)]


class CudaLauncher:
    """Stands in for Triton 3.6's launcher object: `launch` is its C function."""

    def __init__(self, scratch: int = 0) -> None:
        self.global_scratch_size, self.profile_scratch_size = scratch, 0
        self.launch_cooperative_grid, self.launch_pdl = False, True
        self.calls: list[tuple[Any, ...]] = []
        self.wrapped: list[tuple[Any, ...]] = []

    def launch(self, *args: Any) -> None:
        self.calls.append(args)

    def __call__(self, *args: Any) -> None:
        self.wrapped.append(args)


@pytest.mark.parametrize(("version", "scratch", "direct"), [("3.6.0", 0, True), ("3.6.0", 64, False), ("3.7.0", 0, False)])  # fmt: skip
def test_the_c_launcher_is_called_only_where_its_layout_is_known(
    fake_stream: None, monkeypatch: pytest.MonkeyPatch, version: str, scratch: int, direct: bool
) -> None:
    import triton

    monkeypatch.setattr(triton, "__version__", version)
    k = FakeCompiled()
    k.run = CudaLauncher(scratch)  # type: ignore[method-assign]
    a = Buffer("a")
    assert launchers.direct_runner(k, (2,))(a)
    if direct:
        assert (
            k.run.calls
            == [(2, 1, 1, 1000, 7, False, True, None, None, ("meta",), None, None, None, a)]
            and k.run.wrapped == []
        )
    else:
        assert k.run.calls == [] and k.run.wrapped == [
            (2, 1, 1, 1000, 7, ("meta",), None, None, None, a)
        ]


def test_a_runner_launches_only_on_its_own_device(fake_stream: None) -> None:
    """A CompiledKernel's function handle belongs to the GPU it was loaded on: buffers
    on another device launch nothing (the FastLauncher then finds or builds that
    device's runner)."""
    k = FakeCompiled()
    launch = launchers.direct_runner(k, (1,), device=1)
    assert not launch(Buffer("a", device=0))
    assert launch(Buffer("b", device=1))
    assert [call[3] for call in k.direct] == [1001]  # device 1's stream


def test_fast_launcher_keeps_a_runner_per_device(fake_stream: None) -> None:
    class Jit:
        def __init__(self) -> None:
            self.compiled: list[FakeCompiled] = []

        def __getitem__(self, grid: tuple[int, ...]):  # noqa: ANN204
            def run(*args: Any, **options: Any) -> FakeCompiled:
                self.compiled.append(FakeCompiled())
                return self.compiled[-1]

            return run

    jit = Jit()
    launcher = launchers.FastLauncher(jit, (2,), num_warps=4, num_stages=1)
    a0, a1 = Buffer("a0", device=0), Buffer("a1", device=1)
    launcher(a0)  # JIT on device 0
    launcher(a1)  # device 0's runner declines; JIT on device 1
    launcher(a0)
    launcher(a1)
    assert len(jit.compiled) == 2  # once per device, then direct launches
    assert [c[3] for c in jit.compiled[0].direct] == [1000]
    assert [c[3] for c in jit.compiled[1].direct] == [1001]
