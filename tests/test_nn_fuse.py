"""nn-fuse keeps results and the tiling contract, on every FileCheck case and on random
graphs; its options, report and DOT output.

- every case of filecheck/passes/nn-fuse.mlir (one per rule, and the negative cases) is
  interpreted before and after nn-fuse, under each option set, on random inputs;
- hypothesis: random nn graphs of 1-40 ops (tests/random_nn_graphs.py) keep their results,
  verify, stay in dominance order (no cycle between groups), keep every op exactly once
  (no duplicated reduction or matmul) and follow the contract of `check_contract`;
- the incremental merge decisions (kept facts, ranked cycle check) agree with checking
  each union whole, on every FileCheck case and on random graphs of 10-60 ops;
- bad options are located CompileErrors; the report and DOT come out of the Python API
  and the CLI (report on stderr, IR on stdout).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from random_nn_graphs import RandomGraph, nn_graphs
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block

import fuseopt
from fuseopt.diagnostics import CompileError
from fuseopt.dialects import nn
from fuseopt.passes.nn_fuse.grouping import find_groups
from fuseopt.passes.nn_fuse.report import build_report, fusion_dot, fusion_report

ROOT = Path(__file__).resolve().parent.parent
CASES_FILE = ROOT / "filecheck" / "passes" / "nn-fuse.mlir"
MAX_INTERPRETED_ELEMENTS = 1 << 16
"""Cases with a bigger argument are structural only (checked by FileCheck)."""

OPTION_SETS = [
    "nn-fuse",
    "nn-fuse{max_recompute=0}",
    "nn-fuse{route=kernel}",
    "nn-fuse{route=library_gemm}",
    "nn-fuse{route=unfused}",
]
KINDS = {"pointwise", "reduction", "matmul"}
KERNEL_NAME = re.compile(r"fused_[0-9]+(_[A-Za-z0-9_]+)?")


def filecheck_cases() -> dict[str, str]:
    """The functions of the FileCheck file, by name (one module text each)."""
    cases = {}
    for chunk in CASES_FILE.read_text().split("// -----"):
        match = re.search(r"func\.func @(\w+)", chunk)
        if match:
            cases[match.group(1)] = chunk
    return cases


CASES = filecheck_cases()


def main_func(module: ModuleOp) -> func.FuncOp:
    """The first function of a module."""
    return next(op for op in module.ops if isinstance(op, func.FuncOp))


def arg_types(module: ModuleOp) -> list[TensorType]:
    """The argument types of the module's first function."""
    return list(main_func(module).function_type.inputs.data)  # type: ignore[arg-type]


def random_inputs(module: ModuleOp, seed: int) -> list[np.ndarray]:
    """Random inputs in [-2, 2] for the first function (weights too: never all ones)."""
    rng = np.random.default_rng(seed)
    return [
        rng.uniform(-2, 2, size=tuple(t.get_shape())).astype(np.float32) for t in arg_types(module)
    ]


def assert_same_results(expected: tuple, actual: tuple) -> None:  # noqa: ANN001
    """Fusion moves ops without reordering arithmetic: results agree bit for bit."""
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual, strict=True):
        assert e.shape == a.shape and e.dtype == a.dtype
        np.testing.assert_array_equal(a, e)


def assert_same_ops(after: ModuleOp, before: ModuleOp) -> None:
    """nn-fuse moves ops into fusions and adds or removes none, except casts: each
    further user of a widening argument cast gets a copy (nn_fuse/rematerialize.py),
    and copies of one cast inside one fusion are one op again (outlining)."""
    counts_after, counts_before = op_counts(after), op_counts(before)
    del counts_after["nn.cast"], counts_before["nn.cast"]
    assert counts_after == counts_before


def op_counts(module: ModuleOp) -> Counter[str]:
    """nn ops by name, outside and inside groups (constants are cloned into groups, and
    fusion/yield are the grouping itself, so they are left out)."""
    skip = ("nn.constant", "nn.fusion", "nn.yield")
    return Counter(
        op.name for op in module.walk() if op.name.startswith("nn.") and op.name not in skip
    )


