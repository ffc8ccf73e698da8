"""The named pass pipelines, in one place.

`fuse-opt -p "$(python -c 'import fuseopt.pipelines as p; print(p.STANDARD)')"` runs
the same passes as the Python API. Each later stage (nn-fuse, nn-to-tile, ...) is
appended here as it lands.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline

from fuseopt import registry
from fuseopt.diagnostics import verify_module

FUSE = "nn-decompose,canonicalize,cse,nn-fuse"
"""The nn-level pipeline: composites into primitives, cleanup, then fusion groups."""

STANDARD = FUSE + ",convert-nn-to-tile,tile-promote"
"""The standard pipeline: the fuse pipeline, then tiling and memory promotion (tile IR)."""

PIPELINES: dict[str, str] = {"fuse": FUSE, "standard": STANDARD}
"""Named pipelines, by name."""


def run_pipeline(module: ModuleOp, spec: str = STANDARD, ctx: Context | None = None) -> ModuleOp:
    """Run the pass pipeline `spec` (a `-p` string or a name in PIPELINES) on `module`
    in place, verifying after every pass, and return it."""
    spec = PIPELINES.get(spec, spec)
    ctx = ctx or registry.make_context()
    pipeline = PassPipeline.parse_spec(registry.all_passes(), spec)
    for p in pipeline.passes:
        p.apply(ctx, module)
        verify_module(module)
    return module
