"""Running printed Triton modules: load the source, run the compiled function.

- `load_module` imports a printed module from its file (Triton's JIT reads kernel source
  through `inspect`, so the module must live in a file: the cache entry itself). For
  CPU tensors the module is imported with `TRITON_INTERPRET=1`, so its kernels run in
  Triton's interpreter.
- On a GPU the printed launchers are replaced by `launchers.py`'s (`FastLauncher`,
  `GridLauncher`: Triton's compiled kernel launched directly after its first call).
- `TritonFunction` is what the backend returns: it checks the inputs once per call
  (shape, dtype; non-contiguous inputs are copied), runs the host function on the
  inputs' device and current stream, and returns the outputs. On a GPU its first call
  runs the printed host function (the launchers compile the kernels); after it, the
  host function in runs (`host_runs.py`: the kernels between library calls issued by
  one call of the C launch loop) is bound per device and host thread and runs instead,
  except while Triton launch hooks are installed.
- mode="reduce-overhead" wraps a TritonFunction in `fuseopt.backends.cuda_graphs`'s
  CudaGraphFunction (shared with the CUDA backend).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from fuseopt.backends.contract import partly_checked, shape_matches
from fuseopt.backends.launch_loop import driver_message, raw_stream, run_launcher
from fuseopt.backends.triton.host_runs import RunFormUnavailable, bind_run_host
from fuseopt.backends.triton.launchers import LAUNCHERS, launch_hooks_probe
from fuseopt.diagnostics import CompileError
from fuseopt.dialects.syntax import shape_text

_IMPORT_LOCK = threading.Lock()
log = logging.getLogger("fuseopt")


@contextmanager
def _interpreter(on: bool) -> Iterator[None]:
    """TRITON_INTERPRET=1 while a module's kernels are decorated (when `on`)."""
    if not on:
        yield
        return
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if old is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = old


