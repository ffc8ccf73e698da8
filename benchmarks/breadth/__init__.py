"""The breadth suite: single ops and short patterns nobody tuned fuseopt for.

``python -m benchmarks.breadth`` (see `benchmarks.breadth.__main__`); the cases are in
`benchmarks.breadth.cases`. A `Case` is a function of some inputs and some weights,
with a few shapes; `Case.workload()` makes it a `benchmarks.workloads.Workload`, so the
suite runs through the same harness as the workload suite: float64
reference, tolerance from eager's own error, FAILED rows never timed.

Inputs are described, not drawn, by `TensorSpec` (shape and kind of values); the cost
floor is computed from the specs and from the output sizes, found by running the
function on meta tensors: each input and weight read once, each output written once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from benchmarks.workloads import Dims, Shape, Workload, element_size, generator, randn

NORMAL, SCALE, POSITIVE, SIGN, CLASSES = "normal", "scale", "positive", "sign", "classes"
"""Kinds of values a `TensorSpec` draws: N(0, 1); a scale near one (1 + 0.25 N(0, 1));
positive (a variance: 0.5 + U(0, 1)); +-1 (hinge targets); class indices in
``[0, classes)`` (int64; cross-entropy targets)."""


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of a case: its shape and the kind of its values (`NORMAL`...)."""

    shape: tuple[int, ...]
    kind: str = NORMAL
    classes: int = 0

    def draw(self, dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> torch.Tensor:
        """Draw the values on `device` (floating kinds in `dtype`, classes as int64)."""
        if self.kind == CLASSES:
            return torch.randint(0, self.classes, self.shape, generator=gen, device=device)
        if self.kind == SIGN:
            ones = torch.randint(0, 2, self.shape, generator=gen, device=device) * 2 - 1
            return ones.to(dtype)
        if self.kind == SCALE:
            return (1.0 + 0.25 * randn(self.shape, torch.float32, device, gen)).to(dtype)
        if self.kind == POSITIVE:
            uniform = torch.rand(self.shape, generator=gen, device=device)
            return (0.5 + uniform).to(dtype)
        return randn(self.shape, dtype, device, gen)

    def meta(self, dtype: torch.dtype) -> torch.Tensor:
        """An empty tensor of the same shape and dtype on the meta device."""
        real = torch.int64 if self.kind == CLASSES else dtype
        return torch.empty(self.shape, dtype=real, device="meta")


Specs = Callable[[Dims], tuple[TensorSpec, ...]]


class OpModule(nn.Module):
    """``fn(*inputs, *weights)`` as a module whose weights are (frozen) parameters, so
    ``.to(torch.float64)`` makes the reference and compilers see ordinary weights.

    The weights are plain attributes `weight0`, `weight1`, ... read one by one in
    `forward`: Dynamo on the H100's torch 2.11 failed (NotImplementedError) on every
    case when they were star-unpacked from an `nn.ParameterList`."""

    def __init__(self, fn: Callable[..., torch.Tensor], weights: list[torch.Tensor]):
        super().__init__()
        self.fn = fn
        self.weight_names = tuple(f"weight{i}" for i in range(len(weights)))
        for name, w in zip(self.weight_names, weights, strict=True):
            self.register_parameter(name, nn.Parameter(w, requires_grad=False))

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        """Apply the case's function."""
        if not self.weight_names:
            return self.fn(*inputs)
        weights = [getattr(self, name) for name in self.weight_names]
        return self.fn(*inputs, *weights)


def _label(dims: Dims) -> str:
    return "x".join(str(v) for v in dims.values())


def shape(**dims: int) -> Shape:
    """A `Shape` labeled by its sizes in order (``4096x8192``)."""
    return Shape(_label(dims), dict(dims))


@dataclass(frozen=True)
class Case:
    """One breadth case: ``fn(*inputs, *weights)`` at a few shapes.

    `inputs` and `weights` map a shape's dims to the tensors' specs; `flops` counts
    matrix-multiply FLOPs (0 elsewhere); `group` names the family in tables;
    `sanity_rel_l2` is eager's largest trusted error against float64 where eager itself
    is known to be far off (a 16-bit scan accumulates in 16 bits: None for the default).
    """

    name: str
    group: str
    computation: str
    fn: Callable[..., torch.Tensor]
    inputs: Specs
    shapes: tuple[Shape, ...]
    quick: Shape
    weights: Specs = field(default=lambda dims: ())
    flops: Callable[[Dims], int] = field(default=lambda dims: 0)
    sanity_rel_l2: float | None = None

    def make_model(
        self, dims: Dims, dtype: torch.dtype, device: torch.device, seed: int
    ) -> nn.Module:
        """The case as a module with its weights drawn from `seed`."""
        gen = generator(device, seed)
        return OpModule(self.fn, [spec.draw(dtype, device, gen) for spec in self.weights(dims)])

    def make_inputs(
        self, dims: Dims, dtype: torch.dtype, device: torch.device, seed: int
    ) -> tuple[torch.Tensor, ...]:
        """Fresh inputs drawn from `seed`."""
        gen = generator(device, seed)
        return tuple(spec.draw(dtype, device, gen) for spec in self.inputs(dims))

    def min_bytes(self, dims: Dims, dtype: torch.dtype) -> int:
        """Each input and weight read once, each output written once (sizes from a run
        of the function on meta tensors)."""
        specs = (*self.inputs(dims), *self.weights(dims))
        tensors = [spec.meta(dtype) for spec in specs]
        outputs = self.fn(*tensors)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        return sum(t.numel() * element_size(t.dtype) for t in (*tensors, *outputs))

    def workload(self) -> Workload:
        """The case as a harness `Workload`."""
        return Workload(
            name=self.name,
            computation=self.computation,
            shapes=self.shapes,
            quick_shape=self.quick,
            make_model=self.make_model,
            make_inputs=self.make_inputs,
            min_bytes=self.min_bytes,
            flops=self.flops,
            sanity_rel_l2=self.sanity_rel_l2,
        )
