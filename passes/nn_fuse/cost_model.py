"""fuseopt's cost model: HBM traffic, kernel counts and a roofline, in one place.

nn-fuse uses it to pick each group's route, and the fusion report uses it to show the
HBM bytes and kernels before and after fusion. Everything here is arithmetic on shapes
and dtypes; the GPU constants are in `GPUSpec` (H100 defaults, overridable through the
nn-fuse options, which choose the routes). `gpu_specs.py` derives a `GPUSpec` for other
GPUs from their datasheets; the fusion report of a compiled model estimates its times
on the compile device's with it.

Traffic (bytes moved to or from HBM):
- eager (before fusion): every op that computes is one kernel that reads its operands and
  writes its result. Views (reshape, transpose, slice, broadcast) are free strided views;
  an op that reads a view reads the viewed tensor (a slice: only the slice). Splat
  constants are scalars and cost nothing. Concat is a copy kernel.
- a fused kernel reads each group input once and writes each group output once;
- a library GEMM reads A and B and writes C; the fused epilogue kernel after it reads C
  again with the other inputs and writes the outputs.

Time (the roofline): a kernel takes `overhead + max(bytes / bandwidth, flops / peak)`.
Eager ops and library calls pay `eager_op_s` each (dispatch + launch); a generated kernel
pays `generated_kernel_s` (its host-side launcher costs more). A generated GEMM reaches
`generated_gemm_efficiency` of the library's throughput, and only on the SMs its output
tiles occupy (no split-K): with T tiles of `gemm_tile` it gets `min(1, T / sm_count)` of
the FLOP/s and `min(HBM, T * sm_bytes_per_s)` of the bandwidth (one SM streams several
times its fair share of HBM). Library GEMMs are assumed to fill the machine (split-K,
tuned small-shape kernels).

Routes for a matmul group (memory-bound groups are always a generated `kernel`: they
never move more bytes nor launch more kernels than eager):
- `kernel`: one generated kernel, GEMM and epilogue together (memory-bound GEMMs);
- `library_gemm`: library GEMM(s), then one generated epilogue kernel (large,
  compute-bound GEMMs, where the library's speed beats saving the round trip); a bias
  add right after the GEMM is the library's own epilogue, not a kernel;
- `unfused`: left to eager (tiny GEMMs whose epilogue saves less than the extra cost of
  a generated kernel, FuseML's "bypass"; a lone matmul with nothing to fuse).
The cheapest estimate wins; near-ties (within `TIE_S`) go to the simpler route (unfused,
then library_gemm). The margin is absolute, not relative: unfused and library_gemm share
the library GEMM time, so a relative margin would let a large GEMM hide the epilogue's
saving.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    TensorType,
)
from xdsl.ir import Operation, SSAValue

from fuseopt.dialects import nn
from fuseopt.dialects.dtypes import element_bytes
from fuseopt.passes.convert_nn_to_tile.gemm_bias import match_gemm_bias

KERNEL, LIBRARY_GEMM, UNFUSED = nn.Route.KERNEL, nn.Route.LIBRARY_GEMM, nn.Route.UNFUSED
"""The values of a group's `route` attribute (`nn.Route`)."""
ROUTES = tuple(nn.Route)

FREE_VIEWS = (nn.ReshapeOp, nn.TransposeOp, nn.SliceOp, nn.BroadcastOp)
"""Ops that are strided views in eager PyTorch (no kernel, no traffic)."""


