"""The registry of fuseopt's dialects, passes and targets.

`fuse-opt` and the Python API look dialects, passes and targets up here, by name.
`FUSEOPT_UNIVERSE` exposes fuseopt's own entries to stock `xdsl-opt` through the
`xdsl.universe` entry point (xDSL's own passes such as `canonicalize` and `cse` are
not repeated there, since names may not clash).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.context import Context
from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe
from xdsl.utils.target import Target


def _nn() -> Dialect:
    from fuseopt.dialects.nn import NN

    return NN


def _tile() -> Dialect:
    from fuseopt.dialects.tile import TILE

    return TILE


def _convert_nn_to_tile() -> type[ModulePass]:
    from fuseopt.passes.convert_nn_to_tile.convert_nn_to_tile import ConvertNNToTilePass

    return ConvertNNToTilePass


def _nn_widen_intermediates() -> type[ModulePass]:
    from fuseopt.passes.nn_widen_intermediates import NNWidenIntermediatesPass

    return NNWidenIntermediatesPass


def _tile_promote() -> type[ModulePass]:
    from fuseopt.passes.tile_promote import TilePromotePass

    return TilePromotePass


def _nn_decompose() -> type[ModulePass]:
    from fuseopt.passes.nn_decompose import NNDecomposePass

    return NNDecomposePass


def _nn_match_attention() -> type[ModulePass]:
    from fuseopt.passes.nn_match_attention import NNMatchAttentionPass

    return NNMatchAttentionPass


def _nn_gather_picks() -> type[ModulePass]:
    from fuseopt.passes.nn_gather_picks import NNGatherPicksPass

    return NNGatherPicksPass


def _nn_split_reductions() -> type[ModulePass]:
    from fuseopt.passes.nn_split_reductions import NNSplitReductionsPass

    return NNSplitReductionsPass


def _nn_fuse() -> type[ModulePass]:
    from fuseopt.passes.nn_fuse.nn_fuse import NNFusePass

    return NNFusePass


FUSEOPT_DIALECTS: dict[str, Callable[[], Dialect]] = {"nn": _nn, "tile": _tile}
"""fuseopt's own dialects, by name."""

FUSEOPT_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "nn-match-attention": _nn_match_attention,
    "nn-decompose": _nn_decompose,
    "nn-gather-picks": _nn_gather_picks,
    "nn-split-reductions": _nn_split_reductions,
    "nn-fuse": _nn_fuse,
    "nn-widen-intermediates": _nn_widen_intermediates,
    "convert-nn-to-tile": _convert_nn_to_tile,
    "tile-promote": _tile_promote,
}
"""fuseopt's own passes, by flag."""


def _triton_target() -> type[Target]:
    from fuseopt.backends.triton.printer import TritonTarget

    return TritonTarget


def _cuda_target() -> type[Target]:
    from fuseopt.backends.cuda.printer import CudaTarget

    return CudaTarget


FUSEOPT_TARGETS: dict[str, Callable[[], type[Target]]] = {
    "triton": _triton_target,
    "cuda": _cuda_target,
}
"""fuseopt's own printers (`-t NAME`), by name."""


def _upstream_dialects() -> dict[str, Callable[[], Dialect]]:
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func
    from xdsl.dialects.math import Math
    from xdsl.dialects.memref import MemRef
    from xdsl.dialects.scf import Scf

    return {
        "builtin": lambda: Builtin,
        "func": lambda: Func,
        "arith": lambda: Arith,
        "math": lambda: Math,
        "scf": lambda: Scf,
        "memref": lambda: MemRef,
    }


def _upstream_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    def canonicalize() -> type[ModulePass]:
        from xdsl.transforms.canonicalize import CanonicalizePass

        return CanonicalizePass

    def cse() -> type[ModulePass]:
        from xdsl.transforms.common_subexpression_elimination import (
            CommonSubexpressionElimination,
        )

        return CommonSubexpressionElimination

    def dce() -> type[ModulePass]:
        from xdsl.transforms.dead_code_elimination import DeadCodeElimination

        return DeadCodeElimination

    return {"canonicalize": canonicalize, "cse": cse, "dce": dce}


def all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Every dialect fuse-opt understands: fuseopt's and the upstream ones it uses."""
    return {**_upstream_dialects(), **FUSEOPT_DIALECTS}


def all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every pass fuse-opt can run, by flag."""
    return {**_upstream_passes(), **FUSEOPT_PASSES}


def all_targets() -> dict[str, Callable[[], type[Target]]]:
    """Every `-t` target of fuse-opt: MLIR text plus fuseopt's printers."""
    from xdsl.targets import get_all_targets

    return {"mlir": get_all_targets()["mlir"], **FUSEOPT_TARGETS}


def make_context() -> Context:
    """A fresh xDSL context with every dialect of `all_dialects()` registered."""
    ctx = Context()
    for name, factory in all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx


FUSEOPT_UNIVERSE = Universe(
    all_dialects=FUSEOPT_DIALECTS, all_passes=FUSEOPT_PASSES, all_targets=FUSEOPT_TARGETS
)
"""Entry point for `xdsl-opt` (see pyproject's `xdsl.universe`)."""
