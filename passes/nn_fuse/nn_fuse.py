"""`nn-fuse`: group nn ops into `nn.fusion` regions, one kernel each.

Preconditions: composites are decomposed (`nn-decompose`; a composite left over is
treated as an opaque op and never fused); shapes are static.

Steps, per function body:
0. Rematerialization (`rematerialize`): each use of a widening cast of a function
   argument by an op that can absorb it (not a matmul, linear or PyTorch call) gets its
   own copy of the cast, so consumer groups widen the narrow argument in registers
   instead of reading a wide copy some kernel wrote.
1. Grouping (`grouping.find_groups`): reductions first claim their cheap
   prologues, then greedy producer-consumer merges in program order, then sibling
   merges, each checked by `legality` (one kernel shape: pointwise, reduction or
   matmul; bounded recompute; no duplicated reduction or matmul; one iteration space)
   and by an acyclicity check on the graph of groups, in time about linear in the ops.
2. Routing (`cost_model.py`): memory-bound groups are always a generated `kernel`;
   a matmul group takes the fastest of `kernel`, `library_gemm` and `unfused` under the
   roofline model of the target GPU (H100 defaults, overridable below). When a matmul is
   routed `unfused` (bypassed: left to the library), grouping runs again without it, so
   its epilogue ops can join other groups; groups made only of those stay unfused.
3. Outlining (`outlining`): each group that computes something and is not routed
   `unfused` becomes an `nn.fusion` with attributes `kernel_name`
   (`fused_<n>_<op summary>`, a valid identifier, n counts groups in the module),
   `kind` (pointwise | reduction | matmul) and `route` (kernel | library_gemm). Groups of
   pure views and groups routed `unfused` stay as plain ops in the function body.
   Finally the block is put back in dominance order.

Options:
- `max_recompute` (default 8): the most non-view ops a group may evaluate redundantly
  (side ops before a broadcast, e.g. a weight cast); 0 forbids recompute.
- `route`: `auto` (the cost model), or `kernel` / `library_gemm` / `unfused` to force the
  route of every matmul group (tests; backends without a GEMM library).
- `hbm_gbps`, `gemm_tflops`, `sm_count` (integers): override the GPU model (HBM GB/s,
  bf16/f16 matmul TFLOP/s, SM count).
- `report=true`: print the fusion report (`fuseopt.passes.nn_fuse.report`) to stderr, so that
  stdout still carries the IR (`fuse-opt ... -p 'nn-fuse{report=true}' > out.mlir`).
- `dot=FILE`: write the fused graph as Graphviz DOT to FILE.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from fuseopt.diagnostics import CompileError
from fuseopt.dialects import nn
from fuseopt.passes.nn_fuse.cost_model import (
    H100,
    KERNEL,
    ROUTES,
    UNFUSED,
    GPUSpec,
    choose_route,
    estimate_routes,
)
from fuseopt.passes.nn_fuse.grouping import FusionGroup, copies, find_groups
from fuseopt.passes.nn_fuse.legality import MATMUL, VIEW_TYPES
from fuseopt.passes.nn_fuse.outlining import outline_group, sort_block_topologically
from fuseopt.passes.nn_fuse.rematerialize import rematerialize_argument_casts
from fuseopt.passes.nn_fuse.report import ReportTarget, fusion_dot, fusion_report

SUMMARY_OPS = 4
"""How many distinct op names a kernel name lists."""


def kernel_name(index: int, ops: list[Operation]) -> str:
    """`fused_<index>_<op summary>`: the first distinct compute ops, as an identifier
    (the copying views of a group that only copies: `fused_3_transpose_broadcast`)."""
    names: list[str] = []
    computes = not all(isinstance(op, VIEW_TYPES) for op in ops)
    for op in ops:
        if isinstance(op, VIEW_TYPES) if computes else not copies(op):
            continue
        short = re.sub(r"[^A-Za-z0-9_]", "_", op.name.split(".", 1)[-1])
        if short not in names:
            names.append(short)
    return "_".join(["fused", str(index), *names[:SUMMARY_OPS]])


def _group_io(group: FusionGroup) -> tuple[list[SSAValue], list[SSAValue]]:
    members = set(group.ops)
    inputs = dict.fromkeys(v for op in group.ops for v in op.operands if v.owner not in members)
    outputs = [
        r for op in group.ops for r in op.results if any(u.operation not in members for u in r.uses)
    ]
    return list(inputs), outputs


@dataclass(frozen=True)
class NNFusePass(ModulePass):
    """Group nn ops into nn.fusion regions (one kernel each) and route each group."""

    name = "nn-fuse"

    max_recompute: int = 8
    """The most non-view ops a group may evaluate redundantly (0 forbids recompute)."""
    route: str = "auto"
    """`auto` (the cost model), or `kernel`, `library_gemm` or `unfused` for every matmul group."""
    hbm_gbps: int = 3000
    """The GPU model's HBM bandwidth, GB/s."""
    gemm_tflops: int = 686
    """The GPU model's bf16/f16 matmul throughput, TFLOP/s."""
    sm_count: int = 132
    """The GPU model's number of SMs."""
    report: bool = False
    """Print the fusion report to stderr."""
    dot: str = ""
    """Write the fused graph as Graphviz DOT to this file (quote the path)."""

    def gpu(self) -> GPUSpec:
        """The GPU model: H100 defaults with this pass's overrides."""
        if self.hbm_gbps <= 0 or self.gemm_tflops <= 0 or self.sm_count <= 0:
            raise CompileError("nn-fuse: hbm_gbps, gemm_tflops and sm_count must be positive")
        return replace(
            H100,
            hbm_bytes_per_s=self.hbm_gbps * 1e9,
            matmul_flops_per_s_16bit=self.gemm_tflops * 1e12,
            sm_count=self.sm_count,
        )

    def route_for(self, group: FusionGroup, gpu: GPUSpec) -> str:
        """The route of a group: `kernel` unless it holds a matmul, else the option or
        the cost model's choice."""
        if group.info.kind != MATMUL:
            return KERNEL
        if self.route != "auto":
            return self.route
        inputs, outputs = _group_io(group)
        return choose_route(estimate_routes(group.ops, inputs, outputs, gpu))

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.route != "auto" and self.route not in ROUTES:
            raise CompileError(
                f"nn-fuse: unknown route '{self.route}' (expected auto, {', '.join(ROUTES)})"
            )
        if self.max_recompute < 0:
            raise CompileError("nn-fuse: max_recompute must be >= 0")
        gpu = self.gpu()
        counter = 0
        for fn in [f for f in op.walk() if isinstance(f, func.FuncOp)]:
            if len(fn.body.blocks) != 1:
                continue  # declarations, or CFGs nn-fuse does not handle
            counter = self._fuse_block(fn.body.block, gpu, counter)
        if self.report:
            sys.stderr.write(fusion_report(op, ReportTarget(gpu)))
        if self.dot:
            try:
                with open(self.dot, "w", encoding="utf-8") as f:
                    f.write(fusion_dot(op))
            except OSError as e:
                raise CompileError(f"nn-fuse: cannot write '{self.dot}': {e.strerror}") from None

    def _routed_groups(self, block: Block, gpu: GPUSpec) -> list[tuple[FusionGroup, str]]:
        """Groups and routes. A matmul routed `unfused` is excluded and the block grouped
        again, so its epilogue ops may join other groups (the residual add of a bypassed
        o-projection joins the rms_norm after it); a group made only of such epilogue ops
        stays unfused too (bypassed means left to eager)."""
        excluded: set[Operation] = set()
        bypassed_epilogue: set[Operation] = set()
        while True:
            routed = [
                (g, self.route_for(g, gpu))
                for g in find_groups(block, self.max_recompute, excluded)
            ]
            bypassed = [g for g, route in routed if route == UNFUSED and g.info.kind == MATMUL]
            if not bypassed:
                break
            for g in bypassed:
                excluded.update(op for op in g.ops if isinstance(op, nn.MatmulOp))
                bypassed_epilogue.update(op for op in g.ops if not isinstance(op, nn.MatmulOp))
        return [(g, UNFUSED if set(g.ops) <= bypassed_epilogue else route) for g, route in routed]

    def _fuse_block(self, block: Block, gpu: GPUSpec, counter: int) -> int:
        rematerialize_argument_casts(block)
        summaries: dict[nn.FusionOp, list[Operation]] = {}
        for group, route in self._routed_groups(block, gpu):
            if not group.launches or route == UNFUSED:
                continue
            fusion = outline_group(block, group.ops, nn.FusionKind(group.info.kind), route)
            summaries[fusion] = group.ops
        if not summaries:
            return counter
        sort_block_topologically(block)
        # number the groups in their final program order
        for op in block.ops:
            if isinstance(op, nn.FusionOp) and op in summaries:
                rest = dict(op.attributes)
                op.attributes.clear()
                op.kernel_name = StringAttr(kernel_name(counter, summaries[op]))
                op.attributes.update(rest)
                counter += 1
        return counter