@dataclass(frozen=True)
class GPUSpec:
    """The target GPU as the cost model sees it. Defaults: an H100 SXM 80GB, measured
    numbers measured on the H100 (benchmarks/results) where there are some."""

    name: str = "H100 SXM 80GB"
    hbm_bytes_per_s: float = 3.0e12
    """Measured device-to-device copy bandwidth (measured on the H100: 3.0 TB/s)."""
    matmul_flops_per_s_16bit: float = 686e12
    """Dense bf16/f16 tensor-core throughput, measured (8192^3 bf16 matmul)."""
    matmul_flops_per_s_32bit: float = 50e12
    """f32 matmul without TF32 (PyTorch's default): ~75% of the 67 TFLOP/s FP32 peak."""
    vector_flops_per_s: float = 60e12
    """Elementwise/reduction arithmetic on the CUDA cores."""
    sm_count: int = 132
    sm_bytes_per_s: float = 120e9
    """What one SM streams from HBM on its own (Little's law: a GEMM program with three
    128x64 bf16 A and B stages, 96 KB, in flight over ~0.8 us of loaded latency)."""
    gemm_tile: tuple[int, int] = (128, 128)
    """Output tile of a generated GEMM (BM x BN)."""
    generated_gemm_efficiency: float = 0.6
    """A generated GEMM's throughput relative to the library's, on a full machine.
    Measured on the H100 (benchmarks/results, 21:02 UTC run, Triton backend, untuned):
    mlp medium's two fused GEMM kernels ran 34.4 GFLOP in 85.6 us (402 TFLOP/s, 0.59 of
    686); gated_mlp's generated GEMMs 0.77. The lower number keeps GEMMs on the library
    unless fusing clearly wins; raise it as the generated GEMMs improve."""
    eager_op_s: float = 4e-6
    """Per eager op or library call: PyTorch dispatch plus kernel launch."""
    generated_kernel_s: float = 6e-6
    """Per generated kernel: its launcher plus the kernel launch."""


H100 = GPUSpec()
"""The default target."""


def value_bytes(v: SSAValue) -> int:
    """Size in bytes of a tensor value."""
    t = v.type
    assert isinstance(t, TensorType)
    return math.prod(t.get_shape()) * element_bytes(t.element_type)


def _splat_constant(v: SSAValue) -> bool:
    owner = v.owner
    return isinstance(owner, nn.ConstantOp) and not isinstance(
        owner.value, DenseIntOrFPElementsAttr
    )


def eager_read_bytes(v: SSAValue) -> int:
    """Bytes an eager op reads for operand `v`: through free views to the viewed tensor."""
    while True:
        if _splat_constant(v):
            return 0
        owner = v.owner
        if isinstance(owner, nn.SliceOp):
            return value_bytes(v)
        if isinstance(owner, FREE_VIEWS):
            v = owner.operands[0]
            continue
        return value_bytes(v)


def is_eager_kernel(op: Operation) -> bool:
    """Whether eager PyTorch runs `op` as a kernel of its own."""
    return not isinstance(op, (*FREE_VIEWS, nn.ConstantOp, nn.YieldOp))


def matmul_flops(op: nn.MatmulOp) -> int:
    """2 * batch * M * N * K."""
    a = op.lhs.type
    assert isinstance(a, TensorType)
    k = a.get_shape()[-2] if op.transpose_a is not None else a.get_shape()[-1]
    out = op.result.type
    assert isinstance(out, TensorType)
    return 2 * math.prod(out.get_shape()) * k


