"""The backend contract: what a fuseopt backend implements, and the registry of backends.

Writing a backend (the contract the Triton and CUDA backends implement)
-----------------------------------------------------------------------
A backend is an object with one method,

    backend.compile(module, func_name, options) -> CompiledFunction

called once per compiled region of each ATen graph (forward, backward, and again for
every new input shape):
- `module`: the nn IR of the region as the frontend imported it (composites intact, no
  pass run yet). The backend owns it and may rewrite it in place, typically with
  `fuseopt.run_pipeline(module, "standard")` (ends in tile IR; "fuse" stops after nn-fuse).
- `func_name`: the `func.func` to compile; its arguments are the region's inputs, in
  order, and its results the region's outputs.
- `options`: the user's keyword options (`fuseopt.compile(..., **options)` or
  `torch.compile(..., options={...})`) without the frontend's own keys (`backend`,
  `strict`), plus `mode` when one is set. Reject unknown keys with `check_options`.

The returned CompiledFunction has:
- `__call__(*tensors) -> Sequence[torch.Tensor]`: the function's results, with the
  function's result dtypes, on the inputs' device;
- `kernels`: one `KernelRecord` per kernel it launches. Fill `name`, `ops`, `schedule`,
  `source` (the emitted text), `suffix` (".py" for Triton, ".cu" for CUDA) and `launch`
  (the launch configuration in words); the frontend fills `region`;
- optionally `fused_module`: the nn module right after `fuseopt.pipelines.FUSE` (clone it
  before lowering further), which `fusion_report()` tabulates; without it the frontend
  runs FUSE on its own copy of the imported module.
- optionally `trusting(trusted) -> callable`: the same function checking per call only
  the inputs whose flag in `trusted` is False. The frontend passes True for an input it
  knows has the compiled shape and dtype and is contiguous in every call: an input of
  the Python frame Dynamo traced (forward and inference graphs; not a backward graph,
  a piece of a DDP-split graph or AOTAutograd's synthetic bases) whose traced example
  is dense in the order the region reads it, as Dynamo's guards then pin. A wrapper
  that checks inputs itself (CUDA-graph replay) returns itself.
  `partly_checked` builds it from the backend's own check. Without it every call
  checks every input.

`CompiledModule.save(directory)` then writes every record's `source` as
`<region>_<name><suffix>` with an index (`index.md`, `index.json`: kernel, region, fused
ops, schedule, launch, file); records with the same source share one file.

Errors: a `ConfigurationError` (BackendUnavailableError, a bad option) reaches the
user. Anything else `compile` raises makes that region run eagerly, logged as a
fallback on logger `fuseopt`; the option `strict=True` raises it instead (backend tests).

Plugging in: define `make_backend() -> Backend` in `fuseopt/backends/<name>/__init__.py`;
"triton" and "cuda" are in BACKENDS already, so defining that function is all it takes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch
from xdsl.dialects.builtin import ModuleOp

from fuseopt.diagnostics import BackendUnavailableError, ConfigurationError

if TYPE_CHECKING:
    from fuseopt.passes.generalize_sizes import SizedFunction

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
"""The values `mode` may take (besides None), as in `torch.compile`."""

GRAPH_MODES = ("reduce-overhead", "max-autotune")
"""The modes that replay CUDA graphs (`backends/cuda_graphs.py`)."""


@dataclass(frozen=True)
class KernelRecord:
    """One kernel a compiled model launches.

    Attributes: `name` (an identifier); `ops`, the nn ops it computes (fused into one
    kernel); `schedule` (for example "pointwise", "row_reduction", "matmul"); `source`,
    the emitted kernel source when there is one; `suffix`, the file suffix `save()`
    gives the source (".py", ".cu", ".mlir"); `launch`, the launch configuration in words
    (grid, block, warps); `region`, the nn function (graph region) it belongs to, filled
    in by the frontend.
    """

    name: str
    ops: tuple[str, ...]
    schedule: str
    source: str | None = None
    suffix: str = ".txt"
    launch: str = ""
    region: str = ""


class CompiledFunction(Protocol):
    """What `Backend.compile` returns (see the module docstring)."""

    kernels: Sequence[KernelRecord]

    def __call__(self, *inputs: torch.Tensor) -> Sequence[torch.Tensor]:
        """Run on the function's arguments; return its results."""
        ...


def shape_matches(actual: Sequence[int], spec: Sequence[int]) -> bool:
    """Does a tensor of shape `actual` fit `spec`, where a dim of -1 is of dynamic size
    (`?` in the IR) and fits any size?"""
    if len(actual) != len(spec):
        return False
    for a, s in zip(actual, spec, strict=True):  # a loop: no generator frame per call
        if a != s and s >= 0:
            return False
    return True


