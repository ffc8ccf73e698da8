"""The public Python API: `fuseopt.export`, `fuseopt.compile`, and the backend registry.

The backend contract (what a backend implements, the registry of backends by name, and
the checks of modes and options) is `fuseopt.backends.contract`; the errors the API raises
are in `fuseopt.diagnostics`.
"""

from __future__ import annotations

import functools
import inspect
import json
import platform
import re
import shutil
import subprocess
import types
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from xdsl.dialects.builtin import ModuleOp

from fuseopt.backends.contract import (  # noqa: F401 - the backend contract, re-exported
    BACKENDS,
    MODES,
    Backend,
    CompiledFunction,
    KernelRecord,
    available_backends,
    check_mode,
    check_options,
    check_precision,
    resolve_backend,
)
from fuseopt.diagnostics import (  # noqa: F401 - the errors the API raises, re-exported
    BackendUnavailableError,
    CompileError,
    ConfigurationError,
    DeviceUnavailableError,
)
from fuseopt.frontends.fx.dynamo_backend import DEFAULT_BACKEND, fuseopt_backend
from fuseopt.frontends.fx.partition import CompileRecord, FallbackRecord, RegionRecord
from fuseopt.growing_caches import mark_growing_sizes

if TYPE_CHECKING:
    from fuseopt.passes.nn_fuse.cost_model import GPUSpec
    from fuseopt.passes.nn_fuse.report import FunctionReport, ReportTarget

_FILE_NAME = re.compile(r"[^A-Za-z0-9_.-]")

GRAPH_KINDS: dict[str, tuple[str, str]] = {
    "forward": (
        "training forward",
        "compiled with gradients on (outside torch.no_grad()); its backward graph compiles "
        "at the first .backward(), and a call under torch.no_grad() compiles an inference "
        "graph",
    ),
    "backward": ("training backward", "compiled at the first .backward()"),
    "inference": (
        "inference",
        "compiled without gradients (under torch.no_grad(), or nothing requires grad)",
    ),
}
"""What the graphs AOTAutograd hands fuseopt are, by the prefix of their names
(`forward0`, `backward1`, `inference2`; the regions and kernels of a graph are named
`<graph>_<n>`): a short name, and when such a graph is compiled."""

RUNNERS: dict[str, tuple[str, str]] = {
    "triton": ("Triton kernel", "cuBLAS via torch"),
    "cuda": ("CUDA C++ kernel", "cuBLAS via torch"),
    "interpret": ("NumPy kernel of the reference interpreter", "NumPy matmul"),
}
"""What runs each backend's generated kernels and library GEMMs on a GPU (the fusion
report's legend); on the CPU, `torch.matmul` runs the library GEMMs and Triton
interprets its kernels."""

DOT_SUFFIXES = (".dot", ".gv")
"""File suffixes `fusion_graph` writes as DOT text."""
RENDERED_SUFFIXES = (".svg", ".png")
"""File suffixes `fusion_graph` renders with Graphviz's `dot`."""


@dataclass(frozen=True)
class CompiledGraph:
    """One graph AOTAutograd handed fuseopt (`forward0`, `inference1`, ...): its
    compiled regions, their kernels, and the ops left to PyTorch."""

    name: str
    regions: tuple[RegionRecord, ...]
    kernels: tuple[KernelRecord, ...]
    fallbacks: tuple[FallbackRecord, ...]

    @property
    def kind(self) -> str:
        """What the graph is ("training forward", "inference", ...), from its name."""
        return GRAPH_KINDS.get(self._prefix, (self.name, ""))[0]

    @property
    def explanation(self) -> str:
        """When such a graph is compiled (see GRAPH_KINDS); empty if unknown."""
        return GRAPH_KINDS.get(self._prefix, ("", ""))[1]

    @property
    def _prefix(self) -> str:
        return self.name.rstrip("0123456789")


