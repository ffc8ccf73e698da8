"""fuseopt as a TorchDynamo backend: `torch.compile(model, backend="fuseopt")`.

Dynamo captures Python-level graphs; AOTAutograd functionalizes them into ATen graphs
(forward, and backward when gradients are needed), applying the decompositions below
so that backward ops reach the importer as ATen primitives. Each ATen graph goes
through the fallback partitioner: regions the op table takes are imported to nn and
compiled by the chosen fuseopt backend; everything else runs eagerly. Before
AOTAutograd, a graph that needs gradients has its written-out attention replaced by
PyTorch's SDPA (`explicit_attention`, except under attention="nn").

Options (`torch.compile(..., options={...})`): `backend` (fuseopt backend name,
default "triton"); `strict` (default False: a region the backend fails on runs eagerly
and is logged as a fallback; True: the backend's error is raised); `attention`
("fused": PyTorch's fused attention kernels become `nn.attention`, one flash-attention
kernel each; "nn": decomposed into matmul, softmax and matmul; "eager": left to
PyTorch; the default is the backend's, `default_attention`: "fused" except on the CUDA
backend, whose attention kernel is still slow); every other key is passed to the
backend, which rejects keys it does not know with a ConfigurationError;
`symbolic` (how a graph Dynamo traced with symbolic sizes is compiled: "auto", the
default, "dynamic", "partition" or "specialize"; see `compile_symbolic`);
`merge_linears` (default True, False under mode="reduce-overhead" and "max-autotune",
where CUDA graphs make launches free: in graphs that need no gradient, linear layers
reading one input run as one GEMM over their weights, which move into one buffer at the
first call; `merged_linears`).
The registration is the `torch_dynamo_backends` entry point `fuseopt` in pyproject.toml.

A graph traced on meta-device inputs runs eagerly in PyTorch (logged at INFO): meta
tensors hold no data for kernels to read, and PyTorch's meta kernels give the outputs'
shapes, dtypes and strides exactly as eager does.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from functorch.compile import make_boxed_func
from torch._decomp import get_decompositions
from torch._dynamo.backends.common import aot_autograd
from torch.fx import GraphModule, Node
from xdsl.dialects.builtin import ModuleOp

from fuseopt.diagnostics import ConfigurationError
from fuseopt.frontends.fx import norm_decompositions
from fuseopt.frontends.fx.attention_call import (
    align_attention_biases,
    needs_no_gradient,
    substitute_attention,
)
from fuseopt.frontends.fx.common_calls import merge_repeated_calls
from fuseopt.frontends.fx.errors import RegionFallback, first_line
from fuseopt.frontends.fx.explicit_attention import sdpa_from_explicit
from fuseopt.frontends.fx.grouped_heads import read_keys_values_unrepeated
from fuseopt.frontends.fx.merged_linears import merge_linears, pack_at_run_time
from fuseopt.frontends.fx.ops_attention import FUSED_ATTENTION
from fuseopt.frontends.fx.partition import CompileRecord, RegionRecord, compile_graph_module
from fuseopt.frontends.fx.shape_versions import (
    GeneralizingGraph,
    ShapeSpecializedGraph,
    has_symbolic_shapes,
    stop_if_pinned,
    symbol_positions,
    traced_inputs,
)
from fuseopt.frontends.fx.symbolic_sizes import graph_symbol, graph_symbols
from fuseopt.frontends.fx.whole_graph import replayed_whole
from fuseopt.passes.generalize_sizes import HINTS, SizedFunction
from fuseopt.passes.nn_decompose import decompose_every_attention

aten = torch.ops.aten

logger = logging.getLogger("fuseopt")

DEFAULT_BACKEND = "triton"
"""The fuseopt backend used when options name none."""

ATTENTION_MODES = ("fused", "nn", "eager")
"""Values of the `attention` option (see the module docstring)."""

ATTENTION_REASON = (
    "PyTorch's fused attention kernel (option attention='eager', the CUDA backend's default)"
)
"""The fallback reason logged for fused attention under attention='eager'."""

DECOMPOSED_OPS = [
    aten.native_layer_norm_backward,
    aten.gelu_backward,
    aten.silu_backward,
    aten.sigmoid_backward,
    aten.tanh_backward,
    aten.threshold_backward,
    aten.hardtanh_backward,
    aten.leaky_relu_backward,
    aten.elu_backward,
    aten.softplus_backward,
    aten.mish_backward,
    aten._softmax_backward_data,
    aten._log_softmax_backward_data,
    aten.native_dropout_backward,
    aten.mse_loss,
    aten.mse_loss_backward,
    aten.addcmul,
    aten.addcdiv,
    aten.hardswish,
    aten.hardsigmoid,
    aten.logsumexp,
    aten.smooth_l1_loss,
    aten.smooth_l1_loss_backward,
    aten.huber_loss,
    aten.huber_loss_backward,
    aten.native_group_norm,
    aten.native_group_norm_backward,
    aten.native_batch_norm,
    aten.native_batch_norm_backward,
    aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_no_training,
    aten._native_batch_norm_legit_functional,
    aten.repeat,
]
"""Ops AOTAutograd expands (via torch._decomp) into ops the table takes. Forward
composites the fuser wants whole (softmax, layer_norm, gelu, ...) are kept; the norm
families (GroupNorm, with fuseopt's decomposition, `decompositions`; BatchNorm in every
mode; InstanceNorm with running statistics, through `repeat`) and their backward are
expanded into statistics and a per-channel scale and shift, as Inductor runs them.
InstanceNorm without running statistics never reaches the table: Dynamo's graph calls
fuseopt's substitute (`norm_decompositions.substitute_composites`)."""


