"""The public Python API: `fuseopt.export`, `fuseopt.compile`, and the backend registry.

A *backend* turns an imported nn module into something that runs. It is looked up by
name in `BACKENDS` (a lazy factory per name), and has one method:

    backend.compile(module, func_name, options) -> CompiledFunction

`module` is the nn IR of one region of a PyTorch graph, as the frontend imported it
(composites intact, no pass run yet); `func_name` names its `func.func`; `options` are
the user's options (`mode` included). The result is called with torch tensors (the
function's arguments, in order) and returns a sequence of torch tensors with the
function's result dtypes, on the inputs' device; its `kernels` lists one `KernelRecord`
per kernel it launches, and its optional `module` attribute holds the IR it runs (for
`fusion_report`). The "triton" and "cuda" entries load `make_backend()` from the
`fuseopt.backends.<name>` package: defining that function there plugs a backend in.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType

from fuseopt.diagnostics import CompileError
from fuseopt.frontends.fx.dynamo_backend import DEFAULT_BACKEND, fuseopt_backend
from fuseopt.frontends.fx.partition import CompileRecord, FallbackRecord
from fuseopt.frontends.fx.types import torch_dtype


class BackendUnavailableError(CompileError):
    """The named backend does not exist, or is not available in this build."""


@dataclass(frozen=True)
class KernelRecord:
    """One kernel a compiled model launches.

    Attributes: `name`; `ops`, the nn ops it computes (fused into one kernel);
    `schedule` (for example "pointwise", "row_reduction", "matmul"; "interpret" for the
    reference interpreter); `source`, the emitted kernel source when there is one.
    """

    name: str
    ops: tuple[str, ...]
    schedule: str
    source: str | None = None


class CompiledFunction(Protocol):
    """What `Backend.compile` returns (see the module docstring)."""

    kernels: Sequence[KernelRecord]

    def __call__(self, *inputs: torch.Tensor) -> Sequence[torch.Tensor]:
        """Run on the function's arguments; return its results."""
        ...


class Backend(Protocol):
    """A fuseopt backend (see the module docstring)."""

    def compile(
        self, module: ModuleOp, func_name: str, options: Mapping[str, Any]
    ) -> CompiledFunction:
        """Compile `func_name` of `module`."""
        ...


class InterpretedFunction:
    """An nn function run by the reference interpreter on torch tensors."""

    def __init__(self, module: ModuleOp, func_name: str, kernels: list[KernelRecord]):
        self.module = module
        self.func_name = func_name
        self.kernels = kernels
        fn = _find_func(module, func_name)
        types = [t for t in fn.function_type.outputs.data if isinstance(t, TensorType)]
        self.dtypes = [torch_dtype(t.element_type) for t in types]
        self.shapes = [tuple(t.get_shape()) for t in types]

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Interpret the function; results come back as tensors on the inputs' device."""
        from fuseopt.interpreter import interpret

        device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), None)
        outputs = interpret(self.module, self.func_name, *inputs)
        # reshape: the interpreter's bf16 rounding returns 0-d results as 1-d arrays
        return tuple(
            torch.from_numpy(np.array(o, copy=True).reshape(shape)).to(dtype=dtype, device=device)
            for o, dtype, shape in zip(outputs, self.dtypes, self.shapes, strict=True)
        )


class InterpretBackend:
    """The debugging backend: the standard pipeline, then the reference interpreter.

    It makes the frontend testable end to end without a GPU; one "kernel" per region.
    """

    def compile(
        self, module: ModuleOp, func_name: str, options: Mapping[str, Any]
    ) -> InterpretedFunction:
        """Run `fuseopt.pipelines.STANDARD` on `module`, then wrap the interpreter."""
        from fuseopt.pipelines import STANDARD, run_pipeline

        run_pipeline(module, STANDARD)
        fn = _find_func(module, func_name)
        ops = tuple(op.name for op in fn.body.walk() if op.name.startswith("nn."))
        record = KernelRecord(func_name, ops, "interpret", str(module))
        return InterpretedFunction(module, func_name, [record])


def _find_func(module: ModuleOp, name: str) -> func.FuncOp:
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == name:
            return op
    raise CompileError(f"no function @{name} in the compiled module")


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
    "interpret": InterpretBackend,
    "triton": _package_backend("triton"),
    "cuda": _package_backend("cuda"),
}
"""fuseopt backends by name (lazy factories)."""


def available_backends() -> list[str]:
    """Names of the backends that can be built now."""
    names = []
    for name in BACKENDS:
        try:
            if name == "interpret" or hasattr(
                importlib.import_module(f"fuseopt.backends.{name}"), "make_backend"
            ):
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


