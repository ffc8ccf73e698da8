"""Property test: canonicalize, cse, nn-decompose and the standard pipeline keep the
results of random nn graphs (1-40 ops), checked with the reference interpreter.

The standard pipeline computes fusion groups in f32 (`nn-widen-intermediates`, the
numerics policy): it is compared with the fused graph after that pass, which
tests/test_numerics_policy.py checks against the graph itself."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from random_nn_graphs import RandomGraph, assert_same_results, nn_graphs

import fuseopt
from fuseopt.pipelines import FUSE, PRECISION

PIPELINES = ["canonicalize", "cse", "nn-decompose,canonicalize,cse", "standard"]
REFERENCE = {"standard": FUSE + "," + PRECISION}
"""The pipeline whose output a pipeline must reproduce (the input graph if not listed)."""


@pytest.mark.parametrize("pipeline", PIPELINES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=nn_graphs())
def test_pipeline_keeps_results(pipeline: str, graph: RandomGraph) -> None:
    before = fuseopt.parse(graph.text)
    if pipeline in REFERENCE:
        before = fuseopt.run_pipeline(before, REFERENCE[pipeline])
    after = fuseopt.run_pipeline(fuseopt.parse(graph.text), pipeline)
    args = graph.random_inputs(seed=1)
    expected = fuseopt.interpret(before, "main", *args)
    actual = fuseopt.interpret(after, "main", *args)
    # f32 graphs may go through bf16 casts: folding reorders nothing, so results
    # agree to within an f32 rounding of the same values
    assert_same_results(expected, actual, rtol=1e-5, atol=1e-6)