def load_module(path: Path, name: str, interpret: bool) -> ModuleType:
    """Import the printed module at `path` as `name` (interpreted kernels when asked)."""
    qualified = f"fuseopt_generated.{name}{'_interpreted' if interpret else ''}"
    with _IMPORT_LOCK:
        if qualified in sys.modules:
            return sys.modules[qualified]
        spec = importlib.util.spec_from_file_location(qualified, path)
        if spec is None or spec.loader is None:
            raise CompileError(f"cannot load generated Triton module {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[qualified] = module
        try:
            with _interpreter(interpret):
                spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[qualified]
            raise
        return module


class TritonFunction:
    """A compiled nn function: call it with torch tensors, get its results.

    Attributes: `kernels` (KernelRecords), `source` (the printed module), `path` (its
    file), `module` (the tile IR it runs) and `fused_module` (the nn IR after nn-fuse),
    both parsed from the cache on first access, `index` (kernel and host descriptions).
    """

    def __init__(
        self,
        host: str,
        inputs: Sequence[tuple[tuple[int, ...], torch.dtype]],
        load: Callable[[bool], ModuleType],
        kernels: Sequence[Any],
        source: str,
        path: Path,
        ir: Callable[[str], Any],
        index: dict[str, Any],
    ):
        self.host_name, self.inputs, self._load = host, list(inputs), load
        # per input: (shape, dtype, the dims after the first when only the first is
        # dynamic: a batch or token count, checked by one comparison, else None, and
        # whether another dim is dynamic: a cache's length, checked dim by dim)
        self._specs = [
            (
                shape,
                dtype,
                tuple(shape[1:]) if _leading_dynamic(shape) else None,
                not _leading_dynamic(shape) and any(n < 0 for n in shape),
            )
            for shape, dtype in self.inputs
        ]
        self.kernels, self.source, self.path, self.index = list(kernels), source, path, index
        self._ir = ir
        self._parsed: dict[str, Any] = {}
        self._hosts: dict[bool, Callable[..., tuple[torch.Tensor, ...]]] = {}
        # per host thread (its `fast` and `tries`, by device index): the host function
        # in runs once bound (`host_runs.py`), or the launchers' host function where it
        # cannot be. Thread-local: a thread's first call goes through Triton's launcher,
        # which makes the device's context current there; the bindings go with the
        # thread (ctypes releases the GIL during a launch: two threads never share
        # run arrays).
        self._threads = threading.local()
        self._hooks_active = launch_hooks_probe()

    def _parse(self, name: str) -> Any:
        if name not in self._parsed:
            self._parsed[name] = self._ir(name)
        return self._parsed[name]

    @property
    def module(self) -> Any:
        """The tile IR this function runs (a ModuleOp)."""
        return self._parse("tile.mlir")

    @property
    def fused_module(self) -> Any:
        """The nn IR right after nn-fuse (a ModuleOp), for `fusion_report()`."""
        return self._parse("fused.mlir")

    def host(self, interpret: bool) -> Callable[..., tuple[torch.Tensor, ...]]:
        """The printed host function, loaded for the GPU or for the interpreter."""
        fn = self._hosts.get(interpret)
        if fn is None:
            fn = getattr(self._load(interpret), self.host_name)
            self._hosts[interpret] = fn
        return fn

    def check(self, inputs: Sequence[torch.Tensor]) -> Sequence[torch.Tensor]:
        """The inputs, contiguous; a CompileError when their count, shape, dtype or
        device differ (every input on the first one's device: kernels read their
        pointers there)."""
        where = inputs[0].get_device() if inputs and isinstance(inputs[0], torch.Tensor) else -1
        if len(inputs) == len(self.inputs):
            for x, (shape, dtype, tail, inner) in zip(inputs, self._specs, strict=True):
                if (
                    not isinstance(x, torch.Tensor)
                    or x.get_device() != where
                    or x.dtype != dtype
                    or (
                        x.shape != shape
                        and (tail is None or x.shape[1:] != tail or not x.shape)
                        and not (inner and shape_matches(x.shape, shape))
                    )
                    or not x.is_contiguous()
                ):
                    break
            else:
                return inputs  # the common case: nothing to convert
        if len(inputs) != len(self.inputs):
            raise CompileError(f"expected {len(self.inputs)} input tensors, got {len(inputs)}")
        out = []
        for i, (x, (shape, dtype)) in enumerate(zip(inputs, self.inputs, strict=True)):
            if (
                not isinstance(x, torch.Tensor)
                or not shape_matches(x.shape, shape)
                or x.dtype != dtype
            ):
                got = f"{tuple(x.shape)} {x.dtype}" if isinstance(x, torch.Tensor) else type(x)
                raise CompileError(f"input {i}: expected {shape_text(shape)} {dtype}, got {got}")
            if x.get_device() != where:
                raise CompileError(
                    f"input {i} is on {x.device}, input 0 on {inputs[0].device}: a compiled "
                    "function runs on one device"
                )
            out.append(x if x.is_contiguous() else x.contiguous())
        return out

    def trusting(self, trusted: Sequence[bool]) -> Callable[..., tuple[torch.Tensor, ...]]:
        """This function checking only the inputs not `trusted` (`partly_checked`)."""
        return partly_checked(self.inputs, trusted, self.check, self._run, cuda_only=False)

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Run on `inputs` (on their device, on its current stream)."""
        return self._run(self.check(inputs))

    def _run(self, xs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """Run on inputs `check` accepted."""
        device = xs[0].device if xs else _default_device()
        if device.type != "cuda":
            return self.host(True)(*xs, device=device)
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index != torch.cuda.current_device():
            with torch.cuda.device(index):
                return self._on_gpu(xs, device, index)
        return self._on_gpu(xs, device, index)

    def _on_gpu(
        self, xs: Sequence[torch.Tensor], device: torch.device, index: int
    ) -> tuple[torch.Tensor, ...]:
        """Run on GPU `index`: through the host function in runs once it is bound for
        this thread, else through the launchers (which compile), then try to bind it."""
        bound = getattr(self._threads, "fast", None)
        fast = bound.get(index) if bound is not None else None
        if fast is not None and not self._hooks_active():
            return fast(*xs, device=device)
        outputs = self.host(False)(*xs, device=device)
        if fast is None:
            self._bind(index)
        return outputs

    def _bind(self, index: int) -> None:
        """Bind the run form on device `index` for this thread when every kernel has
        compiled there; the launchers' host function for good where it never can be
        (logged), or after `BIND_TRIES` calls that left a kernel uncompiled (say, one
        whose grid was always empty)."""
        local = self._threads
        if not hasattr(local, "fast"):
            local.fast, local.tries = {}, {}
        form = self.index.get("run_host")
        module = self._load(False)
        launchers = getattr(module, LAUNCHERS, {})

        def compiled(name: str) -> tuple[Any, tuple[int, ...]] | None:
            launcher = launchers.get(name)
            kernel = launcher.compiled.get(index) if launcher is not None else None
            return None if kernel is None else (kernel, launcher.grid)

        try:
            if form is None:
                raise RunFormUnavailable("compiled without a run form")
            bound = bind_run_host(
                form, module, compiled, run_launcher(), raw_stream, index, driver_message
            )
        except Exception as e:  # noqa: BLE001 - any failure keeps the launchers
            log.info("fuseopt: %s launches kernel by kernel: %s", self.host_name, e)
            local.fast[index] = self.host(False)
            return
        if bound is not None:
            local.fast[index] = bound
            return
        local.tries[index] = local.tries.get(index, 0) + 1
        if local.tries[index] >= BIND_TRIES:
            why = "a kernel did not compile"
            log.info("fuseopt: %s launches kernel by kernel: %s", self.host_name, why)
            local.fast[index] = self.host(False)


BIND_TRIES = 8
"""Calls after which a host function whose kernels have not all compiled on a device
stops trying to bind its run form there."""


def _leading_dynamic(shape: tuple[int, ...]) -> bool:
    """Is the first dim of `shape` dynamic (-1, `?`) and no other?"""
    return bool(shape) and shape[0] < 0 and all(n >= 0 for n in shape[1:])


def _default_device() -> torch.device:
    return (
        torch.device("cuda", torch.cuda.current_device())
        if torch.cuda.is_available()
        else torch.device("cpu")
    )


__all__ = ["TritonFunction", "load_module"]
