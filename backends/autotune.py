"""mode="max-autotune": time the tiling pass's candidate configurations, keep the fastest.

The shared part (candidates, distinct configurations and their labels, the timer,
random buffers, progress, device names) serves both GPU backends; `AutotunedFunction`
below is the Triton backend's tuner, `fuseopt.backends.cuda.autotune` the CUDA one's.

convert-nn-to-tile records on every kernel a `candidates` attribute: a few alternative
tile sizes, as convert-nn-to-tile options (`{"block-rows": 4}`, `{"block-m": 64, ...}`).
At the first call on a CUDA device, `AutotunedFunction`:

1. looks the device's choice up in the kernel cache (namespace "autotune", keyed by the
   compiled function's key and the device name): a hit loads the tuned module, no timing;
2. otherwise lowers the function once per distinct candidate configuration (forcing
   those sizes; each lowering is itself cached), and times every kernel of every
   lowering that lists the configuration, plus the heuristic's own kernel, with
   `triton.testing.do_bench` (median) on random buffers of the launch's shapes;
   a candidate that fails to compile or launch is skipped; matmul kernels then try
   other num_warps / num_stages on their fastest tiling;
3. keeps per kernel the fastest variant (same kernel name, launcher and buffers),
   assembles the heuristic module's host code with the winners, stores module, index
   and choice (with every timing) in the cache, and runs it from then on.

Progress: a bar on stderr when it is a terminal, else one log line per kernel on the
`fuseopt` logger. On the CPU (Triton's interpreter) nothing is timed: interpreter
timings say nothing about the GPU, so the heuristic choice runs.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

import torch

from fuseopt.backends.kernel_cache import KernelCache, cache_key
from fuseopt.pipelines import LoweringOptions

log = logging.getLogger("fuseopt")

Timer = Callable[[Callable[[], None]], float]
"""Times a zero-argument launch; returns microseconds (median)."""


def do_bench_timer(launch: Callable[[], None]) -> float:
    """Median microseconds of `launch` by `triton.testing.do_bench` (L2 flushed)."""
    from triton.testing import do_bench

    return 1000.0 * float(do_bench(launch, warmup=10, rep=40, return_mode="median"))


class Progress:
    """A one-line progress bar on a terminal; log lines otherwise."""

    def __init__(self, total: int, stream: IO[str] | None = None, width: int = 30):
        self.total, self.done, self.width = max(1, total), 0, width
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def step(self, what: str) -> None:
        """One unit done (`what` says which)."""
        self.done += 1
        if self.tty:
            filled = self.width * self.done // self.total
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(
                f"\rfuseopt autotune [{bar}] {self.done}/{self.total} {what[:40]:<40}"
            )
            if self.done >= self.total:
                self.stream.write("\n")
            self.stream.flush()

    def note(self, line: str) -> None:
        """A result line (logged; on a terminal it would break the bar)."""
        log.info("autotune: %s", line)


def random_buffers(args: Sequence[Sequence[Any]], device: torch.device) -> list[torch.Tensor]:
    """Buffers for a launch's (shape, torch dtype text) list: random floats, zero ints."""
    out = []
    for shape, dtype_text in args:
        dtype = getattr(torch, str(dtype_text).removeprefix("torch."))
        if dtype.is_floating_point:  # drawn in the buffer's dtype: no float32 copy
            out.append(torch.randn(tuple(shape), device=device, dtype=dtype))
        else:
            out.append(torch.zeros(tuple(shape), dtype=dtype, device=device))
    return out


def candidate_configs(module: Any) -> dict[str, list[dict[str, int]]]:
    """The `candidates` attribute of every tile.kernel of `module`, by kernel name."""
    from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr

    from fuseopt.dialects import tile

    found: dict[str, list[dict[str, int]]] = {}
    for op in module.walk():
        if not isinstance(op, tile.KernelOp):
            continue
        attr = op.attributes.get("candidates")
        configs = []
        if isinstance(attr, ArrayAttr):
            for d in attr.data:
                if isinstance(d, DictionaryAttr):
                    configs.append(
                        {k: v.value.data for k, v in d.data.items() if isinstance(v, IntegerAttr)}
                    )
        found[op.sym_name.data] = configs
    return found


def device_name(device: torch.device) -> str:
    """A cache-key name for a CUDA device: its name and compute capability."""
    major, minor = torch.cuda.get_device_capability(device)
    return f"{torch.cuda.get_device_name(device)} sm{major}{minor}"


