"""The fusion report: what nn-fuse grouped, and what it saves.

`fusion_report(module, target)` returns, per function of a fused module, a table with
one row per `nn.fusion` group (its kind, route, number of ops, HBM bytes read and written
before and after fusion, kernels before and after, estimated time before and after),
rows for the ops left outside groups (`library GEMMs`: matmuls nn-fuse left to the GEMM
library; `unfused ops`: other ops, one generated kernel each), and the totals, like
FuseML's traffic tables; then the ops of each row. "Before" is eager PyTorch running the
same nn ops one kernel each. A line first names the cost model's GPU and why it was
chosen, and a legend last says what runs each route that appears (`ReportTarget`: the
caller knows the backend and device; `fuseopt.api` fills it in). The ops fuseopt's
frontend left to PyTorch never reach nn IR; `compiled.fusion_report()` lists them.
`fusion_dot(module)` and `graphs_dot(...)` draw the fused graph in Graphviz DOT with
each group as a cluster.

`nn-fuse{report=true}` prints the report to stderr (stdout carries the IR), and
`nn-fuse{dot=FILE}` writes the DOT file. Both work on any module, fused or not; the
numbers come from `cost_model.py`, computed from each group's body, so the report
is the same whether it is made by the pass or later by the frontend.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation, SSAValue

from fuseopt.dialects import nn
from fuseopt.passes.nn_fuse.cost_model import (
    H100,
    KERNEL,
    LIBRARY_GEMM,
    UNFUSED,
    GPUSpec,
    eager_op_reads,
    eager_op_s,
    eager_op_writes,
    estimate_routes,
    is_eager_kernel,
)

LIBRARY = "library"
"""The route of the `library GEMMs` row: matmuls nn-fuse left outside every group
(routed `unfused`: fusing would not pay), each one call of the GEMM library."""
PER_OP = "per_op"
"""The route of the `unfused ops` row: other ops outside every group, one generated
kernel each."""


@dataclass(frozen=True)
class ReportTarget:
    """What the report models: the cost model's GPU, why that one (`basis`), and what
    runs each route on the compile device, in words (`where`, `generated`, `library`).

    `routing_gpu` is the model nn-fuse chose the routes with when it is not `gpu` (the
    report then estimates times on `gpu` for routes chosen on another GPU, and says so).
    """

    gpu: GPUSpec = H100
    basis: str = "nn-fuse's model, set by its options hbm_gbps, gemm_tflops, sm_count"
    where: str = ""
    """The backend and device, e.g. "triton backend on NVIDIA H100 80GB HBM3"."""
    generated: str = "generated kernel"
    """What runs a generated kernel, e.g. "Triton kernel"."""
    library: str = "a GEMM library"
    """What runs a library GEMM, e.g. "cuBLAS via torch"."""
    routing_gpu: GPUSpec | None = None


DEFAULT_TARGET = ReportTarget()
"""The target of `nn-fuse{report=true}` without options: the default GPU model."""


@dataclass(frozen=True)
class GroupRow:
    """One line of the report: a fusion group, or ops left outside groups."""

    name: str
    kind: str
    route: str
    ops: tuple[str, ...]
    read_before: int
    written_before: int
    read_after: int
    written_after: int
    kernels_before: int
    kernels_after: int
    seconds_before: float
    seconds_after: float

    @property
    def bytes_before(self) -> int:
        """HBM bytes read and written before fusion."""
        return self.read_before + self.written_before

    @property
    def bytes_after(self) -> int:
        """HBM bytes read and written after fusion."""
        return self.read_after + self.written_after

    @property
    def fused(self) -> bool:
        """Whether the row is an nn.fusion group (not ops left outside groups)."""
        return self.route not in (LIBRARY, PER_OP)


@dataclass(frozen=True)
class FunctionReport:
    """The rows of one function: groups first, then the ops left outside groups."""

    name: str
    rows: tuple[GroupRow, ...]

    def total(self, field: str) -> float:
        """Sum of a numeric GroupRow field (or property) over the rows."""
        return sum(getattr(r, field) for r in self.rows)


def _text(attr: StringAttr | None, default: str = "?") -> str:
    return default if attr is None else attr.data


def _functions(module: ModuleOp) -> Iterator[tuple[str, Block]]:
    for op in module.walk():
        if isinstance(op, func.FuncOp) and op.body.blocks:
            yield op.sym_name.data, op.body.blocks.first  # type: ignore[misc]


def _fusion_row(op: nn.FusionOp, gpu: GPUSpec) -> GroupRow:
    body = op.body.block
    inner = [o for o in body.ops if not isinstance(o, nn.YieldOp | nn.ConstantOp)]
    term = body.last_op
    assert isinstance(term, nn.YieldOp)
    route = op.route_kind.value
    everything = [o for o in body.ops if not isinstance(o, nn.YieldOp)]
    estimates = estimate_routes(everything, list(body.args), list(term.values), gpu)
    before = estimates[UNFUSED]
    after = estimates.get(route, estimates[KERNEL])
    return GroupRow(
        _text(op.kernel_name, "nn.fusion"),
        _text(op.kind),
        route,
        tuple(o.name for o in inner),
        before.read_bytes,
        before.write_bytes,
        after.read_bytes,
        after.write_bytes,
        before.kernels,
        after.kernels,
        before.seconds,
        after.seconds,
    )


def _leftover_row(name: str, kind: str, route: str, ops: list[Operation], gpu: GPUSpec) -> GroupRow:
    """A row of ops outside groups: each runs as in eager, so before equals after."""
    reads = sum(eager_op_reads(op) for op in ops)
    writes = sum(eager_op_writes(op) for op in ops)
    seconds = sum(eager_op_s(op, gpu) for op in ops)
    names = tuple(op.name for op in ops)
    return GroupRow(
        name, kind, route, names, reads, writes, reads, writes, len(ops), len(ops), seconds, seconds
    )


def _function_report(name: str, block: Block, gpu: GPUSpec) -> FunctionReport:
    rows = [_fusion_row(op, gpu) for op in block.ops if isinstance(op, nn.FusionOp)]
    outside = [
        op
        for op in block.ops
        if op.dialect_name() == "nn" and not isinstance(op, nn.FusionOp) and is_eager_kernel(op)
    ]
    gemms = [op for op in outside if isinstance(op, nn.MatmulOp)]
    others = [op for op in outside if not isinstance(op, nn.MatmulOp)]
    if gemms:
        rows.append(_leftover_row("library GEMMs", "matmul", LIBRARY, gemms, gpu))
    if others:
        rows.append(_leftover_row("unfused ops", "-", PER_OP, others, gpu))
    return FunctionReport(name, tuple(rows))


def build_report(module: ModuleOp, gpu: GPUSpec = H100) -> list[FunctionReport]:
    """The report's data, one FunctionReport per function with a body."""
    return [_function_report(name, block, gpu) for name, block in _functions(module)]


