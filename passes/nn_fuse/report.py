"""The fusion report: what nn-fuse grouped, and what it saves.

`fusion_report(module)` returns a table per function of a fused module, one row per
`nn.fusion` group (its kind, route, number of ops, HBM bytes read and written before and
after fusion, kernels before and after, estimated time before and after), one `eager`
row for the ops left outside groups, and the totals, like FuseML's traffic tables; then
the ops of each row. "Before" is eager PyTorch running the same nn ops one kernel each.
`fusion_dot(module)` draws the fused graph in Graphviz DOT with each group as a cluster.

`nn-fuse{report=true}` prints the table to stderr (stdout carries the IR), and
`nn-fuse{dot=FILE}` writes the DOT file. Both work on any module, fused or not; the
numbers come from `cost_model.py`, computed from each group's body, so the report
is the same whether it is made by the pass or later by the frontend.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, SSAValue

from fuseopt.dialects import nn
from fuseopt.passes.nn_fuse.cost_model import (
    H100,
    UNFUSED,
    GPUSpec,
    eager_op_reads,
    eager_op_s,
    eager_op_writes,
    estimate_routes,
    is_eager_kernel,
)


@dataclass(frozen=True)
class GroupRow:
    """One line of the report: a fusion group, or the ops left to eager."""

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


@dataclass(frozen=True)
class FunctionReport:
    """The rows of one function, groups first, then the eager row (if any)."""

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
    after = estimates.get(route, estimates["kernel"])
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


def build_report(module: ModuleOp, gpu: GPUSpec = H100) -> list[FunctionReport]:
    """The report's data, one FunctionReport per function with a body."""
    reports = []
    for name, block in _functions(module):
        rows = [_fusion_row(op, gpu) for op in block.ops if isinstance(op, nn.FusionOp)]
        eager = [
            op
            for op in block.ops
            if op.dialect_name() == "nn" and not isinstance(op, nn.FusionOp) and is_eager_kernel(op)
        ]
        if eager:
            reads = sum(eager_op_reads(op) for op in eager)
            writes = sum(eager_op_writes(op) for op in eager)
            seconds = sum(eager_op_s(op, gpu) for op in eager)
            rows.append(
                GroupRow(
                    "eager",
                    "-",
                    UNFUSED,
                    tuple(op.name for op in eager),
                    reads,
                    writes,
                    reads,
                    writes,
                    len(eager),
                    len(eager),
                    seconds,
                    seconds,
                )
            )
        reports.append(FunctionReport(name, tuple(rows)))
    return reports


def _fmt_row(
    name: str, kind: str, route: str, ops: int, numbers: list[int], kernels: str, micros: str
) -> str:
    cols = " ".join(f"{n:>14}" for n in numbers)
    return f"{name:<34} {kind:<9} {route:<12} {ops:>3} {cols} {kernels:>9} {micros:>16}"


def format_report(reports: list[FunctionReport], gpu: GPUSpec = H100) -> str:
    """The report as a fixed-width text table (see the module docstring)."""
    header = (
        f"{'group':<34} {'kind':<9} {'route':<12} {'ops':>3} {'read before':>14} "
        f"{'written before':>14} {'read after':>14} {'written after':>14} {'kernels':>9} "
        f"{'est. us':>16}"
    )
    lines = []
    for rep in reports:
        lines.append(
            f"nn-fuse report for @{rep.name} "
            f"({gpu.name} model, {gpu.hbm_bytes_per_s / 1e9:.0f} GB/s; HBM bytes)"
        )
        lines.append(header)
        for r in rep.rows:
            lines.append(
                _fmt_row(
                    r.name,
                    r.kind,
                    r.route,
                    len(r.ops),
                    [r.read_before, r.written_before, r.read_after, r.written_after],
                    f"{r.kernels_before} -> {r.kernels_after}",
                    f"{r.seconds_before * 1e6:.1f} -> {r.seconds_after * 1e6:.1f}",
                )
            )
        fields = ("read_before", "written_before", "read_after", "written_after")
        totals = [int(rep.total(f)) for f in fields]
        kb, ka = int(rep.total("kernels_before")), int(rep.total("kernels_after"))
        sb, sa = rep.total("seconds_before") * 1e6, rep.total("seconds_after") * 1e6
        lines.append(
            _fmt_row(
                "total",
                "",
                "",
                sum(len(r.ops) for r in rep.rows),
                totals,
                f"{kb} -> {ka}",
                f"{sb:.1f} -> {sa:.1f}",
            )
        )
        before, after = totals[0] + totals[1], totals[2] + totals[3]
        saved = 100.0 * (before - after) / before if before else 0.0
        lines.append(
            f"HBM traffic saved: {saved:.1f}% ({before} -> {after} bytes); kernels: {kb} -> {ka}"
        )
        for r in rep.rows:
            lines.append(f"  {r.name}: {', '.join(r.ops)}")
    return "\n".join(lines) + "\n"


def fusion_report(module: ModuleOp, gpu: GPUSpec = H100) -> str:
    """The fusion report of `module` as text (what `compiled.fusion_report()` shows)."""
    return format_report(build_report(module, gpu), gpu)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _type_str(v: SSAValue) -> str:
    return str(v.type)


def fusion_dot(module: ModuleOp) -> str:
    """The functions of `module` as a Graphviz digraph: ops are boxes, arguments are
    ellipses, edges follow values, and each nn.fusion group is a cluster labelled with
    its kernel name, kind and route."""
    out = ["digraph fusion {", '  node [shape=box, fontname="monospace"];']
    ids: dict[SSAValue, str] = {}
    counter = iter(range(1 << 30))

    def node(label: str, indent: str, shape: str = "box") -> str:
        name = f"n{next(counter)}"
        out.append(f"{indent}{name} [label={_quote(label)}, shape={shape}];")
        return name

    edges: list[str] = []

    def edge(v: SSAValue, dst: str, indent: str) -> None:
        # edges are written after every cluster: an edge inside a cluster's braces
        # would pull its outside end into the cluster
        if v in ids:
            edges.append(f"  {ids[v]} -> {dst} [label={_quote(_type_str(v))}];")

    for f_index, (fname, block) in enumerate(_functions(module)):
        out.append(f"  subgraph cluster_func{f_index} {{")
        out.append(f"    label={_quote('@' + fname)};")
        for arg in block.args:
            ids[arg] = node(f"%{arg.name_hint or 'arg' + str(arg.index)}", "    ", "ellipse")
        for g_index, op in enumerate(block.ops):
            if not isinstance(op, nn.FusionOp):
                n = node(op.name, "    ")
                for v in op.operands:
                    edge(v, n, "    ")
                for r in op.results:
                    ids[r] = n
                continue
            label = f"{_text(op.kernel_name)} ({_text(op.kind)}, {_text(op.route)})"
            out.append(f"    subgraph cluster_{f_index}_{g_index} {{")
            out.append(f"      label={_quote(label)}; style=filled; fillcolor=lightblue;")
            body = op.body.block
            for arg, v in zip(body.args, op.inputs, strict=True):
                if v in ids:
                    ids[arg] = ids[v]
            yielded: list[SSAValue] = []
            for inner in body.ops:
                if isinstance(inner, nn.YieldOp):
                    yielded = list(inner.values)
                    continue
                n = node(inner.name, "      ")
                for v in inner.operands:
                    edge(v, n, "      ")
                for r in inner.results:
                    ids[r] = n
            out.append("    }")
            for r, v in zip(op.results, yielded, strict=True):
                if v in ids:
                    ids[r] = ids[v]
        out.append("  }")
    out.extend(edges)
    out.append("}")
    return "\n".join(out) + "\n"