class CompiledModule:
    """A model compiled by fuseopt: call it like the model.

    `kernels` lists one KernelRecord per kernel compiled so far (every graph: forward,
    backward, recompilations for new shapes); `fallbacks` the ops run eagerly;
    `regions` the compiled regions; `graphs` all of these by graph;
    `fusion_report()` describes them graph by graph, `fusion_graph(path)` draws their
    fusion groups and `save(directory)` writes the kernels' sources.
    """

    def __init__(
        self,
        model: Callable[..., Any],
        backend: str,
        mode: str | None,
        options: Mapping[str, Any],
        dynamic: bool | None = None,
    ):
        self.model = model
        self.backend = backend
        self.record = CompileRecord()
        self.device: torch.device | None = None
        """The device of the first call's tensors (None before the first call)."""
        compiler = functools.partial(
            fuseopt_backend,
            options={**options, "backend": backend},
            mode=mode,
            record=self.record,
        )
        self._compiled = torch.compile(_entry_point(model), backend=compiler, dynamic=dynamic)
        self._mark_caches = dynamic is not False
        """Whether calls still mark growing KV caches dynamic (until a decode step ran)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the compiled model (compiling on first use and for new shapes).

        A growing KV cache among the arguments (a decode step of `generate`) has its
        length marked dynamic until one decode step ran, so a generation compiles two
        graphs, not three (`growing_caches`; not with `dynamic=False`).

        A fuseopt error raised while compiling (a bad option, say) comes out as itself,
        not wrapped in Dynamo's BackendCompilerFailed.
        """
        if self.device is None:
            self.device = _call_device(self.model, args, kwargs)
        decode_step = self._mark_caches and mark_growing_sizes(args, kwargs)
        try:
            result = self._compiled(*args, **kwargs)
            if decode_step:
                self._mark_caches = False
            return result
        except torch._dynamo.exc.BackendCompilerFailed as e:
            if isinstance(e.inner_exception, CompileError):
                raise e.inner_exception from None
            raise

    @property
    def kernels(self) -> list[KernelRecord]:
        """One record per compiled kernel."""
        return list(self.record.kernels)

    @property
    def fallbacks(self) -> list[FallbackRecord]:
        """The ops that run eagerly in PyTorch, with the reason and source location."""
        return list(self.record.fallbacks)

    @property
    def regions(self) -> list[RegionRecord]:
        """The compiled regions (nn functions), in compilation order."""
        return list(self.record.regions)

    @property
    def graphs(self) -> list[CompiledGraph]:
        """The graphs compiled so far, in compilation order, each with its regions,
        kernels and fallbacks."""
        graph_of = {r.func_name: r.graph for r in self.record.regions}
        return [
            CompiledGraph(
                name,
                tuple(r for r in self.record.regions if r.graph == name),
                tuple(k for k in self.record.kernels if graph_of.get(k.region) == name),
                tuple(f for f in self.record.fallbacks if f.graph == name),
            )
            for name in _graph_names(self.record)
        ]

    def fusion_report(self) -> str:
        """A text report: which graphs were compiled (training forward, backward,
        inference), the cost model's GPU (the compile device's when fuseopt knows it,
        else which it assumed) and what runs each route on the device; then per graph
        the nn-fuse table of each region (groups, HBM bytes, kernels and estimated time
        before and after fusion), its kernels and the ops left to PyTorch (eager
        fallbacks)."""
        from fuseopt.passes.nn_fuse.report import build_report, model_line, route_legend

        target = report_target(self.backend, self.device)
        graphs = self.graphs
        reports = {r.func_name: build_report(fused_module(r), target.gpu) for r in self.regions}
        routes = [row.route for rep in reports.values() for f in rep for row in f.rows]
        lines = [
            f"fuseopt ({self.backend} backend): {len(graphs)} graph(s), "
            f"{len(self.record.regions)} region(s), {len(self.record.kernels)} kernel(s), "
            f"{len(self.record.fallbacks)} op(s) run eagerly (left to PyTorch)",
            "graphs compiled: " + (", ".join(f"{g.name} ({g.kind})" for g in graphs) or "none yet"),
            model_line(target),
            route_legend(routes, target).rstrip("\n"),
        ]
        for graph in graphs:
            lines.extend(_graph_section(graph, reports, target.gpu))
        return "\n".join(line for line in lines if line)

    def fusion_graph(self, path: str | Path) -> Path:
        """Draw the fusion groups of every compiled graph (a cluster per graph, per
        region, per group) and return the path written.

        A path ending in `.dot` (or `.gv`) gets the Graphviz DOT text; `.svg` or `.png`
        is rendered by Graphviz's `dot`, which must be on PATH (a CompileError suggesting
        the `.dot` path otherwise). Raises CompileError when nothing was compiled yet or
        the file cannot be written, ConfigurationError for another suffix.
        """
        from fuseopt.passes.nn_fuse.report import graphs_dot

        out = Path(path)
        suffix = out.suffix.lower()
        if suffix not in DOT_SUFFIXES + RENDERED_SUFFIXES:
            raise ConfigurationError(
                f"fusion_graph writes {', '.join(DOT_SUFFIXES)} (DOT text) or renders "
                f"{', '.join(RENDERED_SUFFIXES)} (with Graphviz); got '{out}'"
            )
        if not self.record.regions:
            raise CompileError(
                "nothing compiled yet: call the compiled model (or pass "
                "example_inputs to fuseopt.compile) before fusion_graph()"
            )
        text = graphs_dot(
            [(f"{g.name} ({g.kind})", [fused_module(r) for r in g.regions]) for g in self.graphs]
        )
        if suffix in RENDERED_SUFFIXES:
            _render_dot(text, out)
            return out
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as e:
            raise CompileError(f"cannot write '{out}': {e.strerror}") from None
        return out

    def save(self, directory: str | Path) -> Path:
        """Write each kernel's source into `directory` (created if needed) as
        `<region>_<name><suffix>` beside `index.md` and `index.json` (kernel, region,
        fused ops, schedule, launch, file); returns the path of `index.md`.

        Records with identical sources share one file; records without source are
        listed in the index with no file. Raises CompileError when nothing was compiled
        yet or the directory cannot be written.
        """
        if not self.record.kernels:
            raise CompileError(
                "nothing compiled yet: call the compiled model (or pass "
                "example_inputs to fuseopt.compile) before save()"
            )
        out = Path(directory)
        entries: list[dict[str, Any]] = []
        files: dict[str, str] = {}
        try:
            out.mkdir(parents=True, exist_ok=True)
            for k in self.record.kernels:
                file = None
                if k.source is not None:
                    file = files.get(k.source)
                    if file is None:
                        file = _unique_name(out, f"{k.region}_{k.name}", k.suffix, files)
                        (out / file).write_text(k.source, encoding="utf-8")
                        files[k.source] = file
                entries.append(
                    {
                        "kernel": k.name,
                        "region": k.region,
                        "ops": list(k.ops),
                        "schedule": k.schedule,
                        "launch": k.launch,
                        "file": file,
                    }
                )
            (out / "index.json").write_text(json.dumps(entries, indent=1) + "\n")
            index = out / "index.md"
            index.write_text(_index_markdown(self.backend, entries), encoding="utf-8")
        except OSError as e:
            raise CompileError(f"cannot save kernels to '{out}': {e.strerror}") from None
        return index

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The compiled forward: the same as calling the CompiledModule."""
        return self(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        """Other attributes are the model's (`parameters()`, `eval()`, `config`, ...).

        A method the model's own classes define (not PyTorch's: Hugging Face's
        `generate`, a user's `predict`) runs with the model's calls routed through the
        compiled forward while it runs, so `compiled.generate(...)` decodes with the
        compiled model (torch.nn.Module's `_compiled_call_impl`, set for the call and
        restored after it).
        """
        model = self.__dict__.get("model")
        if model is None or name.startswith("__"):
            raise AttributeError(name)
        value = getattr(model, name)
        if inspect.ismethod(value) and value.__self__ is model and _defined_by_model(model, name):
            return self._through_compiled_forward(value)
        return value

    def _through_compiled_forward(self, method: Callable[..., Any]) -> Callable[..., Any]:
        """`method` of the model, calling the compiled forward wherever it calls the model."""
        model = self.model

        @functools.wraps(method)
        def run(*args: Any, **kwargs: Any) -> Any:
            previous = getattr(model, "_compiled_call_impl", None)
            model._compiled_call_impl = self.__call__
            try:
                return method(*args, **kwargs)
            finally:
                model._compiled_call_impl = previous

        return run

    def __repr__(self) -> str:
        return f"CompiledModule({type(self.model).__name__}, backend={self.backend!r})"


def _defined_by_model(model: Any, name: str) -> bool:
    """Whether the method `name` of nn.Module `model` comes from a class of the model's
    own (its class, a base or a mixin such as Hugging Face's GenerationMixin), not from
    PyTorch (`torch.nn.Module` and torch's own classes)."""
    if not isinstance(model, torch.nn.Module):
        return False
    owner = next((c for c in type(model).__mro__ if name in vars(c)), object)
    return owner is not object and not owner.__module__.startswith("torch.")


def _call_device(model: Callable[..., Any], args: Any, kwargs: Any) -> torch.device:
    """The device a call computes on: its first tensor's, else the model's first
    parameter's or buffer's, else the CPU."""
    for leaf in torch.utils._pytree.tree_leaves((args, kwargs)):
        if isinstance(leaf, torch.Tensor):
            return leaf.device
    if isinstance(model, torch.nn.Module):
        for t in [*model.parameters(), *model.buffers()]:
            return t.device
    return torch.device("cpu")


def _graph_names(record: CompileRecord) -> list[str]:
    """The names of the graphs compiled, in order: those the frontend listed, then any
    other its regions or fallbacks name."""
    names = [*record.graphs, *(r.graph for r in record.regions)]
    names += [f.graph for f in record.fallbacks]
    return list(dict.fromkeys(names))


def _graph_section(
    graph: CompiledGraph, reports: Mapping[str, Sequence[FunctionReport]], gpu: GPUSpec
) -> list[str]:
    """The report's lines for one graph: a title, each region's nn-fuse tables, the
    kernels and the eager fallbacks."""
    from fuseopt.passes.nn_fuse.report import format_tables

    lines = [f"== graph {graph.name}: {graph.kind} ==", graph.explanation]
    if not graph.regions:
        lines.append("no region compiled (every op left to PyTorch)")
    for region in graph.regions:
        lines.append(format_tables(reports[region.func_name], gpu).rstrip("\n"))
    lines.append(f"kernels ({len(graph.kernels)}):")
    for k in graph.kernels:
        launch = f" ({k.launch})" if k.launch else ""
        lines.append(f"  {k.region}/{k.name} [{k.schedule}]{launch}: {', '.join(k.ops)}")
    lines.append(f"eager fallback (ops left to PyTorch): {len(graph.fallbacks) or 'none'}")
    for f in graph.fallbacks:
        where = f" at {f.location}" if f.location else ""
        lines.append(f"  {f.graph}: {f.target}{where}: {f.reason}")
    return lines


def report_target(backend: str, device: torch.device | None) -> ReportTarget:
    """The fusion report's `ReportTarget` for `backend` on `device`: the device's GPU
    model when it is a GPU fuseopt knows by name (`gpu_specs.KNOWN_GPUS`, with the SM
    count PyTorch reports), else the default H100 model, saying why it was assumed;
    and what runs each route there (RUNNERS)."""
    from fuseopt.passes.nn_fuse.nn_fuse import NNFusePass
    from fuseopt.passes.nn_fuse.report import ReportTarget

    routing = NNFusePass().gpu()
    generated, library = RUNNERS.get(backend, ("generated kernel", "a GEMM library"))
    if device is None or device.type != "cuda":
        cpu = device is None or device.type == "cpu"
        what = f"a CPU, {_cpu_name()}" if cpu else f"'{device.type}'"
        on = "the CPU" if cpu else what
        if backend == "triton" and cpu:
            generated += " (Triton's CPU interpreter)"
        if backend != "interpret":
            library = f"torch.matmul on {on}"
        basis = f"assumed: the compile device is {what}"
        return ReportTarget(
            routing, basis, f"{backend} backend on {on}", generated, library, routing
        )
    gpu, basis = _gpu_model(device, routing)
    name = torch.cuda.get_device_name(device)
    return ReportTarget(gpu, basis, f"{backend} backend on {name}", generated, library, routing)


def _gpu_model(device: torch.device, default: GPUSpec) -> tuple[GPUSpec, str]:
    """The cost model of CUDA `device` and why: its datasheet's when fuseopt knows the
    GPU, else `default` with the device's SM count."""
    from fuseopt.passes.nn_fuse.gpu_specs import known_gpu, spec_of

    props = torch.cuda.get_device_properties(device)
    sms = int(getattr(props, "multi_processor_count", 0)) or None
    sheet = known_gpu(props.name)
    if sheet is not None:
        return spec_of(sheet, sms), f"the compile device, {props.name}"
    gpu = replace(default, sm_count=sms or default.sm_count)
    return gpu, (
        f"assumed: {props.name} is not in fuseopt's GPU table, so {default.name} figures "
        f"with its {gpu.sm_count} SMs"
    )


def _cpu_name() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what `platform` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _render_dot(text: str, out: Path) -> None:
    """Render DOT `text` to `out` (its suffix names the format) with Graphviz's `dot`."""
    exe = shutil.which("dot")
    if exe is None:
        raise CompileError(
            f"rendering '{out}' needs Graphviz's `dot` on PATH, and there is none: install "
            f"Graphviz, or write the DOT text with fusion_graph('{out.with_suffix('.dot')}') "
            f"and render it where Graphviz is (dot -T{out.suffix[1:].lower()} ...)"
        )
    fmt = out.suffix[1:].lower()
    try:
        done = subprocess.run(
            [exe, f"-T{fmt}", "-o", str(out)],
            input=text,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as e:
        raise CompileError(f"cannot run Graphviz's dot ({exe}): {e.strerror}") from None
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
        raise CompileError(f"Graphviz's dot could not render '{out}': {first}")


def _entry_point(model: Callable[..., Any]) -> Callable[..., Any]:
    """A function calling `model`, with a code object of its own.

    Dynamo keeps compiled entries, and counts them against its recompile limit (8), per
    code object. Compiling `model` itself would share one count among every
    CompiledModule of the same class (or function), so the ninth silently ran eagerly;
    a fresh code object gives each CompiledModule its own cache.

    The code object also has a name of its own, ``call_<model>_<n>`` (the model's class
    or function name, and how many entry points of that name the process made before):
    Dynamo's automatic dynamic shapes remember the sizes seen per code identity (file,
    first line, name, a hash of the closure), so entry points sharing one name made
    every CompiledModule after the first in a process trace symbolic sizes from its
    first call, whatever the model, and pay the symbolic path's host work. With the
    model in the name, a shape profile Dynamo saves across runs (PGO, under
    `torch.compiler.config.job_id`) goes to the same model in the next run, not to
    whichever was compiled n-th. Frames Dynamo enters after a graph break are the
    model's own code, shared by every instance of its class, as under torch.compile.

    The function runs in the globals of the model's own code (its `forward`'s module):
    Dynamo resolves the globals of an inlined function through the root frame's when
    they are the same dictionary, and otherwise imports the function's module by name,
    which fails for a class defined by exec'd source (notebooks, generated code) while
    `torch.compile(model)` works.
    """

    # a module is entered through `_call_impl` (hooks, then forward), never through
    # `__call__`, which a method run by `_through_compiled_forward` routes back here
    call = model._call_impl if isinstance(model, torch.nn.Module) else model

    def call_model(*args: Any, **kwargs: Any) -> Any:
        return call(*args, **kwargs)

    owner = type(model) if isinstance(model, torch.nn.Module) else model
    label = re.sub(r"\W", "_", getattr(owner, "__qualname__", type(owner).__name__))
    name = f"call_{label}_{_ENTRY_POINTS[label]}"
    _ENTRY_POINTS[label] += 1
    # a distinct code object with a distinct name, same instructions
    code = call_model.__code__.replace(co_name=name, co_qualname=name)
    return types.FunctionType(code, _model_globals(model), name, None, call_model.__closure__)


_ENTRY_POINTS: Counter[str] = Counter()
"""How many entry points (`_entry_point`) the process made per model name."""


def _model_globals(model: Callable[..., Any]) -> dict[str, Any]:
    """The globals of the code `model` runs first: its class's `forward` for a module,
    the function's own otherwise (this module's when there are none)."""
    forward = getattr(type(model), "forward", None) if isinstance(model, torch.nn.Module) else None
    code_owner = inspect.unwrap(forward or model)
    return getattr(code_owner, "__globals__", None) or globals()


def fused_module(region: RegionRecord) -> ModuleOp:
    """The region's nn IR after nn-fuse: the backend's `fused_module`, else FUSE run on
    a copy of the imported IR (what `fusion_report()` and the benchmarks tabulate).

    The imported IR is held in memory, so this works whatever became of the backend's
    files: a `fused_module` the backend can no longer produce (its kernel cache was
    deleted since compiling) is rebuilt from the imported IR."""
    try:
        fused = getattr(region.compiled, "fused_module", None)
    except (CompileError, OSError, ValueError):
        fused = None
    if isinstance(fused, ModuleOp):
        return fused
    from fuseopt.pipelines import FUSE, run_pipeline

    return run_pipeline(region.imported.clone(), FUSE)


_fused_module = fused_module  # the name benchmarks/systems.py first used


def _unique_name(directory: Path, stem: str, suffix: str, taken: Mapping[str, str]) -> str:
    stem = _FILE_NAME.sub("_", stem).lstrip(".") or "kernel"
    suffix = suffix if re.fullmatch(r"\.[A-Za-z0-9]{1,8}", suffix) else ".txt"
    name, n = f"{stem}{suffix}", 1
    while name in taken.values() or name in ("index.md", "index.json"):
        n += 1
        name = f"{stem}_{n}{suffix}"
    return name


def _index_markdown(backend: str, entries: list[dict[str, Any]]) -> str:
    lines = [
        f"# fuseopt kernels ({backend} backend)",
        "",
        "| kernel | region | schedule | launch | fused ops | file |",
        "|---|---|---|---|---|---|",
    ]
    for e in entries:
        ops = ", ".join(e["ops"])
        lines.append(
            f"| {e['kernel']} | {e['region']} | {e['schedule']} | {e['launch'] or '-'} "
            f"| {ops} | {e['file'] or '(no source)'} |"
        )
    return "\n".join(lines) + "\n"


def compile(
    model: Callable[..., Any],
    example_inputs: Any = None,
    backend: str = DEFAULT_BACKEND,
    mode: str | None = None,
    dynamic: bool | None = None,
    **options: Any,
) -> CompiledModule:
    """Compile a PyTorch model (an `nn.Module` or function) with fuseopt.

    Returns a CompiledModule used exactly like the model. With `example_inputs` (a
    tensor or a tuple of arguments) it is compiled now, by one call; otherwise on first
    use. Extra keyword options go to the backend (`strict=True`: a backend failure is
    raised rather than run eagerly). An unknown or unavailable backend, or an unknown
    `mode`, raises a ConfigurationError at once.

    `dynamic` is torch.compile's: None (the default) traces the first shapes statically
    and, when a size changes, once more with that size symbolic; True traces symbolic
    sizes from the start; False recompiles for every new shape (up to Dynamo's
    recompile limit, then the model runs eagerly). A symbolic graph is one Dynamo entry
    (no further recompiles); when its symbolic sizes are one symbol (a batch, or a
    sequence length), its kernels take the size at run time: compiled once for every
    size (docs/api.md, "Shapes").
    """
    if not callable(model):
        raise CompileError(f"fuseopt.compile needs an nn.Module or a function, got {model!r}")
    check_mode(mode)
    resolve_backend(backend)
    if dynamic not in (None, True, False):
        raise ConfigurationError(f"dynamic must be None, True or False, got {dynamic!r}")
    compiled = CompiledModule(model, backend, mode, options, dynamic)
    if example_inputs is not None:
        try:
            compiled(*_as_args(example_inputs))
        except DeviceUnavailableError:
            if not compiled.kernels:
                raise
            # compiled for a device this machine lacks: kernels and save() work, a call raises
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

    An op without an nn lowering is kept as an `nn.torch_call` of its ATen op (a fusion
    barrier the backends run with PyTorch), so every model exports; the text runs again
    through `fuseopt.load_mlir`. Raises CompileError when PyTorch cannot capture the
    model, and UnsupportedOpError (a located CompileError) for an op that cannot even be
    kept as a call (an argument of an unknown kind, a non-tensor result).
    """
    from fuseopt.frontends.fx.importer import import_graph

    module = model if isinstance(model, torch.nn.Module) else _function_module(model)
    if not isinstance(model, torch.nn.Module):
        # torch.export keeps only `forward` frames in stack traces; anchoring the user's
        # function keeps its lines too, so imported ops are located in it
        anchor = getattr(torch.fx.proxy, "_register_stack_trace_anchor", None)
        if anchor is not None and hasattr(model, "__code__"):
            anchor(model)
    try:
        with warnings.catch_warnings():
            # PyTorch's own pytree deprecation, not about the user's model
            warnings.filterwarnings("ignore", ".*LeafSpec", FutureWarning)
            program = torch.export.export(module, _as_args(example_inputs))
            program = program.run_decompositions({})
    except Exception as e:  # PyTorch's capture errors are many types
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CompileError(f"torch.export could not capture the model: {first}") from None
    return str(import_graph(program.graph_module, "forward", opaque=True))