def _fmt_row(
    name: str, kind: str, route: str, ops: int, numbers: list[int], kernels: str, micros: str
) -> str:
    cols = " ".join(f"{n:>14}" for n in numbers)
    return f"{name:<34} {kind:<9} {route:<12} {ops:>3} {cols} {kernels:>9} {micros:>16}"


def model_line(target: ReportTarget) -> str:
    """The line naming the cost model's GPU, why it was chosen, and its figures."""
    gpu = target.gpu
    line = (
        f"cost model: {gpu.name} ({target.basis}): {gpu.hbm_bytes_per_s / 1e9:.0f} GB/s HBM, "
        f"{gpu.matmul_flops_per_s_16bit / 1e12:.0f} TFLOP/s 16-bit GEMM, {gpu.sm_count} SMs"
    )
    routing = target.routing_gpu
    if routing is not None and routing != gpu:
        line += f"; nn-fuse chose the routes with its {routing.name} model"
    return line


def format_tables(reports: Sequence[FunctionReport], gpu: GPUSpec = H100) -> str:
    """The per-function tables (see the module docstring), times on `gpu`."""
    header = (
        f"{'group':<34} {'kind':<9} {'route':<12} {'ops':>3} {'read before':>14} "
        f"{'written before':>14} {'read after':>14} {'written after':>14} {'kernels':>9} "
        f"{'est. us':>16}"
    )
    lines = []
    for rep in reports:
        lines.append(f"nn-fuse report for @{rep.name} (HBM bytes; est. us on the {gpu.name} model)")
        lines.append(header)
        lines.extend(_row_line(r) for r in rep.rows)
        lines.extend(_total_lines(rep))
        lines.extend(f"  {r.name}: {', '.join(r.ops)}" for r in rep.rows)
    return "\n".join(lines) + "\n"