def generated_forward(gm: GraphModule) -> Callable[..., Any]:
    """`gm`'s generated `forward`, called directly on every call. A graph module whose
    code is regenerated lazily (`_LazyGraphModule`, what Dynamo and AOTAutograd hand a
    backend) has as `forward` a wrapper that checks for regeneration and then calls the
    module (`GraphModule.__call__`, `nn.Module`'s call path: a handful of Python frames
    per call); regenerated now, `forward` is the code itself."""
    regenerate = getattr(gm, "real_recompile", None)
    if regenerate is not None:
        regenerate()
    return gm.forward


def decompositions() -> dict[Any, Callable[..., Any]]:
    """The decomposition table handed to AOTAutograd: PyTorch's for DECOMPOSED_OPS, with
    fuseopt's own GroupNorm (`norm_decompositions`: one form on every device, without
    a reshape between the statistics' and the channels' shapes)."""
    table = get_decompositions(DECOMPOSED_OPS)
    table[aten.native_group_norm.default] = norm_decompositions.native_group_norm
    return table


def fuseopt_backend(
    gm: GraphModule,
    example_inputs: Sequence[Any],
    options: Mapping[str, Any] | None = None,
    mode: str | None = None,
    record: CompileRecord | None = None,
) -> Callable[..., Any]:
    """The Dynamo backend: compile `gm` (a Dynamo FX graph) with a fuseopt backend.

    Raises `fuseopt.diagnostics.BackendUnavailableError` when the named backend is unknown or
    not available (before any compilation work), and a ConfigurationError for a bad
    option or mode.
    """
    from fuseopt.backends.contract import (
        GRAPH_MODES,
        check_mode,
        default_attention,
        resolve_backend,
        sizes_at_run_time,
    )

    settings = dict(options or {})
    backend_name = settings.pop("backend", DEFAULT_BACKEND)
    backend = resolve_backend(backend_name)
    strict = settings.pop("strict", False)
    if not isinstance(strict, bool):
        raise ConfigurationError(f"option 'strict' must be True or False, got {strict!r}")
    attention = settings.pop("attention", default_attention(backend_name))
    if attention not in ATTENTION_MODES:
        raise ConfigurationError(
            f"option 'attention' must be one of {', '.join(ATTENTION_MODES)}, got {attention!r}"
        )
    eager = dict.fromkeys(FUSED_ATTENTION, ATTENTION_REASON) if attention == "eager" else {}
    asked_mode = mode if mode is not None else settings.get("mode")
    graphing = asked_mode in GRAPH_MODES
    # CUDA graphs launch for free
    merging = settings.pop("merge_linears", not graphing)
    if not isinstance(merging, bool):
        raise ConfigurationError(f"option 'merge_linears' must be True or False, got {merging!r}")
    symbolic = settings.pop("symbolic", "auto")
    if symbolic not in SYMBOLIC_MODES:
        raise ConfigurationError(
            f"option 'symbolic' must be one of {', '.join(SYMBOLIC_MODES)}, got {symbolic!r}"
        )
    check_mode(asked_mode)
    if mode is not None:
        settings["mode"] = mode
    log = record if record is not None else CompileRecord()
    if on_meta_device(example_inputs):
        logger.info("fuseopt: a graph traced on meta tensors runs eagerly (no data to compute)")
        return generated_forward(gm)

    def compile_region(
        module: ModuleOp | SizedFunction, func_name: str
    ) -> Callable[..., Sequence[torch.Tensor]]:
        if isinstance(module, SizedFunction):  # a region of a symbolic size
            imported = module.at(HINTS[0])
            if attention == "nn":
                module = dataclasses.replace(module, at=decomposed_at(module.at))
        else:
            if attention == "nn":
                decompose_every_attention(module)
            imported = module.clone()
        try:
            compiled = backend.compile(module, func_name, settings)
        except ConfigurationError:
            raise
        except Exception as e:  # a backend bug or limit: run the region eagerly
            if strict:
                raise
            raise RegionFallback(
                f"backend '{backend_name}' failed ({type(e).__name__}: {first_line(e)})"
            ) from None
        kernels = [
            k if getattr(k, "region", func_name) else dataclasses.replace(k, region=func_name)
            for k in compiled.kernels
        ]
        log.kernels.extend(kernels)
        log.regions.append(RegionRecord(func_name, func_name.rsplit("_", 1)[0], imported, compiled))
        logger.debug(
            "fuseopt: compiled %s with '%s': %d kernel(s)", func_name, backend_name, len(kernels)
        )
        return compiled

    def graph_compiler(kind: str) -> Callable[[GraphModule, Sequence[Any]], Callable[..., Any]]:
        def compile_aten_graph(aten_gm: GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
            stop_if_pinned()  # a version traced to be dropped: compile nothing for it
            name = f"{kind}{len(log.graphs)}"
            guarded = kind != "backward" and frame_inputs(gm, aten_gm)
            symbol = graph_symbol(aten_gm) if symbolic in ("auto", "dynamic") else None
            if packs and kind == "inference":
                pack_at_run_time(aten_gm, packs, name)  # the merged linears' weights
            if attention == "eager" and kind == "inference":
                read_keys_values_unrepeated(aten_gm)  # no copy of grouped-query K and V
            merged = merge_repeated_calls(aten_gm)  # one value per layer-repeated call
            if merged:
                logger.debug("fuseopt: %s: merged %d repeated call(s)", name, merged)
            compiled = compile_graph_module(
                aten_gm,
                name,
                compile_region,
                log,
                eager,
                guarded_inputs=guarded,
                symbol=symbol,
                output_views=kind == "inference",
            )
            forward = generated_forward(align_attention_biases(compiled))
            if graphing:  # one CUDA graph over its regions and PyTorch ops, where it can
                forward = replayed_whole(
                    forward, compiled, name, inputs, log, kind == "inference" and guarded
                )
            return make_boxed_func(forward)

        return compile_aten_graph

    def compile_static(graph: GraphModule, inputs: Sequence[Any]) -> Callable[..., Any]:
        return aot_autograd(
            fw_compiler=graph_compiler("forward"),
            bw_compiler=graph_compiler("backward"),
            inference_compiler=graph_compiler("inference"),
            decompositions=decompositions(),
        )(graph, inputs)

    gm = norm_decompositions.substitute_composites(gm)
    inference = needs_no_gradient(gm, example_inputs)
    if attention != "eager" and inference:
        gm = substitute_attention(gm)  # one node whatever kernel the device would pick
    elif not inference and attention != "nn":
        gm = sdpa_from_explicit(gm)  # no L x S scores kept for the backward
    packs = merge_linears(gm, example_inputs) if merging and inference else set()
    if has_symbolic_shapes(example_inputs):
        # decomposed attention over a symbolic key length sums over it in a GEMM, which
        # needs a static size: compiled per size, so versions would not pay
        run_time = sizes_at_run_time(backend) and attention != "nn"
        return compile_symbolic(gm, example_inputs, compile_static, symbolic, run_time)
    return compile_static(gm, example_inputs)


def decomposed_at(at: Callable[[int], ModuleOp]) -> Callable[[int], ModuleOp]:
    """`at` (a SizedFunction's) with every attention op decomposed (attention="nn")."""

    def decomposed(n: int) -> ModuleOp:
        module = at(n)
        decompose_every_attention(module)
        return module

    return decomposed


SYMBOLIC_MODES = ("auto", "dynamic", "partition", "specialize")
"""Values of the `symbolic` option (see `compile_symbolic`)."""

MAX_SYMBOLIC_SHARE = 0.5
"""Under symbolic="auto", a symbolic-size graph is compiled once (its symbolic ops in
PyTorch) when less than this share of its tensor ops (views aside) touch symbolic
sizes, and per concrete shape otherwise."""


def compile_symbolic(
    gm: GraphModule,
    example_inputs: Sequence[Any],
    compile_static: Callable[[GraphModule, Sequence[Any]], Callable[..., Any]],
    symbolic: str,
    run_time_sizes: bool = False,
) -> Callable[..., Any]:
    """Compile a graph Dynamo traced with symbolic sizes.

    nn types are static, so fuseopt's kernels cannot take a symbolic size. Two ways:
    - "partition": compile the graph once, symbolic as it is; the fallback partitioner
      runs every op with a symbolic size in PyTorch (each listed in the fallback log)
      and compiles the rest. No new shape ever recompiles. Right when the sizes that
      change touch few ops, as a decode step's growing KV cache touches only the
      cache concatenation and the attention;
    - "specialize": `ShapeSpecializedGraph`, every op compiled, once per concrete
      shape. Right when the symbolic size runs through the whole graph (a batch size)
      and a few shapes repeat.
    - "dynamic": when all the graph's symbolic sizes are one symbol (a batch, or a
      sequence length), compile it once for every size: kernels take the size at run
      time (`symbolic_sizes`); ops whose sizes are not whole multiples of the symbol (a
      KV cache's `s + 1`) and attention over a symbolic sequence length run in PyTorch.
      A graph of several symbols is compiled in versions of one symbolic size each,
      the other sizes fixed (`shape_versions.GeneralizingGraph`); when a symbol cannot
      be read from the call's arguments, it is partitioned.
    "auto" is "dynamic" for a graph of one symbol. For several, it is "dynamic"
    (versions) when the backend takes sizes at run time (`run_time_sizes`: a decode
    step's attention and the ops past its cache's `cat` then compile once); else it
    partitions when less than MAX_SYMBOLIC_SHARE of the graph's tensor ops (views
    aside) read or make a tensor of symbolic size (a decode step: only the cache's ops),
    and is "dynamic" otherwise. When a symbol cannot be read from the call, "auto"
    specializes a graph of that share or more, and partitions one of less."""
    share = symbolic_share(gm)
    symbols = graph_symbols(gm)
    traced = traced_inputs(gm, example_inputs)
    positions = symbol_positions(traced, symbols) if len(symbols) > 1 else None
    partitioned = None
    if symbolic == "auto":
        if len(symbols) > 1 and share < MAX_SYMBOLIC_SHARE:
            # a version may pin its size (a sliding-window cache): partition instead

            def partitioned() -> Callable[..., Any]:  # later: Dynamo's fakes, not the inputs
                return compile_static(gm, traced)

        if len(symbols) == 1 or (positions is not None and run_time_sizes):
            symbolic = "dynamic"
        elif share < MAX_SYMBOLIC_SHARE:
            symbolic = "partition"
        else:
            symbolic = "specialize" if positions is None else "dynamic"
    elif symbolic == "dynamic" and len(symbols) > 1 and positions is None:
        symbolic = "partition"
    versions = symbolic == "dynamic" and len(symbols) > 1
    logger.info(
        "fuseopt: a graph with symbolic sizes (%.0f%% of its tensor ops): %s",
        100 * share,
        "compiled in versions, each for every value of one size"
        if versions
        else {
            "dynamic": "compiled once for every size",
            "partition": "compiled once, its symbolic-size ops run in PyTorch",
            "specialize": "compiled per concrete shape",
        }[symbolic],
    )
    if versions:
        # sizes Dynamo made symbolic itself, or was told to, are those that change;
        # under dynamic=True (every size symbolic) the calls tell which
        all_varying = torch._dynamo.config.assume_static_by_default
        return GeneralizingGraph(gm, compile_static, traced, positions, all_varying, partitioned)
    if symbolic in ("dynamic", "partition"):
        return compile_static(gm, example_inputs)
    return ShapeSpecializedGraph(gm, compile_static)


def symbolic_share(gm: GraphModule) -> float:
    """The share of `gm`'s tensor-valued calls that are not views (Dynamo's example
    values) that read or make a tensor with a symbolic size (a reduction over a symbolic
    axis has a static result but cannot compile either); 1.0 for a graph without any."""

    def symbolic(n: Node) -> bool:
        v = n.meta.get("example_value")
        return isinstance(v, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in v.shape)

    calls = [
        n
        for n in gm.graph.nodes
        if n.op in ("call_function", "call_method", "call_module")
        and isinstance(v := n.meta.get("example_value"), torch.Tensor)
        and not v._is_view()  # views move no data: an SDPA behind a mask view is one op
    ]
    if not calls:
        return 1.0
    touched = sum(symbolic(n) or any(symbolic(a) for a in n.all_input_nodes) for n in calls)
    return touched / len(calls)


def frame_inputs(gm: GraphModule, aten_gm: GraphModule) -> bool:
    """Whether `aten_gm`'s placeholders are, one for one, the inputs of the Python frame
    Dynamo traced into `gm`, whose guards pin their sizes, strides and dtypes per call.
    Not so for a backward graph (saved tensors, gradients), a piece of a graph DDP split
    (its inputs are the previous pieces' outputs: a compiled region's may have a padded
    row pitch its traced value does not show), or AOTAutograd's synthetic bases (one
    base for aliased inputs, sized as no guard checks)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    aten = [n for n in aten_gm.graph.nodes if n.op == "placeholder"]
    return len(aten) == len(placeholders) and all(
        n.meta.get("grapharg") is not None for n in placeholders
    )


def on_meta_device(example_inputs: Sequence[Any]) -> bool:
    """Whether any example input is a tensor on the meta device (Dynamo passes fake
    tensors that report the device of the real inputs)."""
    return any(isinstance(x, torch.Tensor) and x.device.type == "meta" for x in example_inputs)