def assert_dominance(block: Block) -> None:
    """Every operand of a top-level op is a block argument or defined by an earlier op
    (the verifier does not check this; a cycle between groups would break it). Groups
    are isolated from above, so their bodies need no check here."""
    defined = set(block.args)
    for op in block.ops:
        for v in op.operands:
            assert v in defined, f"{op.name} uses a value defined later"
        defined.update(op.results)


def check_contract(module: ModuleOp) -> None:
    """The contract with convert-nn-to-tile: each nn.fusion is a top-level op of a
    function with kernel_name (a unique identifier), kind and route attributes; matmul
    groups (and only they) hold matmuls; library_gemm only on matmul groups; no nested
    groups; groups hold only nn ops."""
    names = set()
    for fusion in [op for op in module.walk() if isinstance(op, nn.FusionOp)]:
        assert isinstance(fusion.parent_op(), func.FuncOp)
        attrs = {k: v.data for k, v in fusion.attributes.items()}  # type: ignore[attr-defined]
        assert KERNEL_NAME.fullmatch(attrs["kernel_name"]), attrs
        assert attrs["kernel_name"] not in names
        names.add(attrs["kernel_name"])
        assert attrs["kind"] in KINDS
        assert attrs["route"] in ("kernel", "library_gemm")
        inner = [op for op in fusion.body.block.ops]
        assert all(op.name.startswith("nn.") and not isinstance(op, nn.FusionOp) for op in inner)
        has_matmul = any(isinstance(op, nn.MatmulOp) for op in inner)
        assert has_matmul == (attrs["kind"] == "matmul")
        if attrs["route"] == "library_gemm":
            assert has_matmul
        if attrs["kind"] == "reduction":
            assert any(isinstance(op, nn.ReductionOp) for op in inner)
        assert isinstance(inner[-1], nn.YieldOp)
        # dead code (no canonicalize before nn-fuse) makes a group without results,
        # which convert-nn-to-tile skips
        assert len(fusion.results) == len(inner[-1].operands)


def fuse_and_check(text: str, pipeline: str, seed: int = 0) -> ModuleOp:
    """Run `pipeline` on `text` and check results, dominance, op counts and contract."""
    before = fuseopt.parse(text)
    after = fuseopt.run_pipeline(fuseopt.parse(text), pipeline)
    assert_dominance(main_func(after).body.block)
    check_contract(after)
    assert_same_ops(after, before)
    args = random_inputs(before, seed)
    expected = fuseopt.interpret(before, main_func(before).sym_name.data, *args)
    actual = fuseopt.interpret(after, main_func(after).sym_name.data, *args)
    assert_same_results(expected, actual)
    return after


def small(text: str) -> bool:
    """Whether every argument of the case is small enough to interpret quickly."""
    return all(
        int(np.prod(t.get_shape())) <= MAX_INTERPRETED_ELEMENTS
        for t in arg_types(fuseopt.parse(text))
    )


INTERPRETED = sorted(name for name, text in CASES.items() if small(text))


def test_every_filecheck_case_is_interpreted() -> None:
    # only the route case (GEMMs at real sizes) is structural
    assert set(CASES) - set(INTERPRETED) == {"routes"}
    assert len(INTERPRETED) >= 11


@pytest.mark.parametrize("pipeline", OPTION_SETS)
@pytest.mark.parametrize("case", INTERPRETED)
def test_filecheck_case_keeps_results(case: str, pipeline: str) -> None:
    fuse_and_check(CASES[case], pipeline)


def test_routes_case_at_small_sizes_keeps_results() -> None:
    # the routes case with every dimension divided by 64 (forced routes: the cost model
    # would leave these tiny GEMMs unfused)
    text = re.sub(
        r"(\d+)x(\d+)x",
        lambda m: f"{max(1, int(m[1]) // 64)}x{max(1, int(m[2]) // 64)}x",
        CASES["routes"],
    )
    for pipeline in ("nn-fuse{route=kernel}", "nn-fuse{route=library_gemm}"):
        after = fuse_and_check(text, pipeline)
        assert len([op for op in after.walk() if isinstance(op, nn.FusionOp)]) == 3


