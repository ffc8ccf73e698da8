"""Every workload of the workload suite, as the FX frontend captures it (benchmarks/workloads:
mlp_stacked and the Llama block included, attention converted to nn ops), lowered to
tile IR and run by the tile interpreter program by program: each compiled region must
compute what the nn reference computes on random inputs, under the heuristic tile sizes,
under tiny forced tiles (every edge ragged, every row looped, every K looped) and with
every matmul group a generated kernel (tile.dot) rather than a library GEMM.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from random_nn_graphs import assert_same_results, interpret_both_ways
from xdsl.dialects import func

import fuseopt
from benchmarks.workloads import all_workloads
from fuseopt.dialects import nn, tile
from fuseopt.pipelines import STANDARD

TINY_DIMS = {
    "rmsnorm": {"batch": 1, "seq": 3, "hidden": 24},
    "rmsnorm_silu_gate": {"batch": 1, "seq": 3, "hidden": 24},
    "softmax": {"rows": 5, "cols": 40},
    "layernorm": {"rows": 5, "hidden": 40},
    "gelu_bias": {"rows": 5, "cols": 40},
    "rmsnorm_rope": {"batch": 1, "seq": 3, "heads": 2, "head_dim": 8},
    "mlp": {"m": 7, "d": 16, "di": 24},
    "mlp_heavy": {"m": 7, "d": 16, "di": 24},
    "mlp_stacked": {"m": 7, "d": 16, "di": 16},
    "gated_mlp": {"m": 7, "d": 16, "di": 24},
    "llama_block": {"hidden": 32, "heads": 2, "seq": 5, "di": 48},
}
"""Small, odd sizes: ragged edges under every tile size."""
TINY_TILES = STANDARD.replace(
    "convert-nn-to-tile",
    "convert-nn-to-tile{block=8 block-rows=2 block-cols=8 block-m=4 block-n=4 block-k=4 "
    "group-m=2 max-row-block=8}",
)
KERNEL_ROUTE = STANDARD.replace("nn-fuse", "nn-fuse{route=kernel}")
"""Every matmul group a generated kernel (tiny GEMMs otherwise go to the library)."""
WORKLOADS = {w.name: w for w in all_workloads()}


def test_every_workload_has_tiny_dims() -> None:
    assert set(TINY_DIMS) == set(WORKLOADS)


def captured_regions(name: str) -> list[str]:
    """The nn IR of every region fuseopt.compile captures for workload `name` (f32)."""
    w = WORKLOADS[name]
    dims, cpu = TINY_DIMS[name], torch.device("cpu")
    model = w.make_model(dims, torch.float32, cpu, 0)
    inputs = w.make_inputs(dims, torch.float32, cpu, 1)
    with torch.no_grad():  # inference graphs: attention's logsumexp is not kept
        compiled = fuseopt.compile(model, inputs, backend="interpret", attention="nn")
        compiled(*inputs)
    assert not compiled.fallbacks, [f.reason for f in compiled.fallbacks]
    return [str(r.imported) for r in compiled.regions]


def random_inputs(module, seed: int) -> list[np.ndarray]:  # noqa: ANN001 - a ModuleOp
    """Random f32 inputs in [-1.5, 1.5] for the module's function (weights included)."""
    rng = np.random.default_rng(seed)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    return [
        rng.uniform(-1.5, 1.5, size=tuple(t.get_shape())).astype(np.float32)
        for t in fn.function_type.inputs.data
    ]


@pytest.mark.parametrize(
    "pipeline",
    [STANDARD, TINY_TILES, KERNEL_ROUTE],
    ids=["heuristic", "tiny-tiles", "kernel-route"],
)
@pytest.mark.parametrize("name", sorted(TINY_DIMS))
def test_workload_regions_tiled_match_reference(name: str, pipeline: str) -> None:
    for text in captured_regions(name):
        reference = fuseopt.parse(text)
        fn = next(op for op in reference.ops if isinstance(op, func.FuncOp))
        args = random_inputs(reference, seed=3)
        expected = fuseopt.interpret(reference, fn.sym_name.data, *args)
        tiled = fuseopt.run_pipeline(fuseopt.parse(text), pipeline)
        assert any(isinstance(op, tile.KernelOp) for op in tiled.walk())
        assert not [
            op
            for op in tiled.walk()
            if op.dialect_name() == "nn" and tile.enclosing_kernel(op) is None
        ], "nn ops left on the host"
        for actual in interpret_both_ways(tiled, fn.sym_name.data, *args):
            assert_same_results(expected, actual, rtol=1e-4, atol=1e-5)
        assert not any(isinstance(op, nn.FusionOp) for op in tiled.walk())