class AutotunedFunction:
    """A TritonFunction tuned per CUDA device at its first call there (module doc)."""

    def __init__(
        self,
        fn: Any,
        ir_text: str,
        func_name: str,
        lowering: LoweringOptions,
        cache: KernelCache,
        key: str,
        timer: Timer | None = None,
    ):
        self.fn, self.ir_text, self.func_name = fn, ir_text, func_name
        self.lowering, self.cache, self.key = lowering, cache, key
        self.timer = timer or do_bench_timer
        self.tuned: dict[str, Any] = {}
        self.choices: dict[str, dict[str, Any]] = {}

    @property
    def kernels(self) -> list[Any]:
        """Kernel records (of the tuned function once it exists)."""
        return self.current.kernels

    @property
    def current(self) -> Any:
        """The function calls run now (the last tuned one, else the heuristic one)."""
        return next(reversed(self.tuned.values())) if self.tuned else self.fn

    def __getattr__(self, name: str) -> Any:
        if name in ("source", "path", "index", "module", "fused_module", "host", "check"):
            return getattr(self.current, name)
        raise AttributeError(name)

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Tune on first use on a CUDA device, then run the tuned function."""
        xs = self.fn.check(inputs)
        device = xs[0].device if xs else torch.device("cpu")
        if device.type != "cuda":
            return self.fn(*xs)
        name = device_name(device)
        if name not in self.tuned:
            self.tuned[name] = self.tune(name, device)
        return self.tuned[name](*xs)

    def tune(self, name: str, device: torch.device) -> Any:
        """The tuned function for device `name` (from the cache, or timed now)."""
        from fuseopt.backends.triton import backend as tb

        tuned_key = cache_key(base=self.key, device=name, purpose="max-autotune")
        choice = self.cache.get_json("autotune", tuned_key, "choice.json")
        compiled = tb.from_cache(tuned_key, self.cache)
        if isinstance(choice, dict) and compiled is not None:
            self.choices[name] = choice
            return tb.wrap(compiled, self.cache, tuned_key)
        choice, compiled = self.time_candidates(device, tuned_key)
        self.cache.put_json("autotune", tuned_key, "choice.json", choice)
        self.choices[name] = choice
        return tb.wrap(compiled, self.cache, tuned_key)

    def time_candidates(self, device: torch.device, tuned_key: str) -> tuple[dict[str, Any], Any]:
        """Time every candidate of every kernel; assemble and cache the winners."""
        from fuseopt.backends.triton import backend as tb

        base = self.fn.index
        wanted = candidate_configs(self.fn.module)
        configs = distinct_configs(wanted)
        variants: list[tuple[str, dict[str, int], dict[str, Any], Any]] = []
        triton_kernels = [k for k in base["kernels"] if k.get("triton", True)]
        progress = Progress(len(triton_kernels) * (1 + len(configs)))
        labelled = [("heuristic", {}), *((config_label(c), c) for c in configs)]
        for label, config in labelled:
            try:
                compiled = tb.compile_variant(
                    self.ir_text, self.func_name, self.lowering.forcing(config), self.cache
                )
                module = tb.load_compiled(
                    compiled, interpret=device.type != "cuda", cache=self.cache
                )
            except Exception as e:  # noqa: BLE001 - a config that does not lower is skipped
                log.info("autotune: %s does not compile: %s", label, e)
                continue
            for k in compiled.index["kernels"]:
                if k.get("triton", True):
                    variants.append((label, config, k, module))
        timings: dict[str, dict[str, float]] = {}
        best: dict[str, tuple[float, dict[str, Any], str]] = {}
        by_name = {k["name"]: k for k in base["kernels"]}
        for label, config, k, module in variants:
            ref = by_name.get(k["name"])
            if ref is None or not _compatible(ref, k) or base["launches"].count(k["name"]) != 1:
                continue
            if config and config not in wanted.get(k["name"], []):
                continue
            us = self._time(module, k, device)
            progress.step(f"{k['name']} {label}")
            timings.setdefault(k["name"], {})[label] = us
            if us < best.get(k["name"], (math.inf, {}, ""))[0]:
                best[k["name"]] = (us, k, label)
        self._tune_knobs(variants, best, timings, device)
        for name, (us, _, label) in best.items():
            progress.note(f"{name}: {label} {us:.1f} us")
        kernels = [best[k["name"]][1] if k["name"] in best else k for k in base["kernels"]]
        compiled = tb.store_assembled(base, kernels, tuned_key, self.cache)
        choice = {
            name: {"config": label, "us": us, "timings": timings.get(name, {})}
            for name, (us, _, label) in best.items()
        }
        return choice, compiled

    def _tune_knobs(
        self,
        variants: list[tuple[str, dict[str, int], dict[str, Any], Any]],
        best: dict[str, tuple[float, dict[str, Any], str]],
        timings: dict[str, dict[str, float]],
        device: torch.device,
    ) -> None:
        """For matmul kernels, time the fastest tiling again with other
        num_warps / num_stages (MATMUL_KNOBS); a faster pair updates `best`."""
        if device.type != "cuda":
            return
        for name, per_label in timings.items():
            top = sorted(per_label, key=per_label.__getitem__)[:1]
            for label, _, k, module in variants:
                if k["name"] != name or label not in top or k["schedule"] != "matmul":
                    continue
                for warps, stages in MATMUL_KNOBS:
                    if (warps, stages) == (k["num_warps"], k["num_stages"]):
                        continue
                    tuned = with_knobs(k, warps, stages)
                    us = self._time(module, tuned, device)
                    knob_label = f"{label} warps={warps} stages={stages}"
                    timings[name][knob_label] = us
                    if us < best[name][0]:
                        best[name] = (us, tuned, knob_label)

    def _time(self, module: Any, k: Mapping[str, Any], device: torch.device) -> float:
        if not k["grid"]:  # dynamic sizes: no size to time at (the heuristic's tiling)
            log.info("autotune: %s has dynamic sizes: not timed", k["name"])
            return math.inf
        if device.type == "cuda":
            from fuseopt.backends.triton.launchers import FastLauncher

            kernel = getattr(module, k["python"])
            launcher = FastLauncher(kernel, tuple(k["grid"]), k["num_warps"], k["num_stages"])
        else:
            launcher = getattr(module, k["launcher"])
        buffers: list[torch.Tensor] = []
        try:  # buffers too big for the memory left (outputs are live): not timed
            buffers = random_buffers(k["args"], device)
            launcher(*buffers)  # compile outside the timing
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            return self.timer(lambda: launcher(*buffers))
        except Exception as e:  # noqa: BLE001 - out of resources etc.: not a candidate
            log.info("autotune: %s failed: %s", k["name"], e)
            return math.inf
        finally:
            buffers.clear()  # free the candidate's memory before the next one


MATMUL_KNOBS = ((4, 3), (8, 3), (4, 4), (8, 4))
"""(num_warps, num_stages) pairs tried on the fastest matmul tilings."""


def with_knobs(k: Mapping[str, Any], warps: int, stages: int) -> dict[str, Any]:
    """Kernel entry `k` launched with other num_warps / num_stages: the index's knobs,
    and a source whose launcher the printer prints anew with them."""
    from fuseopt.backends.triton.printer import launcher_source

    grid = tuple(k["grid"])
    launch = launcher_source(k["python"], k["launcher"], k["params"], grid, warps, stages)
    source = k["kernel_source"] + "\n\n" + launch + "\n"
    return {**k, "num_warps": warps, "num_stages": stages, "source": source}


def distinct_configs(wanted: Mapping[str, Sequence[dict[str, int]]]) -> list[dict[str, int]]:
    """The distinct configurations among every kernel's candidates (`candidate_configs`),
    in first-seen order: one lowering each."""
    configs: list[dict[str, int]] = []
    for cs in wanted.values():
        configs += [c for c in cs if c not in configs]
    return configs


def config_label(config: Mapping[str, int]) -> str:
    """A configuration in words (`block-m=64 block-n=128`), for timings and choices."""
    return " ".join(f"{k}={v}" for k, v in sorted(config.items()))


def _compatible(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Can kernel entry `b` replace `a` (same Python names and launch buffers)?"""
    return (
        a["python"] == b["python"]
        and a["launcher"] == b["launcher"]
        and a["args"] == b["args"]
        and bool(a.get("triton", True)) == bool(b.get("triton", True))
    )


__all__ = [
    "AutotunedFunction",
    "Progress",
    "candidate_configs",
    "config_label",
    "device_name",
    "distinct_configs",
    "do_bench_timer",
    "random_buffers",
    "with_knobs",
]
