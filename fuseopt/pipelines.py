"""The named pass pipelines, in one place.

`fuse-opt -p "$(python -c 'import fuseopt.pipelines as p; print(p.STANDARD)')"` runs
the same passes as the Python API. Each later stage (nn-fuse, nn-to-tile, ...) is
appended here as it lands.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline
from xdsl.utils.exceptions import ArgSpecParseError

from fuseopt import registry
from fuseopt.diagnostics import CompileError, verify_module

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
    try:
        pipeline = PassPipeline.parse_spec(registry.all_passes(), spec)
    except ArgSpecParseError as e:  # a BaseException in xDSL: user code must be able to catch it
        message = " ".join(line.strip() for line in str(e).split("\n")[1:] if line.strip())
        raise CompileError(f"bad pass pipeline {spec!r}: {message}") from None
    except (ValueError, KeyError) as e:  # unknown pass, bad option
        raise CompileError(f"bad pass pipeline {spec!r}: {e}") from None
    for p in pipeline.passes:
        p.apply(ctx, module)
        verify_module(module)
    return module
