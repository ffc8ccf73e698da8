"""The workload suite: what each computes, at which shapes, and its cost floor.

A `Workload` is one family (``rmsnorm``, ``mlp``...) with its full-size shapes (run on
the GPU) and one tiny shape for ``--quick`` (run anywhere, plumbing only). Each family
module defines an eager PyTorch `nn.Module` whose weights are random and non-trivial
(never all ones), a `make_inputs` drawing fresh random activations from a seed, and
the two numbers of the roofline model: the fewest bytes the computation must move
through device memory (each input and weight read once, each output written once)
and its floating-point operations (counted for GEMM work only; elementwise and
reduction arithmetic is far under the memory floor on a GPU).

The modules are written so that the same module converted with ``.to(torch.float64)``
computes the float64 reference: internal upcasts use `accumulation_dtype`, never a
hard-coded ``float32``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

Dims = dict[str, int]


@dataclass(frozen=True)
class Shape:
    """One problem size of a workload.

    `label` names it in tables (``prefill``, ``4096x8192``); `dims` are the sizes the
    family's functions read; `tiny` marks launch-bound (decode-like) sizes, for which
    kernel-only and launch-inclusive times are reported separately.
    """

    label: str
    dims: Dims
    tiny: bool = False


@dataclass(frozen=True)
class Workload:
    """A workload family: model, inputs and cost model over a list of shapes.

    - `make_model(dims, dtype, device, seed)` returns the eager `nn.Module` (weights drawn
      from `seed`, non-trivial);
    - `make_inputs(dims, dtype, device, seed)` returns the forward's positional inputs;
    - `min_bytes(dims, dtype)` is the fewest bytes any implementation must move;
    - `flops(dims)` counts matrix-multiply FLOPs (0 for memory-bound families);
    - `rowwise`: outputs rows depend only on the same rows of the first input (the
      other inputs are shared parameters), so a huge float64 reference may be computed
      in chunks of rows;
    - `reference_dtype`: the dtype of the reference run of the same module (float64;
      float32 for whole models, whose float64 runs are slow and gain nothing);
    - `training`: the module runs a training step (its parameters stay trainable);
    - `sanity_rel_l2`: the largest error of eager against the reference that still
      trusts the reference (None: `benchmarks.accuracy.EAGER_SANITY` of the dtype).
    """

    name: str
    computation: str
    shapes: tuple[Shape, ...]
    quick_shape: Shape
    make_model: Callable[[Dims, torch.dtype, torch.device, int], torch.nn.Module]
    make_inputs: Callable[[Dims, torch.dtype, torch.device, int], tuple[torch.Tensor, ...]]
    min_bytes: Callable[[Dims, torch.dtype], int]
    flops: Callable[[Dims], int] = field(default=lambda dims: 0)
    rowwise: bool = False
    reference_dtype: torch.dtype = torch.float64
    training: bool = False
    sanity_rel_l2: float | None = None

    def shapes_for(self, quick: bool) -> tuple[Shape, ...]:
        """The shapes a run uses: the tiny quick shape, or every full-size shape."""
        return (self.quick_shape,) if quick else self.shapes


def accumulation_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype to accumulate in: float32 for 16-bit inputs, the input's own otherwise.

    Written this way (not ``x.float()``) so that a float64 copy of a module stays in
    float64 and computes the reference.
    """
    return torch.promote_types(x.dtype, torch.float32)


def generator(device: torch.device, seed: int) -> torch.Generator:
    """A random generator on `device` seeded with `seed` (inputs are drawn on the device)."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


def randn(
    shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> torch.Tensor:
    """Standard-normal values of `shape`, drawn on `device` and rounded to `dtype`."""
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)


def scale_weight(
    shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, gen: torch.Generator
) -> torch.Tensor:
    """A norm scale near one but far from all ones: ``1 + 0.25 * N(0, 1)``."""
    return (1.0 + 0.25 * torch.randn(shape, generator=gen, device=device)).to(dtype)


def element_size(dtype: torch.dtype) -> int:
    """Bytes per element of `dtype`."""
    return torch.empty((), dtype=dtype).element_size()


def all_workloads() -> tuple[Workload, ...]:
    """Every workload family of the workload suite, in the order the tables list them."""
    from benchmarks.workloads.activations import GELU_BIAS, SOFTMAX
    from benchmarks.workloads.llama import LLAMA_BLOCK
    from benchmarks.workloads.mlp import GATED_MLP, MLP, MLP_HEAVY, MLP_STACKED
    from benchmarks.workloads.norms import LAYERNORM, RMSNORM, RMSNORM_ROPE, RMSNORM_SILU_GATE

    return (
        RMSNORM,
        RMSNORM_SILU_GATE,
        SOFTMAX,
        LAYERNORM,
        GELU_BIAS,
        RMSNORM_ROPE,
        MLP,
        MLP_HEAVY,
        MLP_STACKED,
        GATED_MLP,
        LLAMA_BLOCK,
    )


def select_workloads(only: list[str] | None) -> list[tuple[Workload, Shape | None]]:
    """Resolve ``--only`` entries (``NAME`` or ``NAME:SHAPE``) against the workload table.

    Returns ``(workload, shape)`` pairs where `shape` is None for "every shape". Raises
    `ValueError` naming the unknown entry and the valid names.
    """
    table = {w.name: w for w in all_workloads()}
    if not only:
        return [(w, None) for w in table.values()]
    selected: list[tuple[Workload, Shape | None]] = []
    for entry in only:
        name, _, label = entry.partition(":")
        if name not in table:
            raise ValueError(f"unknown workload {name!r}; known: {', '.join(table)}")
        workload = table[name]
        if not label:
            selected.append((workload, None))
            continue
        matches = [s for s in (*workload.shapes, workload.quick_shape) if s.label == label]
        if not matches:
            labels = ", ".join(s.label for s in workload.shapes)
            raise ValueError(f"workload {name!r} has no shape {label!r}; its shapes: {labels}")
        selected.append((workload, matches[0]))
    return selected


PERFORMANCE_BASELINE_ROWS = frozenset(
    {
        ("rmsnorm", "prefill"),
        ("rmsnorm", "long"),
        ("rmsnorm_silu_gate", "prefill"),
        ("rmsnorm_silu_gate", "long"),
        ("softmax", "4096x8192"),
        ("layernorm", "8192x4096"),
        ("gelu_bias", "8192x8192"),
        ("rmsnorm_rope", "4x2048x32x128"),
        ("mlp", "memory_bound"),
        ("mlp_heavy", "memory_bound"),
        ("mlp", "medium"),
        ("mlp", "large"),
        ("gated_mlp", "4096x4096x11008"),
    }
)
"""The instances of the baseline table: run first when a time budget is set."""