def _row_line(r: GroupRow) -> str:
    return _fmt_row(
        r.name,
        r.kind,
        r.route,
        len(r.ops),
        [r.read_before, r.written_before, r.read_after, r.written_after],
        f"{r.kernels_before} -> {r.kernels_after}",
        f"{r.seconds_before * 1e6:.1f} -> {r.seconds_after * 1e6:.1f}",
    )


def _total_lines(rep: FunctionReport) -> list[str]:
    fields = ("read_before", "written_before", "read_after", "written_after")
    totals = [int(rep.total(f)) for f in fields]
    kb, ka = int(rep.total("kernels_before")), int(rep.total("kernels_after"))
    sb, sa = rep.total("seconds_before") * 1e6, rep.total("seconds_after") * 1e6
    ops = sum(len(r.ops) for r in rep.rows)
    total = _fmt_row("total", "", "", ops, totals, f"{kb} -> {ka}", f"{sb:.1f} -> {sa:.1f}")
    before, after = totals[0] + totals[1], totals[2] + totals[3]
    saved = 100.0 * (before - after) / before if before else 0.0
    return [
        total,
        f"HBM traffic saved: {saved:.1f}% ({before} -> {after} bytes); kernels: {kb} -> {ka}",
    ]


def route_legend(routes: Iterable[str], target: ReportTarget) -> str:
    """What runs each of `routes` (in the order of nn.Route, then the rows outside
    groups) on the target's device, one line each; empty when `routes` is."""
    gen, lib = target.generated, target.library
    meaning = {
        KERNEL: f"one {gen} per group, a GEMM in the group included",
        LIBRARY_GEMM: f"GEMM by {lib}, then one {gen} for the epilogue",
        UNFUSED: f"the group's ops one at a time (one {gen} each, GEMMs by {lib})",
        LIBRARY: f"GEMM alone by {lib}; nn-fuse left it unfused (fusing would not pay)",
        PER_OP: f"an op outside every group, one {gen} each",
    }
    used = set(routes)
    where = f" ({target.where})" if target.where else ""
    lines = [f"  {route:<12}  {text}" for route, text in meaning.items() if route in used]
    return "\n".join([f"routes{where}:", *lines]) + "\n" if lines else ""


def format_report(reports: Sequence[FunctionReport], target: ReportTarget = DEFAULT_TARGET) -> str:
    """The report as text: the cost model line, the tables, the routes' legend."""
    routes = [r.route for rep in reports for r in rep.rows]
    return (
        model_line(target)
        + "\n"
        + format_tables(reports, target.gpu)
        + route_legend(routes, target)
    )


