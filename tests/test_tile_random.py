"""Property tests: random nn graphs (1-40 ops, tests/random_nn_graphs.py) lowered to tile
IR, with and without fusion and with tiny forced tiles (every edge ragged, every row
looped, every K looped), compute what the nn reference computes; and every fusion
nn-fuse makes of them becomes exactly one tile.kernel."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from random_nn_graphs import RandomGraph, assert_same_results, interpret_both_ways, nn_graphs

import fuseopt
from fuseopt.dialects import nn, tile

TINY = (
    "convert-nn-to-tile{block=2 block-rows=2 block-cols=2 block-m=2 block-n=2 block-k=2 "
    "group-m=2 max-row-block=2}"
)
SPLIT_SMALL = (
    "nn-split-reductions{min-length=4 min-chunk=2 max-chunk=4 programs=2 "
    "column-programs=8 column-min-chunk=2 column-min-elements=8}"
)
"""nn-split-reductions with thresholds the random graphs' small shapes cross: rows of 4
or more and column reductions of 8 elements or more split when their sizes allow."""
PIPELINES = [
    "convert-nn-to-tile",
    "nn-fuse,convert-nn-to-tile,tile-promote",
    f"nn-fuse,{TINY},tile-promote",
    f"{SPLIT_SMALL},nn-fuse,convert-nn-to-tile,tile-promote",
]


@pytest.mark.parametrize(
    "pipeline", PIPELINES, ids=["unfused", "fused", "fused-tiny-tiles", "split-fused"]
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=nn_graphs())
def test_tiled_graph_matches_reference(pipeline: str, graph: RandomGraph) -> None:
    before = fuseopt.parse(graph.text)
    args = graph.random_inputs(seed=2)
    expected = fuseopt.interpret(before, "main", *args)
    after = fuseopt.run_pipeline(fuseopt.parse(graph.text), pipeline)
    for actual in interpret_both_ways(after, "main", *args):
        # tiles sum in a different order than the reference (and through bf16
        # casts a last-bit difference can grow): compare to a few f32/bf16 ulps
        assert_same_results(expected, actual, rtol=1e-4, atol=1e-5)


OPERAND_IN_EPILOGUE = """
func.func @main(%a0: tensor<3x4x1xf32>, %a2: tensor<1x2xf32>) -> (tensor<3x4x2xf32>) {
    %v8 = nn.matmul %a0, %a2 : tensor<3x4x1xf32>, tensor<1x2xf32> -> tensor<3x4x2xf32>
    %v9 = nn.broadcast %a0 : tensor<3x4x1xf32> -> tensor<3x4x2xf32>
    %v20 = nn.neg %v9 : tensor<3x4x2xf32>
    %v40 = nn.compare lt, %v20, %v8 : tensor<3x4x2xf32>
    %v41 = nn.select %v40, %v20, %v8 : tensor<3x4x2xf32>
    func.return %v41 : tensor<3x4x2xf32>
}
"""


@pytest.mark.parametrize("pipeline", [*PIPELINES, "nn-fuse{route=kernel},convert-nn-to-tile"])
def test_matmul_operand_read_by_its_epilogue(pipeline: str) -> None:
    """Found by the property test: A of a K = 1 matmul also broadcast into the epilogue
    (the kernel takes A twice, in the K loop's view and in the epilogue's)."""
    graph = RandomGraph(OPERAND_IN_EPILOGUE, [(3, 4, 1), (1, 2)], 5)
    args = graph.random_inputs(seed=2)
    expected = fuseopt.interpret(fuseopt.parse(graph.text), "main", *args)
    after = fuseopt.run_pipeline(fuseopt.parse(graph.text), pipeline)
    for actual in interpret_both_ways(after, "main", *args):
        assert_same_results(expected, actual, rtol=1e-4, atol=1e-5)


def kernels_per_fusion(module_text: str, pipeline: str) -> dict[str, list[str]]:
    """For every `nn.fusion` that nn-fuse makes of `module_text` (by kernel_name): the
    tile.kernels convert-nn-to-tile then emits for it (a fallback split would add
    `<name>_1`, `<name>_2`, ...). Fusions without results (dead code) are left out."""
    fused = fuseopt.run_pipeline(fuseopt.parse(module_text), pipeline)
    names = [
        op.attributes["kernel_name"].data
        for op in fused.walk()
        if isinstance(op, nn.FusionOp) and op.results
    ]
    lowered = fuseopt.run_pipeline(fused, "convert-nn-to-tile")
    kernels = [op.sym_name.data for op in lowered.walk() if isinstance(op, tile.KernelOp)]
    return {
        n: [k for k in kernels if k == n or re.fullmatch(re.escape(n) + r"_\d+", k)] for n in names
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=nn_graphs())
def test_every_fusion_is_one_kernel(graph: RandomGraph) -> None:
    """nn-fuse forms only groups the tiler maps onto one iteration space, so each fusion
    becomes exactly one tile.kernel (matmuls on the kernel route, so none is a library
    call)."""
    split = {
        name: ks
        for name, ks in kernels_per_fusion(graph.text, "nn-fuse{route=kernel}").items()
        if len(ks) != 1
    }
    assert not split, f"fusions not lowered to exactly one kernel: {split}"
