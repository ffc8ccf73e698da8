"""Property test: random nn graphs (1-40 ops, tests/random_nn_graphs.py) lowered to tile
IR, with and without fusion and with tiny forced tiles (every edge ragged, every row
looped, every K looped), compute what the nn reference computes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from random_nn_graphs import RandomGraph, assert_same_results, nn_graphs

import fuseopt

TINY = (
    "convert-nn-to-tile{block=2 block-rows=2 block-cols=2 block-m=2 block-n=2 block-k=2 "
    "group-m=2 max-row-block=2}"
)
PIPELINES = [
    "convert-nn-to-tile",
    "nn-fuse,convert-nn-to-tile,tile-promote",
    f"nn-fuse,{TINY},tile-promote",
]


@pytest.mark.parametrize("pipeline", PIPELINES, ids=["unfused", "fused", "fused-tiny-tiles"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=nn_graphs())
def test_tiled_graph_matches_reference(pipeline: str, graph: RandomGraph) -> None:
    before = fuseopt.parse(graph.text)
    args = graph.random_inputs(seed=2)
    expected = fuseopt.interpret(before, "main", *args)
    after = fuseopt.run_pipeline(fuseopt.parse(graph.text), pipeline)
    actual = fuseopt.interpret(after, "main", *args)
    # tiles sum in a different order than the reference (and through bf16
    # casts a last-bit difference can grow): compare to a few f32/bf16 ulps
    assert_same_results(expected, actual, rtol=1e-4, atol=1e-5)
