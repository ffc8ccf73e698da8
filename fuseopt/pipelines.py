"""The named pass pipelines, in one place, as pass objects.

`pipeline_passes(name, lowering)` builds a named pipeline as pass objects: "fuse" (the
nn level) or "standard" (fuse, then the tile stage that a `LoweringOptions` builds: the
numerics policy, tiling with its options, memory promotion). The backends run it with
their target's lowering (`fuseopt/backends/targets.py`), the CLI's `--pipeline` and
`run_pipeline(module, name)` with the default one; nobody edits pipeline text.
`fuse-opt -p "$(python -c 'import fuseopt.pipelines as p; print(p.STANDARD)')"` runs
the same passes from the spec text (`pipeline_spec`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import get_type_hints

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError

from fuseopt import registry
from fuseopt.diagnostics import CompileError, ConfigurationError, verify_module
from fuseopt.passes.convert_nn_to_tile.heuristics import FORCEABLE, TileOptions
from fuseopt.passes.tile_promote import SHARED_BUDGET

FUSE_PASSES = (
    "nn-match-attention",
    "nn-decompose",
    "nn-gather-picks",
    "nn-split-reductions",
    "canonicalize",
    "cse",
    "nn-fuse",
)
"""The nn-level pipeline's passes: attention written out as ops into nn.attention,
composites into primitives, one-hot picks into gathers, reductions of few long rows in two
stages, cleanup, then fusion groups."""

FUSE = ",".join(FUSE_PASSES)
"""The nn-level pipeline as `-p` text."""

PRECISION = "nn-widen-intermediates"
"""The numerics policy: fusion groups compute 16-bit floats in f32 and round once at their
outputs (dropped for `precision="eager"`, which rounds every op as eager PyTorch does)."""

STANDARD = FUSE + "," + PRECISION + ",convert-nn-to-tile,tile-promote"
"""The standard pipeline as `-p` text: the fuse pipeline, the numerics policy, then
tiling and memory promotion (tile IR); `pipeline_spec(pipeline_passes("standard"))`."""

PIPELINES: dict[str, str] = {"fuse": FUSE, "standard": STANDARD}
"""Named pipelines, by name, as `-p` text (`pipeline_passes` builds them as objects)."""

PRECISIONS = ("f32", "eager")
"""Values of the backends' `precision` option: "f32" (the default) computes fusion groups
in f32 and rounds once at their outputs; "eager" rounds every op's result to its dtype,
as eager PyTorch does (the pipelines without `PRECISION`)."""


@dataclass(frozen=True)
class LoweringOptions:
    """How a backend lowers fused nn IR (after FUSE) to tile IR, as an object: the
    tiler's options (forced sizes and the target's limits), the numerics policy and
    the shared-memory budget of memory promotion.
    Backends build their tile stage from it (`passes`), never from pipeline text; the
    autotuner re-lowers a candidate with `forcing`."""

    tile: TileOptions = field(default_factory=TileOptions)
    precision: str = "f32"
    shared_bytes: int = SHARED_BUDGET
    """Shared memory one program may use (tile-promote's budget)."""
    warp_per_row: bool = False
    """tile-promote's `warp-per-row`: fewer warps for whole-row reductions (the Triton
    target)."""
    match_attention: bool = True
    """Whether the fuse stage turns attention written out as ops into nn.attention
    (nn-match-attention): off for a target whose attention kernel is slower than the
    written-out ops (the CUDA target)."""

    def forcing(self, sizes: Mapping[str, int]) -> LoweringOptions:
        """These options with the tile sizes in `sizes` forced (keys are the tiler's
        option names, `block-rows` or `block_rows`; a ConfigurationError for others)."""
        forced: dict[str, int] = {}
        for key, value in sizes.items():
            name = key.replace("-", "_")
            if name not in FORCEABLE:
                allowed = ", ".join(n.replace("_", "-") for n in FORCEABLE)
                raise ConfigurationError(f"{key!r} is not a tile size (tile sizes: {allowed})")
            forced[name] = int(value)
        tile = replace(self.tile, **forced)
        if "max_row_block" in forced:  # forced for every row, statistics included
            tile = replace(tile, statistics_row_block=None, statistics_row_chunk=None)
        return replace(self, tile=tile)

    def passes(self) -> list[ModulePass]:
        """The tile stage as pass objects: the numerics policy (for "f32"), tiling with
        these options, memory promotion."""
        from fuseopt.passes.convert_nn_to_tile.convert_nn_to_tile import ConvertNNToTilePass
        from fuseopt.passes.nn_widen_intermediates import NNWidenIntermediatesPass
        from fuseopt.passes.tile_promote import TilePromotePass

        if self.precision not in PRECISIONS:
            raise ConfigurationError(
                f"unknown precision {self.precision!r}; precisions are: {', '.join(PRECISIONS)}"
            )
        sizes = {f.name: getattr(self.tile, f.name) for f in fields(TileOptions)}
        tiling = ConvertNNToTilePass(**sizes)
        policy: list[ModulePass] = [NNWidenIntermediatesPass()] if self.precision == "f32" else []
        return [
            *policy,
            tiling,
            TilePromotePass(shared_bytes=self.shared_bytes, warp_per_row=self.warp_per_row),
        ]

    def spec(self) -> str:
        """The tile stage as `-p` text (what `fuse-opt` would run; a cache key)."""
        return pipeline_spec(self.passes())


def pipeline_passes(name: str, lowering: LoweringOptions | None = None) -> list[ModulePass]:
    """Named pipeline `name` (a key of PIPELINES) as pass objects: "fuse", or
    "standard" with the tile stage `lowering` builds (the default tile options when
    None; a backend passes its target's), without nn-match-attention where `lowering`
    says so. A CompileError for another name."""
    if name not in PIPELINES:
        raise CompileError(f"no pipeline named {name!r} (pipelines: {', '.join(PIPELINES)})")
    passes = registry.all_passes()
    lowering = lowering or LoweringOptions()
    flags = [f for f in FUSE_PASSES if lowering.match_attention or f != "nn-match-attention"]
    fuse = [passes[flag]()() for flag in flags]
    if name == "fuse":
        return fuse
    return [*fuse, *lowering.passes()]


def pipeline_spec(passes: Sequence[ModulePass]) -> str:
    """Pass objects as `-p` text (options that differ from their defaults shown)."""
    return ",".join(str(p.pipeline_pass_spec()) for p in passes)


def run_passes(
    module: ModuleOp, passes: Sequence[ModulePass], ctx: Context | None = None
) -> ModuleOp:
    """Run pass objects on `module` in place, verifying after every pass; return it."""
    ctx = ctx or registry.make_context()
    for p in passes:
        p.apply(ctx, module)
        verify_module(module)
    return module


def run_pipeline(module: ModuleOp, spec: str = STANDARD, ctx: Context | None = None) -> ModuleOp:
    """Run the pass pipeline `spec` (a name in PIPELINES, built as pass objects, or a
    `-p` string) on `module` in place, verifying after every pass, and return it."""
    if spec in PIPELINES:
        return run_passes(module, pipeline_passes(spec), ctx)
    if (empty := empty_pass_name(spec)) is not None:
        raise CompileError(f"bad pass pipeline {spec!r}: {empty}")
    ctx = ctx or registry.make_context()
    try:
        pipeline = PassPipeline.parse_spec(registry.all_passes(), spec)
    except ArgSpecParseError as e:  # a BaseException in xDSL: user code must be able to catch it
        message = " ".join(line.strip() for line in str(e).split("\n")[1:] if line.strip())
        raise CompileError(f"bad pass pipeline {spec!r}: {message}") from None
    except (ValueError, KeyError) as e:  # unknown pass, bad option
        why = describe_bad_option(spec) or str(e)
        raise CompileError(f"bad pass pipeline {spec!r}: {why}") from None
    return run_passes(module, pipeline.passes, ctx)


def empty_pass_name(spec: str) -> str | None:
    """Where `spec` has an empty pass name (`cse,`, `cse,,dce`: xDSL ignores a trailing
    comma), as `1:COL: message` with the spec and a caret on the next lines; None when
    every pass is named. Commas inside a pass's `{...}` options or quotes do not
    separate passes."""
    depth, quote, start = 0, "", 0
    for i, c in enumerate(spec + ","):
        if quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c == "{":
            depth += 1
        elif c == "}":
            depth = max(0, depth - 1)
        elif c == "," and depth == 0:
            if spec and not spec[start:i].strip():
                at = min(i, len(spec) - 1)
                return (
                    f"1:{at + 1}: empty pass name in the pipeline (a ',' with no pass on one "
                    f"side)\n  {spec}\n  {' ' * at}^"
                )
            start = i + 1
    return None


def describe_bad_option(spec: str) -> str | None:
    """The first option in pipeline `spec` whose value its pass cannot take, said as
    `pass: option=value must be a T` (xDSL's own message names neither); None when
    every option converts (or the spec does not parse)."""
    passes = registry.all_passes()
    try:
        specs = list(parse_pipeline(PIPELINES.get(spec, spec)))
    except ArgSpecParseError:
        return None
    for pass_spec in specs:
        if pass_spec.name not in passes:
            continue
        cls = passes[pass_spec.name]()
        hints = get_type_hints(cls)
        for key, value in pass_spec.parameters.items():
            one = ArgSpec(pass_spec.name, {key: value}).normalize_parameter_names()
            if key.replace("-", "_") not in hints:
                known = ", ".join(sorted(k.replace("_", "-") for k in hints if k != "name"))
                return f"{pass_spec.name}: unknown option {key} (options: {known or 'none'})"
            try:
                cls.from_pass_spec(one)
            except (ValueError, TypeError):
                want = hints.get(key.replace("-", "_"))
                name = getattr(want, "__name__", None) or str(want).replace("NoneType", "None")
                given = " ".join(str(v) for v in value)
                return f"{pass_spec.name}: option {key}={given} must be {name}"
            except ArgSpecParseError:  # pragma: no cover - xDSL's BaseException
                return None
    return None