def partly_checked(
    signature: Sequence[tuple[tuple[int, ...], torch.dtype]],
    trusted: Sequence[bool],
    check: Callable[[Sequence[Any]], Sequence[torch.Tensor]],
    run: Callable[[Sequence[torch.Tensor]], tuple[torch.Tensor, ...]],
    cuda_only: bool,
) -> Callable[..., tuple[torch.Tensor, ...]]:
    """A compiled function's `trusting` (see the module docstring): `run(inputs)` when
    every input not `trusted` is a tensor of its `signature` entry's shape and dtype,
    contiguous, on the first input's device (and that a CUDA device when `cuda_only`),
    else `run(check(inputs))`, which converts or raises. `signature` holds (shape,
    dtype) per input; `trusted` of another length trusts nothing."""
    trust = list(trusted) if len(trusted) == len(signature) else [False] * len(signature)
    checked = [(i, *sig) for i, (sig, t) in enumerate(zip(signature, trust, strict=True)) if not t]
    count = len(signature)

    def call(*inputs: Any) -> tuple[torch.Tensor, ...]:
        if len(inputs) != count:
            return run(check(inputs))
        where = inputs[0].get_device() if count and isinstance(inputs[0], torch.Tensor) else -1
        for i, shape, dtype in checked:
            x = inputs[i]
            if (
                not isinstance(x, torch.Tensor)
                or x.get_device() != where
                or x.dtype != dtype
                or (x.shape != shape and not shape_matches(x.shape, shape))
                or not x.is_contiguous()
                or (cuda_only and not x.is_cuda)
            ):
                return run(check(inputs))
        return run(inputs)

    return call


class Backend(Protocol):
    """A fuseopt backend (see the module docstring). It may set `sizes_at_run_time =
    True` when it compiles a SizedFunction once for every size (`sizes_at_run_time`);
    the others compile one per size."""

    def compile(
        self, module: ModuleOp | SizedFunction, func_name: str, options: Mapping[str, Any]
    ) -> CompiledFunction:
        """Compile `func_name` of `module` (nn IR; a SizedFunction for a function of one
        dynamic size given at any size: passes/generalize_sizes.py)."""
        ...


def sizes_at_run_time(backend: object) -> bool:
    """Whether `backend` compiles a function of dynamic size once for every size (its
    kernels take the size at run time), not once per size."""
    return bool(getattr(backend, "sizes_at_run_time", False))


def default_attention(backend: str) -> str:
    """The frontend's default `attention` option for `backend`: its target's (the GPU
    targets in backends/targets.py), else "fused"."""
    from fuseopt.backends.targets import TARGETS

    target = TARGETS.get(backend)
    return target.attention if target is not None else "fused"


def check_options(backend: str, options: Mapping[str, Any], known: Collection[str]) -> None:
    """Raise a ConfigurationError naming the keys of `options` not in `known`, and listing
    the known ones once each (see `describe_options`)."""
    unknown = sorted(set(options) - set(known) - {"mode"})
    if unknown:
        raise ConfigurationError(
            f"backend '{backend}' has no option(s) {', '.join(map(repr, unknown))} "
            f"(its options: {describe_options({*known, 'mode'})})"
        )


def describe_options(known: Collection[str]) -> str:
    """`known` option names for an error message, each once: a name accepted both as
    `block_rows` and `block-rows` is listed as `block_rows`, with a note on the '-'."""
    names = {k.replace("-", "_") if k.replace("-", "_") in known else k for k in known}
    dashed = {n for n in names if n.replace("_", "-") in known and "_" in n}
    listing = ", ".join(sorted(names))
    if not dashed:
        return listing
    undashed = sorted(n for n in names if "_" in n and n not in dashed)
    but = f" (not in {', '.join(undashed)})" if undashed else ""
    return f"{listing}; '-' may replace '_'{but}"


def check_mode(mode: object) -> None:
    """Raise a ConfigurationError unless `mode` is None or one of MODES."""
    if mode is not None and mode not in MODES:
        raise ConfigurationError(f"unknown mode {mode!r}; modes are: {', '.join(MODES)}")


def check_precision(precision: object) -> str:
    """`precision` if it is one of `fuseopt.pipelines.PRECISIONS`, else a
    ConfigurationError (the numerics policy: docs/numerics.md)."""
    from fuseopt.pipelines import PRECISIONS

    if precision not in PRECISIONS:
        raise ConfigurationError(
            f"unknown precision {precision!r}; precisions are: {', '.join(PRECISIONS)}"
        )
    return str(precision)


def _package_backend(name: str) -> Callable[[], Backend]:
    def factory() -> Backend:
        package = f"fuseopt.backends.{name}"
        try:
            module = importlib.import_module(package)
        except ImportError as e:
            raise BackendUnavailableError(f"backend '{name}' is not available: {e}") from None
        make = getattr(module, "make_backend", None)
        if make is None:
            raise BackendUnavailableError(
                f"backend '{name}' is not available yet ({package} has no runtime); "
                f"use backend='interpret' (available: {', '.join(available_backends())})"
            )
        return make()

    return factory


BACKENDS: dict[str, Callable[[], Backend]] = {
    "interpret": _package_backend("interpret"),
    "triton": _package_backend("triton"),
    "cuda": _package_backend("cuda"),
}
"""fuseopt backends by name (lazy factories)."""


def available_backends() -> list[str]:
    """Names of the backends that can be built now."""
    names = []
    for name in BACKENDS:
        try:
            if hasattr(importlib.import_module(f"fuseopt.backends.{name}"), "make_backend"):
                names.append(name)
        except ImportError:
            continue
    return names


def resolve_backend(name: object) -> Backend:
    """The backend called `name`, or a BackendUnavailableError saying why not."""
    if not isinstance(name, str) or name not in BACKENDS:
        raise BackendUnavailableError(
            f"unknown backend {name!r}; fuseopt backends are: {', '.join(BACKENDS)}"
        )
    return BACKENDS[name]()
