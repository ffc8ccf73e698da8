"""The correctness gate: every system's output against a float64 reference.

The reference is the workload's own module converted to float64 (its
`reference_dtype`: float32 for whole models), run on the same inputs upcast exactly.
Two error measures, both computed in float64:

- ``rel_l2 = ||out - ref|| / ||ref||`` (the error spread over the whole output);
- ``max_rel = max|out - ref| / max|ref|`` (catches a few wrong elements that the
  L2 norm would average away: a bad mask, an unwritten tail).

A system passes when it has no NaN/Inf, the right shape and dtype, integer outputs
(argmax indices) equal to the reference's, and both measures
are within a bound derived from eager PyTorch's own error on the same inputs
(`TOLERANCE_SLACK` times eager's, never below a per-dtype floor): a fused kernel may
round differently from eager, but not be meaningfully worse than it.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch

from benchmarks.workloads import Workload

TOLERANCE_SLACK = 2.0
"""A system may be this many times less accurate than eager (rounding-order noise)."""

TOLERANCE_FLOOR: dict[torch.dtype, tuple[float, float]] = {
    torch.bfloat16: (8e-3, 2e-2),
    torch.float16: (1e-3, 4e-3),
    torch.float32: (1e-5, 5e-5),
}
"""Per-dtype floors for (rel_l2, max_rel): a few output roundings of that dtype."""

EAGER_SANITY: dict[torch.dtype, float] = {
    torch.bfloat16: 5e-2,
    torch.float16: 1e-2,
    torch.float32: 1e-4,
}
"""If eager itself is further than this (rel_l2) from float64, the reference is suspect."""

REFERENCE_CHUNK_BYTES = 2 << 30
"""Row-wise references larger than this (in float64) are computed chunk by chunk."""


class OutputMismatch(Exception):
    """A system returned outputs of the wrong number, shape or dtype."""


@dataclass
class ErrorStats:
    """Accumulated error of an output against the reference (mergeable across chunks)."""

    sq_diff: float = 0.0
    sq_ref: float = 0.0
    max_diff: float = 0.0
    max_ref: float = 0.0
    nonfinite: int = 0
    mismatched: int = 0
    """Integer elements (indices, counts) that differ from the reference: any is wrong."""

    @property
    def rel_l2(self) -> float:
        """``||out - ref|| / ||ref||``."""
        return math.sqrt(self.sq_diff) / max(math.sqrt(self.sq_ref), 1e-300)

    @property
    def max_rel(self) -> float:
        """``max|out - ref| / max|ref|``."""
        return self.max_diff / max(self.max_ref, 1e-300)

    def merge(self, other: ErrorStats) -> None:
        """Add another chunk's statistics into this one."""
        self.sq_diff += other.sq_diff
        self.sq_ref += other.sq_ref
        self.max_diff = max(self.max_diff, other.max_diff)
        self.max_ref = max(self.max_ref, other.max_ref)
        self.nonfinite += other.nonfinite
        self.mismatched += other.mismatched


@dataclass(frozen=True)
class Tolerance:
    """The bounds a system's `ErrorStats` must meet."""

    rel_l2: float
    max_rel: float


@dataclass(frozen=True)
class Verdict:
    """The outcome of the correctness check of one system on one workload instance."""

    ok: bool
    message: str
    stats: ErrorStats | None


def as_tuple(outputs: object) -> tuple[torch.Tensor, ...]:
    """A module's outputs as a tuple of tensors (a single tensor becomes a 1-tuple)."""
    if isinstance(outputs, torch.Tensor):
        return (outputs,)
    if isinstance(outputs, (tuple, list)) and all(isinstance(o, torch.Tensor) for o in outputs):
        return tuple(outputs)
    raise OutputMismatch(f"expected a tensor or a tuple of tensors, got {type(outputs).__name__}")


def compare(out: torch.Tensor, ref: torch.Tensor) -> ErrorStats:
    """Error statistics of `out` against the float64 `ref` (same shape)."""
    out64 = out.detach().to(torch.float64)
    finite = torch.isfinite(out64)
    nonfinite = int((~finite).sum().item())
    diff = torch.where(finite, out64 - ref, torch.zeros((), dtype=ref.dtype, device=ref.device))
    return ErrorStats(
        sq_diff=float(diff.square().sum().item()),
        sq_ref=float(ref.square().sum().item()),
        max_diff=float(diff.abs().max().item()) if diff.numel() else 0.0,
        max_ref=float(ref.abs().max().item()) if ref.numel() else 0.0,
        nonfinite=nonfinite,
        mismatched=0 if out.is_floating_point() else int((out64 != ref).sum().item()),
    )


