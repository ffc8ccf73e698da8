"""A function of dynamic size (`?`) compiled once per size, for the backends that run
static sizes only (the reference interpreter, the CUDA backend; the Triton backend
compiles it once for every size: passes/generalize_sizes.py).

Every `?` of a function is one size (the rule of passes/generalize_sizes.py): a call
reads it from the first input with a `?` dim, checks the other `?` dims agree, and runs
the function compiled at that size (compiled at its first use, then kept).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType

from fuseopt.backends.contract import CompiledFunction, KernelRecord
from fuseopt.diagnostics import CompileError, parse_module
from fuseopt.passes.generalize_sizes import located_text, specialize
from fuseopt.registry import make_context

log = logging.getLogger("fuseopt")


class PerSizeFunction:
    """`compile(module at size n)` for each size n a call brings (see the module
    docstring). `kernels` are those of the last size compiled."""

    def __init__(
        self,
        module: ModuleOp,
        func_name: str,
        compile: Callable[[ModuleOp], CompiledFunction],
        backend: str,
    ):
        self.text, self.compile, self.backend = located_text(module), compile, backend
        f = next(
            op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == func_name
        )
        self.dynamic = [
            (i, d)
            for i, t in enumerate(f.function_type.inputs.data)
            if isinstance(t, TensorType)
            for d, n in enumerate(t.get_shape())
            if n < 0
        ]
        self.compiled: dict[int, CompiledFunction] = {}
        self.kernels: Sequence[KernelRecord] = []

    def __call__(self, *inputs: torch.Tensor) -> Sequence[torch.Tensor]:
        """Run at the inputs' size (compiling at it the first time)."""
        sizes = {
            inputs[i].shape[d]
            for i, d in self.dynamic
            if i < len(inputs) and isinstance(inputs[i], torch.Tensor)
        }
        if len(sizes) != 1:
            raise CompileError(
                f"the inputs' dynamic dims must be one size, got {sorted(sizes) or 'none'}"
            )
        (n,) = sizes
        fn = self.compiled.get(n)
        if fn is None:
            log.info("fuseopt: the %s backend compiles dynamic sizes per size: %d", self.backend, n)
            module = parse_module(make_context(), specialize(self.text, n), "<per-size>")
            fn = self.compile(module)
            self.compiled[n] = fn
            self.kernels = fn.kernels
        return fn(*inputs)

    def __getattr__(self, name: str) -> Any:
        """The last compiled size's attributes (`fused_module`, `source`, ...)."""
        if not self.compiled:
            raise AttributeError(f"{name}: nothing is compiled before the first call")
        return getattr(next(reversed(self.compiled.values())), name)