@pytest.mark.parametrize(
    "pipeline",
    ["nn-fuse", "nn-fuse{max_recompute=0}", "nn-fuse{route=kernel}", "nn-fuse{route=unfused}"],
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=nn_graphs(min_ops=1, max_ops=40))
def test_random_graphs(pipeline: str, graph: RandomGraph) -> None:
    before = fuseopt.parse(graph.text)
    after = fuseopt.run_pipeline(fuseopt.parse(graph.text), pipeline)
    assert_dominance(main_func(after).body.block)
    check_contract(after)
    assert_same_ops(after, before)
    args = graph.random_inputs(seed=3)
    expected = fuseopt.interpret(before, "main", *args)
    actual = fuseopt.interpret(after, "main", *args)
    for e, a in zip(expected, actual, strict=True):
        assert e.shape == a.shape and e.dtype == a.dtype
        np.testing.assert_array_equal(a, e)


def assert_incremental_decisions(module: ModuleOp) -> None:
    """nn-fuse decides each merge from the groups' kept facts (`check_union`) and ranks
    (the cycle check); `verify=True` takes every decision again the slow way, on the
    whole union (`check_group`) and the whole graph, and asserts they agree."""
    for fn in [op for op in module.walk() if isinstance(op, func.FuncOp)]:
        if len(fn.body.blocks) == 1:
            for max_recompute in (8, 0):
                find_groups(fn.body.block, max_recompute, verify=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_incremental_checks_agree_on_filecheck_cases(case: str) -> None:
    assert_incremental_decisions(fuseopt.parse(CASES[case]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=nn_graphs(min_ops=10, max_ops=60))
def test_incremental_checks_agree_on_random_graphs(graph: RandomGraph) -> None:
    module = fuseopt.run_pipeline(fuseopt.parse(graph.text), "nn-decompose,canonicalize,cse")
    assert_incremental_decisions(module)


@pytest.mark.parametrize(
    "options,message",
    [
        ("route=bogus", "unknown route 'bogus'"),
        ("max_recompute=-1", "max_recompute must be >= 0"),
        ("hbm_gbps=0", "must be positive"),
        ("sm_count=-3", "must be positive"),
        ('dot="/nonexistent-dir/x.dot"', "cannot write '/nonexistent-dir/x.dot'"),
    ],
)
def test_bad_options_are_clear_errors(options: str, message: str) -> None:
    with pytest.raises(CompileError, match=re.escape(message)):
        fuseopt.run_pipeline(fuseopt.parse(CASES["softmax_rows"]), f"nn-fuse{{{options}}}")


def routes_of(module: ModuleOp) -> list[tuple[str, str]]:
    """(kernel_name, route) of each group."""
    return [
        (op.attributes["kernel_name"].data, op.attributes["route"].data)  # type: ignore[union-attr]
        for op in module.walk()
        if isinstance(op, nn.FusionOp)
    ]


def test_gpu_overrides_reach_the_cost_model() -> None:
    text = CASES["routes"]
    default = routes_of(fuseopt.run_pipeline(fuseopt.parse(text), "nn-fuse"))
    assert default == [
        ("fused_0_matmul_relu", "kernel"),
        ("fused_1_matmul_add_relu", "library_gemm"),
    ]
    # a fiftieth of the bandwidth: every group is memory-bound, and one generated kernel
    # moves the fewest bytes (the tiny GEMM is no longer bypassed)
    slow_memory = routes_of(fuseopt.run_pipeline(fuseopt.parse(text), "nn-fuse{hbm_gbps=60}"))
    assert [r for _, r in slow_memory] == ["kernel"] * 3
    # 20 TFLOP/s: the mid GEMM is compute-bound, so a generated GEMM loses and a one-op
    # epilogue kernel saves less than its launch; the big GEMM's two-op epilogue still
    # pays after the library GEMM (the tie margin is absolute, not relative to the GEMM)
    slow_math = routes_of(fuseopt.run_pipeline(fuseopt.parse(text), "nn-fuse{gemm_tflops=20}"))
    assert slow_math == [("fused_0_matmul_add_relu", "library_gemm")]


def test_report_totals_and_rows() -> None:
    module = fuseopt.run_pipeline(fuseopt.parse(CASES["residual_rmsnorm"]), "nn-fuse")
    (rep,) = build_report(module)
    (row,) = rep.rows
    assert row.kind == "reduction" and row.route == "kernel"
    assert row.kernels_before > row.kernels_after == 1
    # after fusion: read x, r, w once; write both outputs once (bf16)
    assert row.bytes_after == (2 * 8 + 2 * 8 + 8 + 2 * 8 + 2 * 8) * 2
    assert row.bytes_before > row.bytes_after
    text = fusion_report(module)
    assert "nn-fuse report for @residual_rmsnorm" in text
    assert f"({row.bytes_before} -> {row.bytes_after} bytes)" in text


def test_report_counts_ops_outside_groups() -> None:
    module = fuseopt.run_pipeline(fuseopt.parse(CASES["gated_mlp"]), "nn-fuse")
    (rep,) = build_report(module)
    assert [r.name for r in rep.rows] == ["fused_0_matmul_silu_mul", "library GEMMs"]
    assert rep.rows[1].ops == ("nn.matmul",) and rep.rows[1].route == "library"
    assert rep.total("kernels_after") == 2


def test_dot_has_one_cluster_per_group() -> None:
    module = fuseopt.run_pipeline(fuseopt.parse(CASES["no_cycle"]), "nn-fuse")
    dot = fusion_dot(module)
    assert dot.startswith("digraph fusion {") and dot.rstrip().endswith("}")
    assert dot.count("{") == dot.count("}")
    groups = [op for op in module.walk() if isinstance(op, nn.FusionOp)]
    assert len(re.findall(r"subgraph cluster_\d+_\d+", dot)) == len(groups) == 2
    assert 'label="fused_0_exp (pointwise, kernel)"' in dot


def test_cli_report_goes_to_stderr_and_ir_to_stdout(tmp_path: Path) -> None:
    source = tmp_path / "case.mlir"
    source.write_text(CASES["layernorm_rows"])
    dot = tmp_path / "g.dot"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fuseopt.cli",
            str(source),
            "-p",
            f'nn-fuse{{report=true dot="{dot}"}}',
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "nn-fuse report for @layernorm_rows" in proc.stderr
    assert "HBM traffic saved" in proc.stderr and "Traceback" not in proc.stderr
    fused = fuseopt.parse(proc.stdout)
    assert len([op for op in fused.walk() if isinstance(op, nn.FusionOp)]) == 1
    assert "subgraph cluster_0_0" in dot.read_text()


def test_argument_casts_are_copied_only_for_users_that_absorb_them() -> None:
    """A matmul keeps the original cast (a copy per matmul would be a kernel writing the
    wide tensor each); the elementwise and reduction users get copies."""
    from fuseopt.passes.nn_fuse.rematerialize import rematerialize_argument_casts

    module = fuseopt.parse(
        """func.func @main(%x: tensor<4x8xbf16>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) {
  %c = nn.cast %x : tensor<4x8xbf16> -> tensor<4x8xf32>
  %m1 = nn.matmul %c, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %m2 = nn.matmul %c, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %e = nn.exp %c : tensor<4x8xf32>
  %s = nn.sum %c [1] : tensor<4x8xf32> -> tensor<4xf32>
  func.return %m1, %m2, %e, %s : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>
}"""
    )
    block = main_func(module).body.block
    assert rematerialize_argument_casts(block) == 2
    casts = [op for op in block.ops if isinstance(op, nn.CastOp)]
    assert len(casts) == 3
    matmuls = [op for op in block.ops if isinstance(op, nn.MatmulOp)]
    assert {m.lhs.owner for m in matmuls} == {casts[0]}  # both on the original
