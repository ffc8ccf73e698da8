"""A system in a training step: compile the loss, keep the step around it the same.

`TrainingSystem` wraps any `System` (eager, torch.compile, fuseopt): the wrapped system
compiles the `TrainStep`'s loss module, with gradients enabled, so its forward and
(through AOTAutograd) its backward are compiled; the AdamW step stays PyTorch's, the
same for every system. Its cold compile time covers the first whole step (the
backward graph is compiled on the first backward). Before the check, the weights go
back to their initial values, so every system is judged on the step the reference made.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import torch

from benchmarks.models.hf import TrainStep
from benchmarks.systems import InputFactory, Prepared, System
from benchmarks.timing import synchronize


class TrainingSystem(System):
    """`inner` compiling a training step's loss; named and described as `inner`."""

    def __init__(self, inner: System):
        self.inner = inner
        self.name = inner.name
        self.description = inner.description
        self.autotunes = inner.autotunes
        self.launch_bound_only = inner.launch_bound_only
        self.reports_traffic = False

    def availability(self, device: torch.device, quick: bool) -> str | None:
        """As the wrapped system."""
        return self.inner.availability(device, quick)

    def prepare(self, model: torch.nn.Module, make_inputs: InputFactory) -> Prepared:
        """Compile the loss, run one whole step (timed with the compile), reset the weights."""
        assert isinstance(model, TrainStep), type(model)
        with torch.enable_grad():
            inner = self.inner.prepare(model.loss, make_inputs)
            compiled = inner.fn

            def step(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
                return model.step_with(compiled, *inputs)

            inputs = make_inputs()
            device = inputs[0].device
            synchronize(device)
            start = time.perf_counter()
            step(*inputs)
            synchronize(device)
            first_step_s = time.perf_counter() - start
        model.reset()
        cold = None if inner.compile_cold_s is None else inner.compile_cold_s + first_step_s
        return dataclasses.replace(inner, fn=step, compile_cold_s=cold)

    def warm_compile_s(self, model: Any, make_inputs: InputFactory) -> float | None:
        """The wrapped system's warm compile of the loss (forward, gradients enabled)."""
        with torch.enable_grad():
            seconds = self.inner.warm_compile_s(model.loss, make_inputs)
        model.reset()
        return seconds