def upcast(t: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """A `dtype` (float64) copy of a floating-point tensor (other tensors unchanged)."""
    return t.to(dtype) if t.is_floating_point() else t


class Reference:
    """The float64 reference for one workload instance on one set of inputs.

    Small references are computed once and kept; large row-wise ones are recomputed in
    chunks of rows for each comparison, so a 17 GB softmax never needs a 69 GB float64
    copy.
    """

    def __init__(
        self, workload: Workload, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]
    ):
        self.model64 = copy.deepcopy(model).to(workload.reference_dtype)
        self.inputs = inputs
        self.rowwise = workload.rowwise
        self.whole: tuple[torch.Tensor, ...] | None = None
        big = inputs[0].numel() * 8 > REFERENCE_CHUNK_BYTES
        if not (self.rowwise and big):
            with torch.no_grad():
                dtype = workload.reference_dtype
                self.whole = as_tuple(self.model64(*(upcast(t, dtype) for t in inputs)))

    def error_of(self, outputs: object, expected_dtypes: tuple[torch.dtype, ...]) -> ErrorStats:
        """Compare a system's outputs with the reference; raises `OutputMismatch` on shape/dtype."""
        outs = as_tuple(outputs)
        if len(outs) != len(expected_dtypes):
            raise OutputMismatch(f"{len(outs)} outputs, expected {len(expected_dtypes)}")
        for i, (out, dtype) in enumerate(zip(outs, expected_dtypes, strict=True)):
            if out.dtype != dtype:
                raise OutputMismatch(f"output {i} has dtype {out.dtype}, expected {dtype}")
        if self.whole is not None:
            stats = ErrorStats()
            for i, (out, ref) in enumerate(zip(outs, self.whole, strict=True)):
                if out.shape != ref.shape:
                    raise OutputMismatch(
                        f"output {i} has shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
                    )
                stats.merge(compare(out, ref))
            return stats
        return self._chunked_error(outs)

    def _chunked_error(self, outs: tuple[torch.Tensor, ...]) -> ErrorStats:
        (out,) = outs
        x = self.inputs[0]
        if out.shape != x.shape:
            raise OutputMismatch(f"output has shape {tuple(out.shape)}, expected {tuple(x.shape)}")
        cols = x.shape[-1]
        rows_in, rows_out = x.reshape(-1, cols), out.reshape(-1, cols)
        chunk = max(1, REFERENCE_CHUNK_BYTES // 4 // (cols * 8))
        rest = tuple(upcast(t) for t in self.inputs[1:])
        stats = ErrorStats()
        with torch.no_grad():
            for lo in range(0, rows_in.shape[0], chunk):
                ref = self.model64(upcast(rows_in[lo : lo + chunk]), *rest)
                stats.merge(compare(rows_out[lo : lo + chunk], as_tuple(ref)[0]))
        return stats


def tolerance_from_eager(eager: ErrorStats, dtype: torch.dtype) -> Tolerance:
    """The bounds for every system: `TOLERANCE_SLACK` x eager's error, at least the floor."""
    floor_l2, floor_max = TOLERANCE_FLOOR.get(dtype, TOLERANCE_FLOOR[torch.float32])
    return Tolerance(
        rel_l2=max(TOLERANCE_SLACK * eager.rel_l2, floor_l2),
        max_rel=max(TOLERANCE_SLACK * eager.max_rel, floor_max),
    )


def judge(stats: ErrorStats, tolerance: Tolerance) -> Verdict:
    """Pass/fail of one system's error statistics against the tolerance, with the reason."""
    if stats.nonfinite:
        return Verdict(False, f"{stats.nonfinite} NaN/Inf elements in the output", stats)
    if stats.mismatched:
        return Verdict(False, f"wrong result: {stats.mismatched} integer elements differ", stats)
    measures = f"rel_l2 {stats.rel_l2:.2e} (bound {tolerance.rel_l2:.2e}), "
    measures += f"max_rel {stats.max_rel:.2e} (bound {tolerance.max_rel:.2e})"
    if stats.rel_l2 > tolerance.rel_l2 or stats.max_rel > tolerance.max_rel:
        return Verdict(False, "wrong result: " + measures, stats)
    return Verdict(True, measures, stats)


def eager_is_sane(eager: ErrorStats, dtype: torch.dtype, bound: float | None = None) -> bool:
    """Whether eager agrees with the reference well enough to trust the reference
    (rel_l2 within `bound`, by default `EAGER_SANITY` of the dtype)."""
    limit = bound if bound is not None else EAGER_SANITY.get(dtype, 1e-4)
    return eager.nonfinite == 0 and eager.rel_l2 <= limit