def fusion_report(module: ModuleOp, target: ReportTarget = DEFAULT_TARGET) -> str:
    """The fusion report of `module` as text (`nn-fuse{report=true}` prints it)."""
    return format_report(build_report(module, target.gpu), target)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _DotWriter:
    """Builds one Graphviz digraph from the functions of one or more modules: node ids
    and cluster names are unique across all of them."""

    def __init__(self) -> None:
        self.out = ["digraph fusion {", '  node [shape=box, fontname="monospace"];']
        self.edges: list[str] = []
        self.ids: dict[SSAValue, str] = {}
        self.nodes = 0

    def node(self, label: str, indent: str, shape: str = "box") -> str:
        """A new node; returns its id."""
        name = f"n{self.nodes}"
        self.nodes += 1
        self.out.append(f"{indent}{name} [label={_quote(label)}, shape={shape}];")
        return name

    def edge(self, v: SSAValue, dst: str) -> None:
        """An edge from the node of `v` (if drawn) to `dst`. Edges are written after every
        cluster: an edge inside a cluster's braces would pull its outside end into it."""
        if v in self.ids:
            self.edges.append(f"  {self.ids[v]} -> {dst} [label={_quote(str(v.type))}];")

    def op(self, op: Operation, indent: str) -> None:
        """A node for `op`, with edges from its operands."""
        n = self.node(op.name, indent)
        for v in op.operands:
            self.edge(v, n)
        for r in op.results:
            self.ids[r] = n

    def function(self, name: str, block: Block, cluster: str, indent: str) -> None:
        """The function `name` as `subgraph cluster_<cluster>func...`, its groups inside."""
        inner = indent + "  "
        self.out.append(f"{indent}subgraph cluster_func{cluster} {{")
        self.out.append(f"{inner}label={_quote('@' + name)};")
        for arg in block.args:
            self.ids[arg] = self.node(
                f"%{arg.name_hint or 'arg' + str(arg.index)}", inner, "ellipse"
            )
        for g_index, op in enumerate(block.ops):
            if isinstance(op, nn.FusionOp):
                self.group(op, f"{cluster}_{g_index}", inner)
            else:
                self.op(op, inner)
        self.out.append(f"{indent}}}")

    def group(self, op: nn.FusionOp, cluster: str, indent: str) -> None:
        """An nn.fusion as `subgraph cluster_<cluster>`, labelled with its kernel name,
        kind and route."""
        inner = indent + "  "
        label = f"{_text(op.kernel_name)} ({_text(op.kind)}, {_text(op.route)})"
        self.out.append(f"{indent}subgraph cluster_{cluster} {{")
        self.out.append(f"{inner}label={_quote(label)}; style=filled; fillcolor=lightblue;")
        body = op.body.block
        for arg, v in zip(body.args, op.inputs, strict=True):
            if v in self.ids:
                self.ids[arg] = self.ids[v]
        yielded: list[SSAValue] = []
        for member in body.ops:
            if isinstance(member, nn.YieldOp):
                yielded = list(member.values)
            else:
                self.op(member, inner)
        self.out.append(f"{indent}}}")
        for r, v in zip(op.results, yielded, strict=True):
            if v in self.ids:
                self.ids[r] = self.ids[v]

    def text(self) -> str:
        """The digraph: the clusters, then the edges."""
        return "\n".join([*self.out, *self.edges, "}"]) + "\n"


def fusion_dot(module: ModuleOp) -> str:
    """The functions of `module` as a Graphviz digraph: ops are boxes, arguments are
    ellipses, edges follow values, and each nn.fusion group is a cluster labelled with
    its kernel name, kind and route."""
    dot = _DotWriter()
    for f_index, (name, block) in enumerate(_functions(module)):
        dot.function(name, block, str(f_index), "  ")
    return dot.text()


def graphs_dot(graphs: Sequence[tuple[str, Sequence[ModuleOp]]]) -> str:
    """Several graphs in one digraph, as `fusion_dot` draws a module: each graph is a
    cluster labelled with its name (`forward0`, ...) holding the functions of its
    modules (the compiled regions of one graph)."""
    dot = _DotWriter()
    for g_index, (label, modules) in enumerate(graphs):
        dot.out.append(f"  subgraph cluster_graph{g_index} {{")
        dot.out.append(f"    label={_quote(label)};")
        functions = [f for module in modules for f in _functions(module)]
        for f_index, (name, block) in enumerate(functions):
            dot.function(name, block, f"g{g_index}_{f_index}", "    ")
        dot.out.append("  }")
    return dot.text()