def op_flops(op: Operation) -> int:
    """Arithmetic of one op (one per element for elementwise ops and reductions)."""
    if isinstance(op, nn.MatmulOp):
        return matmul_flops(op)
    if isinstance(op, nn.ReductionOp):
        t = op.input.type
        assert isinstance(t, TensorType)
        return math.prod(t.get_shape())
    if not is_eager_kernel(op) or not op.results:
        return 0
    return sum(value_bytes(r) // max(1, _elem_bytes(r)) for r in op.results)


def _elem_bytes(v: SSAValue) -> int:
    assert isinstance(v.type, TensorType)
    return element_bytes(v.type.element_type)


def _matmul_peak(op: nn.MatmulOp, gpu: GPUSpec) -> float:
    t = op.lhs.type
    assert isinstance(t, TensorType)
    if isinstance(t.element_type, Float16Type | BFloat16Type):
        return gpu.matmul_flops_per_s_16bit
    return gpu.matmul_flops_per_s_32bit


def roofline_s(nbytes: float, flops: float, bandwidth: float, peak: float) -> float:
    """Time of a kernel bounded by memory or by arithmetic, whichever is slower."""
    return max(nbytes / bandwidth, flops / peak)


def eager_op_reads(op: Operation) -> int:
    """HBM bytes one eager op reads (0 for views and constants; a gather reads its
    index and as many elements of its input as it returns)."""
    if not is_eager_kernel(op):
        return 0
    if isinstance(op, nn.TakeOp):
        return eager_read_bytes(op.index) + min(_gathered_bytes(op.result), value_bytes(op.input))
    return sum(eager_read_bytes(v) for v in op.operands)


GATHER_SECTOR = 32
"""Bytes a scattered load moves at least (one DRAM sector)."""


def group_read_bytes(v: SSAValue, ops: Collection[Operation]) -> int:
    """HBM bytes a kernel running `ops` reads of its input `v`: all of it, unless only
    gathers (`nn.take` inputs) among `ops` read it, by address: a sector per element
    they return (at most all of it)."""
    if _splat_constant(v):
        return 0
    uses = [u for u in v.uses if u.operation in ops]
    if uses and all(isinstance(u.operation, nn.TakeOp) and u.index == 0 for u in uses):
        gathered = sum(_gathered_bytes(u.operation.results[0]) for u in uses)
        return min(gathered, value_bytes(v))
    return value_bytes(v)


def _gathered_bytes(result: SSAValue) -> int:
    """Bytes a gather returning `result` reads: a sector per element, or more for wide
    elements."""
    count = value_bytes(result) // max(1, _elem_bytes(result))
    return count * max(GATHER_SECTOR, _elem_bytes(result))


def eager_op_writes(op: Operation) -> int:
    """HBM bytes one eager op writes (0 for views and constants)."""
    if not is_eager_kernel(op):
        return 0
    return sum(value_bytes(r) for r in op.results)


def eager_op_bytes(op: Operation) -> int:
    """HBM bytes one eager op moves, read and written (0 for views and constants)."""
    return eager_op_reads(op) + eager_op_writes(op)


def eager_op_s(op: Operation, gpu: GPUSpec) -> float:
    """Estimated time of one eager op (library speed for matmuls)."""
    if not is_eager_kernel(op):
        return 0.0
    peak = _matmul_peak(op, gpu) if isinstance(op, nn.MatmulOp) else gpu.vector_flops_per_s
    return gpu.eager_op_s + roofline_s(eager_op_bytes(op), op_flops(op), gpu.hbm_bytes_per_s, peak)


@dataclass(frozen=True)
class RouteEstimate:
    """Traffic, kernel count and time of one way to run a group."""

    route: str
    read_bytes: int
    write_bytes: int
    kernels: int
    seconds: float

    @property
    def hbm_bytes(self) -> int:
        """Bytes moved to and from HBM."""
        return self.read_bytes + self.write_bytes


def gemm_tiles(mm: nn.MatmulOp, gpu: GPUSpec) -> int:
    """Output tiles (programs) of a generated GEMM for `mm` with `gpu.gemm_tile`."""
    shape = mm.result.type.get_shape()  # type: ignore[union-attr]
    bm, bn = gpu.gemm_tile
    return math.prod(shape[:-2]) * math.ceil(shape[-2] / bm) * math.ceil(shape[-1] / bn)


def estimate_routes(
    ops: Sequence[Operation],
    inputs: Collection[SSAValue],
    outputs: Collection[SSAValue],
    gpu: GPUSpec = H100,
) -> dict[str, RouteEstimate]:
    """Estimates for running the group `ops` (reading `inputs`, writing `outputs`) each
    possible way: always `unfused` and `kernel`; `library_gemm` when it holds a matmul."""
    compute = [op for op in ops if is_eager_kernel(op)]
    eager = RouteEstimate(
        UNFUSED,
        sum(eager_op_reads(op) for op in compute),
        sum(eager_op_writes(op) for op in compute),
        len(compute),
        sum(eager_op_s(op, gpu) for op in compute),
    )
    members = set(ops)
    fused_reads = sum(group_read_bytes(v, members) for v in inputs)
    fused_writes = sum(value_bytes(v) for v in outputs)
    matmuls = [op for op in ops if isinstance(op, nn.MatmulOp)]
    flops = sum(op_flops(op) for op in compute)
    bandwidth, peak = gpu.hbm_bytes_per_s, gpu.vector_flops_per_s
    if matmuls:
        tiles = min(gemm_tiles(mm, gpu) for mm in matmuls)
        bandwidth = min(bandwidth, tiles * gpu.sm_bytes_per_s)
        peak = (
            _matmul_peak(matmuls[0], gpu)
            * gpu.generated_gemm_efficiency
            * min(1.0, tiles / gpu.sm_count)
        )
    kernel = RouteEstimate(
        KERNEL,
        fused_reads,
        fused_writes,
        1,
        gpu.generated_kernel_s + roofline_s(fused_reads + fused_writes, flops, bandwidth, peak),
    )
    estimates = {UNFUSED: eager, KERNEL: kernel}
    if matmuls:
        estimates[LIBRARY_GEMM] = _library_route(ops, matmuls, inputs, outputs, gpu)
    return estimates


def _library_route(
    ops: Sequence[Operation],
    matmuls: list[nn.MatmulOp],
    inputs: Collection[SSAValue],
    outputs: Collection[SSAValue],
    gpu: GPUSpec,
) -> RouteEstimate:
    total_reads = sum(eager_op_reads(mm) for mm in matmuls)
    total_writes = sum(eager_op_writes(mm) for mm in matmuls)
    seconds = sum(eager_op_s(mm, gpu) for mm in matmuls)
    # a bias add right after a GEMM is the library's epilogue (convert-nn-to-tile's
    # `gemm_bias`): no kernel, no round trip
    biases = [match_gemm_bias(mm, inputs, outputs) for mm in matmuls]
    absorbed = {op for b in biases if b for op in b.ops}
    epilogue = [
        op
        for op in ops
        if is_eager_kernel(op) and not isinstance(op, nn.MatmulOp) and op not in absorbed
    ]
    kernels = len(matmuls)
    if epilogue:
        members = set(ops)
        only_gemm_inputs = {
            v
            for v in inputs
            if all(isinstance(u.operation, nn.MatmulOp) for u in v.uses if u.operation in members)
        }
        results = {b.value if b else mm.result for mm, b in zip(matmuls, biases, strict=True)}
        reads = sum(
            value_bytes(v) for v in inputs if v not in only_gemm_inputs and not _splat_constant(v)
        ) + sum(value_bytes(r) for r in results)
        writes = sum(value_bytes(v) for v in outputs if v not in results)
        flops = sum(op_flops(op) for op in epilogue)
        total_reads += reads
        total_writes += writes
        kernels += 1
        seconds += gpu.generated_kernel_s + roofline_s(
            reads + writes, flops, gpu.hbm_bytes_per_s, gpu.vector_flops_per_s
        )
    return RouteEstimate(LIBRARY_GEMM, total_reads, total_writes, kernels, seconds)


TIE_S = 0.25e-6
"""Estimates closer than this (a quarter of a microsecond) are a tie."""


def choose_route(estimates: dict[str, RouteEstimate]) -> str:
    """The fastest route; near-ties (within TIE_S) go to unfused, then library_gemm."""
    best = min(e.seconds for e in estimates.values())
    for route in (UNFUSED, LIBRARY_GEMM, KERNEL):
        if route in estimates and estimates[route].seconds <= best + TIE_S:
            return route
    raise AssertionError("no route estimated")
