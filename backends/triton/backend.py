"""The Triton backend: nn IR in, a callable running fused Triton kernels out.

`compile_module(module, func_name, options)`:
1. key the work: SHA-256 of the nn IR text, function, pipeline, tile options and tool
   versions (`fuseopt.backends.kernel_cache.cache_key`);
2. on a cache hit, load the printed module and its index from the cache (no pass runs);
3. otherwise run the standard pipeline as pass objects with the Triton target's tile
   options (`backends/targets.py` TRITON, forced sizes applied), print with `print_triton`,
   and store the source, its index and the tile IR in the cache (atomic writes);
4. mode="max-autotune": time the tiling pass's candidate configurations on the GPU
   (`fuseopt.backends.autotune`), per kernel, at the first call on a device;
5. wrap: `TritonFunction` (launch on the inputs' device and current stream), or
   `CudaGraphFunction` for mode="reduce-overhead" / "max-autotune" when the function
   launches more than one kernel (a graph does not beat one direct launch).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from fuseopt.backends.contract import GRAPH_MODES, KernelRecord
from fuseopt.backends.cuda_graphs import CudaGraphFunction
from fuseopt.backends.kernel_cache import KernelCache, cache_key
from fuseopt.backends.per_size import PerSizeFunction, parse_specialized
from fuseopt.backends.targets import TRITON
from fuseopt.backends.triton.host_runs import print_run_host
from fuseopt.backends.triton.launchers import install_fast_launchers
from fuseopt.backends.triton.printer import KernelInfo, assemble, print_triton, standalone
from fuseopt.backends.triton.runtime import TritonFunction, load_module
from fuseopt.diagnostics import CompileError
from fuseopt.dialects import tile_host, torch_call
from fuseopt.passes.generalize_sizes import (
    SizeDependentLowering,
    SizedFunction,
    has_dynamic_functions,
    lower_dynamic,
    lower_sized,
    replace_body,
)
from fuseopt.pipelines import LoweringOptions

logger = logging.getLogger("fuseopt")

NAMESPACE = "triton"
"""The kernel cache namespace of this backend."""


def lower(module: ModuleOp, lowering: LoweringOptions | None = None) -> ModuleOp:
    """Run FUSE, then the tile stage `lowering` builds (the Triton target's defaults when
    None), in place; return a clone taken after FUSE.

    A module already in tile IR is left as it is (it can be printed directly).
    """
    from fuseopt.pipelines import pipeline_passes, run_passes

    if tile_host.is_tile_module(module):
        return module.clone()
    if has_dynamic_functions(module):
        # lowered at size hints, then made of dynamic size (passes/generalize_sizes.py)
        tiled, fused = lower_dynamic(module, lambda m: lower(m, lowering), parse_specialized)
        replace_body(module, tiled)
        return fused
    run_passes(module, pipeline_passes("fuse"))
    fused = module.clone()
    run_passes(module, (lowering or TRITON.defaults).passes())
    return fused


@dataclass
class Compiled:
    """A printed module in the cache: its key, file, source and index."""

    key: str
    path: Path
    source: str
    index: dict[str, Any]


def print_and_store(
    module: ModuleOp | SizedFunction,
    func_name: str,
    key: str,
    cache: KernelCache,
    lowering: LoweringOptions,
) -> Compiled:
    """Lower, print and cache; the index describes kernels and the host function. A
    SizedFunction is lowered at its size hints into `module`, a new module."""
    if isinstance(module, SizedFunction):
        module, fused = lower_sized(module, lambda m: lower(m, lowering))
    else:
        fused = lower(module, lowering)
    printed = print_triton(module)
    host = printed.hosts.get(func_name)
    if host is None:
        raise CompileError(f"no function @{func_name} in the compiled module")
    host_op = next(
        op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == func_name
    )
    run_host = print_run_host(host_op, {k.ir_name: k for k in printed.kernels})
    index = {
        "function": func_name,
        "host": host.py_name,
        "inputs": [[list(s), d] for s, d in host.inputs],
        "outputs": [[list(s), d] for s, d in host.outputs],
        "launches": host.launches,
        "key": key,
        "host_sources": printed.host_sources,
        "run_host": run_host,
        "kernels": [
            {
                "name": k.ir_name,
                "python": k.py_name,
                "launcher": k.launcher,
                "grid": list(k.grid),
                "schedule": k.schedule,
                "num_warps": k.num_warps,
                "num_stages": k.num_stages,
                "ops": list(k.ops),
                "source": k.source,
                "triton": k.triton,
                "helpers": list(k.helpers),
                "args": [[list(sh), d] for sh, d in k.args],
                "kernel_source": k.kernel_source,
                "params": list(k.params),
                "sizes": [list(s) for s in k.sizes],
            }
            for k in printed.kernels
        ],
    }
    cache.put_text(NAMESPACE, key, "fused.mlir", str(fused))
    cache.put_text(NAMESPACE, key, "tile.mlir", str(module))
    cache.put_json(NAMESPACE, key, "index.json", index)
    path = cache.put_text(NAMESPACE, key, "kernels.py", printed.source)
    return Compiled(key, path, printed.source, index)


def _shapes_and_dtypes(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, list)
        and len(v) == 2
        and isinstance(v[0], list)
        and all(isinstance(d, int) for d in v[0])
        and isinstance(v[1], str)
        for v in value
    )


KERNEL_FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "python": str,
    "launcher": str,
    "grid": list,
    "schedule": str,
    "num_warps": int,
    "num_stages": int,
    "ops": list,
    "source": str,
    "kernel_source": str,
    "params": list,
}
"""Fields of a kernel entry in index.json that the backend reads, with their types."""


def valid_index(index: Any) -> bool:
    """Whether a cached index.json holds what `print_and_store` writes and this backend
    reads (an entry of another shape is rebuilt, never trusted)."""
    if not isinstance(index, dict):
        return False
    if not all(isinstance(index.get(k), str) for k in ("function", "host")):
        return False
    if not (_shapes_and_dtypes(index.get("inputs")) and _shapes_and_dtypes(index.get("outputs"))):
        return False
    launches, kernels = index.get("launches"), index.get("kernels")
    if not (isinstance(launches, list) and all(isinstance(n, str) for n in launches)):
        return False
    if not isinstance(index.get("host_sources"), list) or not isinstance(kernels, list):
        return False
    for k in kernels:
        if not isinstance(k, dict):
            return False
        if not all(isinstance(k.get(f), t) for f, t in KERNEL_FIELDS.items()):
            return False
    names = {k["name"] for k in kernels}
    return all(n in names or n == "library_gemm" for n in launches)


def from_cache(key: str, cache: KernelCache) -> Compiled | None:
    """The printed module and index cached at `key` (None when absent, corrupt or of the
    wrong shape: the caller then rebuilds it)."""
    index = cache.get_json(NAMESPACE, key, "index.json", check=valid_index)
    source = cache.get_text(NAMESPACE, key, "kernels.py")
    if not isinstance(index, dict) or source is None:
        return None
    return Compiled(key, cache.path(NAMESPACE, key, "kernels.py"), source, index)


def _torch_dtype(text: str) -> torch.dtype:
    dtype = getattr(torch, text.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise CompileError(f"corrupt kernel index: unknown dtype {text!r}")
    return dtype


def kernel_records(compiled: Compiled) -> list[KernelRecord]:
    """One record per kernel launch of the host function (library GEMMs and calls of
    PyTorch ops included)."""
    by_name = {k["name"]: k for k in compiled.index["kernels"]}
    records = []
    for name in compiled.index["launches"]:
        if name == "library_gemm":
            records.append(
                KernelRecord("library_gemm", ("nn.matmul",), "library_gemm", None, ".py", "cuBLAS")
            )
            continue
        if name not in by_name and torch_call.TARGET.fullmatch(name):
            records.append(
                KernelRecord(name, ("nn.torch_call",), "torch_call", None, ".py", "PyTorch")
            )
            continue
        k = by_name[name]
        if k.get("triton", True):
            launch = f"grid {tuple(k['grid'])}, {k['num_warps']} warps, {k['num_stages']} stages"
        else:
            launch = "PyTorch (whole-tensor fallback)"
        records.append(
            KernelRecord(
                k["name"],
                tuple(k["ops"]),
                k["schedule"],
                standalone(k["source"], k.get("helpers", [])),
                ".py",
                launch,
            )
        )
    return records


def compile_module(
    module: ModuleOp | SizedFunction,
    func_name: str,
    options: Mapping[str, Any] | None = None,
    cache: KernelCache | None = None,
) -> TritonFunction | CudaGraphFunction:
    """Compile `func_name` of nn `module` to Triton (see the module docstring).

    Options: `mode` (None, "default", "reduce-overhead", "max-autotune",
    "max-autotune-no-cudagraphs"), `cache_dir` (overrides FUSEOPT_CACHE_DIR),
    forced tile sizes by convert-nn-to-tile option name ("block-m": 64, ...), `precision`.
    """
    from fuseopt.backends.contract import check_mode, check_options

    options = dict(options or {})
    mode = options.get("mode")
    check_mode(mode)
    check_options(NAMESPACE, options, {"cache_dir", *TRITON.option_names()})
    lowering = TRITON.lowering(options)
    cache = cache or KernelCache(options.get("cache_dir"))
    try:
        cache.ensure_root()
    except OSError as e:
        from fuseopt.diagnostics import ConfigurationError

        raise ConfigurationError(
            f"the kernel cache directory cannot be used (FUSEOPT_CACHE_DIR or cache_dir): {e}"
        ) from None
    sized = isinstance(module, SizedFunction)
    text = module.key() if sized else str(module)
    key = variant_key(text, func_name, lowering)
    compiled = from_cache(key, cache)
    if compiled is None:
        try:
            compiled = print_and_store(module, func_name, key, cache, lowering)
        except SizeDependentLowering as e:
            if not isinstance(module, SizedFunction):
                raise
            return _per_size(module, func_name, options, cache, e)
    fn = wrap(compiled, cache, key)
    # a SizedFunction has no one text to re-lower per candidate: its heuristic tiling
    if mode in ("max-autotune", "max-autotune-no-cudagraphs") and not sized:
        from fuseopt.backends.autotune import AutotunedFunction

        fn = AutotunedFunction(fn, text, func_name, lowering, cache, key)  # type: ignore[assignment]
    if mode in GRAPH_MODES and len(compiled.index["launches"]) > 1:
        # one launch: replaying a graph costs more host time than the direct launch
        return CudaGraphFunction(fn)
    return fn


def _per_size(
    sized: SizedFunction,
    func_name: str,
    options: Mapping[str, Any],
    cache: KernelCache,
    why: SizeDependentLowering,
) -> Any:
    """`sized` compiled once per size a call brings, its lowering depending on the size
    (`why`; a region traced with a symbolic size: the frontend's, never a `?` module,
    whose refusal the user asked to see)."""
    logger.info(
        "fuseopt: %s is compiled per size (its lowering depends on the size: %s)",
        func_name,
        why.message,
    )
    return PerSizeFunction(sized, lambda m: compile_module(m, func_name, options, cache), "triton")


def load_compiled(compiled: Compiled, interpret: bool, cache: KernelCache) -> Any:
    """Import a compiled module (GPU: printed launchers become FastLaunchers, their
    binaries kept in `cache`'s private `triton-binaries` directory)."""
    mod = load_module(compiled.path, f"k{compiled.key[:20]}", interpret)
    if not interpret and not getattr(mod, "_fuseopt_fast", False):
        launchers = [
            (
                k["launcher"],
                k["python"],
                tuple(k["grid"]),
                k["num_warps"],
                k["num_stages"],
                len(k["params"]) - len(k.get("sizes", ())),
            )
            for k in compiled.index["kernels"]
            if k.get("triton", True)
        ]
        binaries = cache.directory("triton-binaries")
        install_fast_launchers(mod, launchers, str(binaries))
        mod._fuseopt_fast = True
    return mod


def wrap(compiled: Compiled, cache: KernelCache, key: str) -> TritonFunction:
    """The TritonFunction running `compiled` (IR parsed lazily from the cache)."""

    def ir(name: str) -> ModuleOp:
        """Parse the cached IR entry `name` (fused.mlir, tile.mlir)."""
        from fuseopt import parse

        text = cache.get_text(NAMESPACE, key, name)
        if text is None:
            raise CompileError(f"{name} of this function is no longer in the cache")
        return parse(text)

    index = compiled.index
    inputs = [(tuple(s), _torch_dtype(d)) for s, d in index["inputs"]]
    return TritonFunction(
        index["host"],
        inputs,
        lambda interpret: load_compiled(compiled, interpret, cache),
        kernel_records(compiled),
        compiled.source,
        compiled.path,
        ir,
        index,
    )


def variant_key(ir_text: str, func_name: str, lowering: LoweringOptions) -> str:
    """The cache key of `func_name` in nn IR `ir_text` lowered with `lowering`."""
    return cache_key(ir=ir_text, function=func_name, pipeline=lowering.spec(), backend=NAMESPACE)


def compile_variant(
    ir_text: str, func_name: str, lowering: LoweringOptions, cache: KernelCache
) -> Compiled:
    """`ir_text` lowered with `lowering` (forced tile sizes) and printed (through the
    cache)."""
    from fuseopt import parse

    key = variant_key(ir_text, func_name, lowering)
    compiled = from_cache(key, cache)
    if compiled is None:
        compiled = print_and_store(parse(ir_text), func_name, key, cache, lowering)
    return compiled


def store_assembled(
    base: Mapping[str, Any], kernels: list[dict[str, Any]], key: str, cache: KernelCache
) -> Compiled:
    """A module of `base`'s host code with `kernels` (autotuning winners), cached at `key`.

    The tile and fused IR entries are the base's (tile sizes aside, they are the same).
    """
    infos = [
        KernelInfo(
            k["name"],
            k["python"],
            k["launcher"],
            tuple(k["grid"]),
            k["schedule"],
            k["num_warps"],
            k["num_stages"],
            tuple(k["ops"]),
            k["source"],
            k.get("triton", True),
            tuple(k.get("helpers", ())),
            [(tuple(sh), d) for sh, d in k.get("args", [])],
            k["kernel_source"],
            tuple(k["params"]),
        )  # fmt: skip
        for k in kernels
    ]
    source = assemble(infos, list(base["host_sources"]))
    index = {**base, "kernels": kernels}
    base_key = base.get("key")
    for name in ("fused.mlir", "tile.mlir"):
        text = cache.get_text(NAMESPACE, base_key, name) if base_key else None
        if text is not None:
            cache.put_text(NAMESPACE, key, name, text)
    index["key"] = key
    cache.put_json(NAMESPACE, key, "index.json", index)
    path = cache.put_text(NAMESPACE, key, "kernels.py", source)
    return Compiled(key, path, source, index)


class TritonBackend:
    """The "triton" entry of `fuseopt.backends.contract.BACKENDS` (see that module's
    docstring)."""

    sizes_at_run_time = True
    """A SizedFunction compiles once for every size (passes/generalize_sizes.py)."""

    def compile(
        self, module: ModuleOp | SizedFunction, func_name: str, options: Mapping[str, Any]
    ) -> TritonFunction | CudaGraphFunction:
        """Compile `func_name` of `module` (see `compile_module`)."""
        return compile_module(module, func_name, options)


def save_index(fn: TritonFunction, directory: Path) -> None:
    """Write `fn`'s module source and a JSON index into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{fn.index['function']}.py").write_text(fn.source)
    (directory / f"{fn.index['function']}.json").write_text(json.dumps(fn.index, indent=2))