class CompiledModule:
    """A model compiled by fuseopt: call it like the model.

    `kernels` lists one KernelRecord per kernel compiled so far (every graph: forward,
    backward, recompilations for new shapes); `fallbacks` the ops run eagerly;
    `fusion_report()` describes both.
    """

    def __init__(
        self, model: Callable[..., Any], backend: str, mode: str | None, options: Mapping[str, Any]
    ):
        self.model = model
        self.backend = backend
        self.record = CompileRecord()
        compiler = functools.partial(
            fuseopt_backend,
            options={**options, "backend": backend},
            mode=mode,
            record=self.record,
        )
        self._compiled = torch.compile(model, backend=compiler, dynamic=False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the compiled model (compiling on first use and for new shapes)."""
        return self._compiled(*args, **kwargs)

    @property
    def kernels(self) -> list[KernelRecord]:
        """One record per compiled kernel."""
        return list(self.record.kernels)

    @property
    def fallbacks(self) -> list[FallbackRecord]:
        """The ops that run eagerly in PyTorch, with the reason and source location."""
        return list(self.record.fallbacks)

    def fusion_report(self) -> str:
        """A text report: each kernel with the nn ops it fuses, then the eager ops."""
        lines = [f"fuseopt ({self.backend}): {len(self.record.kernels)} kernel(s)"]
        for k in self.record.kernels:
            lines.append(f"  {k.name} [{k.schedule}]: {len(k.ops)} ops: {', '.join(k.ops)}")
        if self.record.fallbacks:
            lines.append(f"eager fallback: {len(self.record.fallbacks)} op(s)")
            for f in self.record.fallbacks:
                where = f" at {f.location}" if f.location else ""
                lines.append(f"  {f.graph}: {f.target}{where}: {f.reason}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"CompiledModule({type(self.model).__name__}, backend={self.backend!r})"


def compile(
    model: Callable[..., Any],
    example_inputs: Any = None,
    backend: str = DEFAULT_BACKEND,
    mode: str | None = None,
    **options: Any,
) -> CompiledModule:
    """Compile a PyTorch model (an `nn.Module` or function) with fuseopt.

    Returns a CompiledModule used exactly like the model. With `example_inputs` (a
    tensor or a tuple of arguments) it is compiled now, by one call; otherwise on first
    use. Extra keyword options go to the backend. An unknown or unavailable backend
    raises BackendUnavailableError at once.
    """
    if not callable(model):
        raise CompileError(f"fuseopt.compile needs an nn.Module or a function, got {model!r}")
    if mode is not None and not isinstance(mode, str):
        raise CompileError(f"mode must be a string, got {mode!r}")
    resolve_backend(backend)
    compiled = CompiledModule(model, backend, mode, options)
    if example_inputs is not None:
        compiled(*_as_args(example_inputs))
    return compiled


def _as_args(example_inputs: Any) -> tuple[Any, ...]:
    if isinstance(example_inputs, tuple | list):
        return tuple(example_inputs)
    return (example_inputs,)


class _FunctionModule(torch.nn.Module):
    """A function as a module, for torch.export (which takes modules only)."""

    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        """Call the function."""
        return self.fn(*args)


def _function_module(fn: Callable[..., Any]) -> torch.nn.Module:
    """Wrap `fn`, keeping its parameter names (they name the exported arguments)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return _FunctionModule(fn)
    if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        return _FunctionModule(fn)

    def forward(self: torch.nn.Module, *args: Any) -> Any:
        return fn(*args)

    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    forward.__signature__ = inspect.Signature([self_param, *params])  # type: ignore[attr-defined]
    cls = type(_FunctionModule.__name__, (_FunctionModule,), {"forward": forward})
    return cls(fn)


def export(model: Callable[..., Any], example_inputs: Any) -> str:
    """The nn-dialect MLIR text of `model`'s forward on `example_inputs` (what
    `fuse-opt` reads): `func.func @forward`, parameters and buffers first, then inputs.

    Raises CompileError when PyTorch cannot capture the model, and UnsupportedOpError
    (a located CompileError) for an op outside the op table.
    """
    from fuseopt.frontends.fx.importer import import_graph

    module = model if isinstance(model, torch.nn.Module) else _function_module(model)
    try:
        program = torch.export.export(module, _as_args(example_inputs))
        program = program.run_decompositions({})
    except Exception as e:  # PyTorch's capture errors are many types
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CompileError(f"torch.export could not capture the model: {first}") from None
    return str(import_graph(program.graph_module, "forward"))
