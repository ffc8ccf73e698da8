"""A function of dynamic size (`?`) compiled once per size, for the backends that run
static sizes only (the reference interpreter, the CUDA backend; the Triton backend
compiles it once for every size: passes/generalize_sizes.py).

The function is a `SizedFunction` (a module of `?` types, every `?` one size, or a region
the FX frontend traced with a symbolic size): a call reads the size from its inputs'
dynamic dims, checks they agree, and runs the function compiled at that size (compiled
at its first use, then kept).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
from xdsl.dialects.builtin import ModuleOp

from fuseopt.backends.contract import CompiledFunction, KernelRecord
from fuseopt.diagnostics import parse_module
from fuseopt.passes.generalize_sizes import SizedFunction
from fuseopt.registry import make_context

log = logging.getLogger("fuseopt")


def parse_specialized(text: str) -> ModuleOp:
    """Parse nn text specialized at a size (`SizedFunction.from_module`'s `parse`)."""
    return parse_module(make_context(), text, "<per-size>")


class SizeLimitReached(Exception):
    """A call brings a new size to a PerSizeFunction that has compiled its `limit`."""


class PerSizeFunction:
    """`compile(module at size n)` for each size n a call brings (see the module
    docstring). `kernels` are those of the last size compiled. With `limit` set, a call
    of a new size past `limit` compiled ones raises SizeLimitReached (the FX frontend
    runs the region in PyTorch then: a decode step's growing size would compile per
    token)."""

    limit: int | None = None

    def __init__(
        self,
        sized: SizedFunction,
        compile: Callable[[ModuleOp], CompiledFunction],
        backend: str,
    ):
        self.sized, self.compile, self.backend = sized, compile, backend
        self.compiled: dict[int, CompiledFunction] = {}
        self.kernels: Sequence[KernelRecord] = []

    def __call__(self, *inputs: torch.Tensor) -> Sequence[torch.Tensor]:
        """Run at the inputs' size (compiling at it the first time)."""
        n = self.sized.size_of(inputs)
        fn = self.compiled.get(n)
        if fn is None:
            if self.limit is not None and len(self.compiled) >= self.limit:
                raise SizeLimitReached(n)
            log.info("fuseopt: the %s backend compiles dynamic sizes per size: %d", self.backend, n)
            fn = self.compile(self.sized.at(n))
            self.compiled[n] = fn
            self.kernels = fn.kernels
        return fn(*inputs)

    def __getattr__(self, name: str) -> Any:
        """The last compiled size's attributes (`fused_module`, `source`, ...)."""
        if not self.compiled:
            raise AttributeError(f"{name}: nothing is compiled before the first call")
        return getattr(next(reversed(self.compiled.values())), name)
