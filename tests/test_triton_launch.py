"""The Triton direct launch path (`runtime.direct_runner`) without a GPU.

Triton 3.6 and later always install launch hooks as (empty) `HookChain`s, so an empty
chain must not send every launch through the slow standard runner, while a hook that a
profiler adds later must. Checked with a stand-in CompiledKernel and stream getter.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from triton import knobs

from fuseopt.backends.triton import runtime


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


@pytest.fixture
def fake_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        torch._C, "_cuda_getCurrentRawStream", lambda device: 1000 + device, raising=False
    )


def test_empty_hook_chains_take_the_direct_path(fake_stream: None) -> None:
    k = FakeCompiled()
    launch = runtime.direct_runner(k, (4, 2))
    launch(0, "a", "b")
    assert k.standard == []
    assert k.direct == [(4, 2, 1, 1000, 7, ("meta",), None, None, None, "a", "b")]


def test_an_installed_hook_takes_the_standard_runner(
    fake_stream: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    k = FakeCompiled()
    launch = runtime.direct_runner(k, (3,))
    chain = knobs.HookChain()
    monkeypatch.setattr(knobs.runtime, "launch_enter_hook", chain)
    chain.add(lambda *args: None)  # a profiler attaches after the runner was made
    launch(1, "x")
    assert k.direct == [] and k.standard == [((3, 1, 1), "x")]


def test_hooks_active() -> None:
    chain = knobs.HookChain()
    assert not runtime._hooks_active(None) and not runtime._hooks_active(chain)
    chain.add(print)
    assert runtime._hooks_active(chain)
    assert runtime._hooks_active(print)  # a bare callable (older Triton)
