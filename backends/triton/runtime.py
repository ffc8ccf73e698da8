"""Running printed Triton modules: load the source, launch cheaply.

- `load_module` imports a printed module from its file (Triton's JIT reads kernel source
  through `inspect`, so the module must live in a file: the cache entry itself). For
  CPU tensors the module is imported with `TRITON_INTERPRET=1`, so its kernels run in
  Triton's interpreter.
- `FastLauncher` replaces a printed launcher on the GPU: the first call goes through
  `JITFunction` (which compiles and specializes), later calls launch the returned
  `CompiledKernel`'s C launcher directly with the grid fixed at print time, skipping
  the JIT's per-call argument binding. Pointer alignment (Triton specializes on 16-byte
  alignment) is checked per call; a misaligned pointer takes the JIT path.
- `GridLauncher` does the same for a kernel over buffers of dynamic size, whose sizes
  follow the buffers and whose grid comes with every call (the sizes are not
  specialized, so one compiled kernel serves every size that fits int32).
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


@contextmanager
def _triton_cache(directory: str | None) -> Iterator[None]:
    """Triton's compiled binaries go to `directory` while the JIT compiles (unless the
    user chose a TRITON_CACHE_DIR): fuseopt's cache holds sources and binaries."""
    if directory is None or "TRITON_CACHE_DIR" in os.environ:
        yield
        return
    os.environ["TRITON_CACHE_DIR"] = directory
    try:
        yield
    finally:
        os.environ.pop("TRITON_CACHE_DIR", None)


def _hook_chain_class() -> type | None:
    """The class of Triton's hook chains when an empty one can be told apart (its
    `calls` list), None otherwise (then any installed hook counts as active)."""
    try:
        from triton import knobs

        chain = knobs.HookChain
        return chain if isinstance(getattr(chain(), "calls", None), list) else None
    except (ImportError, AttributeError, TypeError):
        return None


def launch_hooks_probe() -> Callable[[], bool]:
    """A function telling whether Triton launch hooks are installed now (profilers such
    as proton; Triton 3.6 and later install empty hook chains, which do not count).
    Kernels launched other than through Triton's launcher skip the hooks, so while any
    is installed the launchers are used."""
    try:
        from triton import knobs

        runtime = knobs.runtime
    except (ImportError, AttributeError):
        return lambda: False
    chain = _hook_chain_class()

    def active() -> bool:
        enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
        return (enter is not None and (enter.__class__ is not chain or bool(enter.calls))) or (
            leave is not None and (leave.__class__ is not chain or bool(leave.calls))
        )

    return active


C_LAUNCHER_TRITON = ("3.6",)
"""Triton versions whose C launcher `_c_launcher` calls directly (the argument layout
of `CudaLauncher.__call__` was read from that version: other versions may differ)."""


def _c_launcher(compiled: Any) -> tuple[Callable[..., None], tuple[Any, ...]] | None:
    """Triton's C launch function for `compiled` with the arguments that follow the
    function handle, when calling it directly is known to be right: a Triton in
    `C_LAUNCHER_TRITON` whose `CudaLauncher` needs no scratch memory for this kernel.
    It skips the Python `CudaLauncher.__call__` around it (about a microsecond a
    launch: two scratch allocations that allocate nothing). None otherwise."""
    try:
        import triton

        run = compiled.run
        if (
            ".".join(triton.__version__.split(".")[:2]) not in C_LAUNCHER_TRITON
            or type(run).__name__ != "CudaLauncher"
            or run.global_scratch_size
            or run.profile_scratch_size
        ):
            return None
        head = (
            run.launch_cooperative_grid,
            run.launch_pdl,
            None,  # global scratch
            None,  # profile scratch
            compiled.packed_metadata,
            None,  # launch metadata
            None,  # enter hook
            None,  # exit hook
        )
        return run.launch, head
    except AttributeError:
        return None


def _misaligned(buffers: Sequence[torch.Tensor]) -> bool:
    """Whether a buffer's pointer is not 16-byte aligned (Triton specializes on it)."""
    pointers = 0
    for b in buffers:
        pointers |= b.data_ptr()
    return bool(pointers & 15)


def direct_runner(compiled: Any, grid: tuple[int, ...], device: int = 0) -> Callable[..., bool]:
    """A launch function `launch(*buffers) -> bool` for a Triton CompiledKernel.

    It calls the kernel's launcher directly with the stream current on `device` (the
    GPU the kernel was loaded on), skipping the per-call device lookup and
    launch-metadata work of `CompiledKernel.__getitem__`'s runner, and returns True.
    When the buffers are on another device (the kernel's function handle belongs to
    `device`) or a buffer's pointer is not 16-byte aligned (the kernel was specialized on
    aligned ones) it launches nothing and returns False. While launch hooks are
    installed (profilers such as proton; checked per call, since they can be installed
    at any time; Triton 3.6 and later always install empty hook chains, which do not
    count), or on a Triton without these attributes, it launches through that runner
    instead. On a Triton whose C launcher is known (`_c_launcher`) it calls that
    directly. Everything per launch is inline: this is the host cost every kernel of a
    compiled region pays.
    """
    g0, g1, g2 = (*grid, 1, 1, 1)[:3]
    standard = compiled[(g0, g1, g2)]
    try:
        from triton import knobs

        runtime = knobs.runtime
        run, function, packed = compiled.run, compiled.function, compiled.packed_metadata
        stream_of = torch._C._cuda_getCurrentRawStream
    except (ImportError, AttributeError):

        def through_triton(*args: torch.Tensor) -> bool:
            if _misaligned(args) or args[0].get_device() != device:
                return False
            standard(*args)
            return True

        return through_triton
    chain = _hook_chain_class()
    target, head = _c_launcher(compiled) or (run, (packed, None, None, None))

    def launch(*args: torch.Tensor) -> bool:
        # `_misaligned` inline: a call frame is a measurable part of a launch
        pointers = 0
        for a in args:
            pointers |= a.data_ptr()
        if pointers & 15 or args[0].get_device() != device:
            return False
        enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
        if (enter is not None and (enter.__class__ is not chain or enter.calls)) or (
            leave is not None and (leave.__class__ is not chain or leave.calls)
        ):
            standard(*args)
            return True
        target(g0, g1, g2, stream_of(device), function, *head, *args)
        return True

    return launch


INT32_SIZES = 2**31
"""Size arguments below this are passed as int32 (Triton types an unspecialized
integer by its value): the compiled kernel a GridLauncher keeps takes only those."""


def grid_runner(compiled: Any, device: int, buffers: int) -> Callable[..., bool]:
    """A launch function `launch(grid, *args) -> bool` for a Triton CompiledKernel whose
    first `buffers` arguments are tensors and the rest int32 sizes: like
    `direct_runner`, with the grid given per call. It launches nothing and returns False
    for buffers on another device, a pointer not 16-byte aligned or a size that is not
    an int32; with launch hooks installed it goes through `compiled[grid]`."""
    try:
        from triton import knobs

        runtime = knobs.runtime
        run, function, packed = compiled.run, compiled.function, compiled.packed_metadata
        stream_of = torch._C._cuda_getCurrentRawStream
    except (ImportError, AttributeError):

        def through_triton(grid: tuple[int, ...], *args: Any) -> bool:
            if _misaligned(args[:buffers]) or args[0].get_device() != device:
                return False
            if any(n >= INT32_SIZES for n in args[buffers:]):
                return False
            compiled[grid](*args)
            return True

        return through_triton
    chain = _hook_chain_class()
    target, head = _c_launcher(compiled) or (run, (packed, None, None, None))

    def launch(grid: tuple[int, ...], *args: Any) -> bool:
        pointers = 0
        for a in args[:buffers]:
            pointers |= a.data_ptr()
        if pointers & 15 or args[0].get_device() != device:
            return False
        for n in args[buffers:]:
            if n >= INT32_SIZES:
                return False
        g0, g1, g2 = (*grid, 1, 1, 1)[:3]
        if g0 * g1 * g2 == 0:
            return True  # no programs: nothing to launch
        enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
        if (enter is not None and (enter.__class__ is not chain or enter.calls)) or (
            leave is not None and (leave.__class__ is not chain or leave.calls)
        ):
            compiled[(g0, g1, g2)](*args)
            return True
        target(g0, g1, g2, stream_of(device), function, *head, *args)
        return True

    return launch


class GridLauncher:
    """A launcher for a kernel over buffers of dynamic size: `launch(*buffers, *sizes,
    grid=...)`. The first launch on a device goes through the `JITFunction` (which
    compiles); its `CompiledKernel` then serves every later grid and size through
    `grid_runner`, except for misaligned pointers or sizes past int32, which take the
    JIT path. `buffers`: how many leading arguments are tensors. `install`, when given,
    puts a launcher where the host code finds it: once a device has a runner, a plain
    function that tries it first (one call frame less per launch)."""

    def __init__(
        self,
        kernel: Any,
        buffers: int,
        num_warps: int,
        num_stages: int,
        binaries: str | None = None,
        install: Callable[[Callable[..., None]], None] | None = None,
    ):
        self.kernel, self.buffers, self.binaries = kernel, buffers, binaries
        self.install = install
        self.options = {"num_warps": num_warps, "num_stages": num_stages}
        self.runners: dict[int, Callable[..., bool]] = {}
        self.compiled: dict[int, Any] = {}
        """Per device, the compiled kernel its runner launches (aligned pointers, int32
        sizes): what a host function's run form binds (`host_runs.py`)."""
        self.grid: tuple[int, ...] = ()
        """No grid of its own: every call passes one."""

    def __call__(self, *args: Any, grid: tuple[int, ...]) -> None:
        """Launch over `grid`."""
        device = args[0].get_device() if args else -1
        runner = self.runners.get(device)
        if runner is not None and runner(grid, *args):
            return
        if any(g == 0 for g in grid):
            return  # no programs (a size of 0): Triton's JIT would refuse the grid
        with _triton_cache(self.binaries):
            compiled = self.kernel[tuple(grid)](*args, **self.options)
        if compiled is None or _misaligned(args[: self.buffers]) or runner is not None:
            return
        if any(n >= INT32_SIZES for n in args[self.buffers :]):
            return
        try:
            runner = grid_runner(compiled, device, self.buffers)
        except Exception:  # noqa: BLE001 - any failure: keep using the JIT path
            return
        self.runners[device] = runner
        self.compiled[device] = compiled
        if self.install is not None and len(self.runners) == 1:
            self.install(self._first_direct(runner))

    def _first_direct(self, runner: Callable[..., bool]) -> Callable[..., None]:
        """A launcher that tries `runner` before this object."""

        def launch(*args: Any, grid: tuple[int, ...]) -> None:
            if not runner(grid, *args):
                self(*args, grid=grid)

        return launch


class FastLauncher:
    """A launcher for one kernel that skips the JIT after the first launch of a grid.

    The first launch of a grid goes through the `JITFunction` (which compiles and
    specializes); when every pointer was 16-byte aligned (Triton specializes on it), its
    `CompiledKernel` is kept and later launches with aligned pointers call it directly
    (`direct_runner`). Misaligned pointers always take the JIT path. `binaries`: where
    Triton's compiled kernels are cached (see `_triton_cache`).

    `install`, when given, puts a launcher where the host code finds it (a module
    global): once the printed grid has a direct runner, the host calls a plain function
    that tries it first and comes back here only for another grid, a misaligned pointer
    or a launcher that failed (one call frame less per launch).
    """

    def __init__(
        self,
        kernel: Any,
        grid: tuple[int, ...],
        num_warps: int,
        num_stages: int,
        binaries: str | None = None,
        install: Callable[[Callable[..., None]], None] | None = None,
    ):
        self.kernel, self.grid, self.binaries = kernel, tuple(grid), binaries
        self.install = install
        self.options = {"num_warps": num_warps, "num_stages": num_stages}
        # (device index, grid or None for the printed one) -> direct runner
        self.runners: dict[tuple[int, tuple[int, ...] | None], Callable[..., bool]] = {}
        self.compiled: dict[int, Any] = {}
        """Per device, the compiled kernel its runners launch (aligned pointers): what a
        host function's run form binds (`host_runs.py`)."""
        self.disabled = False

    def __call__(self, *buffers: torch.Tensor, grid: tuple[int, ...] | None = None) -> None:
        """Launch over `grid` (default: the printed grid)."""
        device = buffers[0].get_device() if buffers else -1
        runner = self.runners.get((device, grid))
        try:
            if runner is not None and runner(*buffers):
                return
        except TypeError:  # a Triton whose launcher takes other arguments
            self.disabled = True
            self.runners.clear()
            if self.install is not None:
                self.install(self)
        shape = self.grid if grid is None else tuple(grid)
        with _triton_cache(self.binaries):
            compiled = self.kernel[shape](*buffers, **self.options)
        if self.disabled or _misaligned(buffers) or compiled is None:
            return
        try:
            runner = direct_runner(compiled, shape, device)
        except Exception:  # noqa: BLE001 - any failure: keep using the JIT path
            self.disabled = True
            return
        self.runners[(device, grid)] = runner
        self.compiled[device] = compiled
        if grid is None and self.install is not None:
            self.install(self._first_direct(runner))

    def _first_direct(self, runner: Callable[..., bool]) -> Callable[..., None]:
        """A launcher that tries `runner` on the printed grid before this object."""

        def launch(*buffers: torch.Tensor, grid: tuple[int, ...] | None = None) -> None:
            try:
                if grid is None and runner(*buffers):
                    return
            except TypeError:
                pass  # this object's own call disables the runner and reinstalls itself
            self(*buffers, grid=grid)

        return launch


LAUNCHERS = "fuseopt_launchers"
"""The module attribute holding a loaded module's launcher objects by name."""


def install_fast_launchers(
    module: ModuleType,
    launchers: Sequence[tuple[str, str, tuple[int, ...], int, int, int]],
    binaries: str | None = None,
) -> None:
    """Rebind each printed launcher `launch_k` of `module` to a FastLauncher (a
    GridLauncher for a kernel whose grid comes with every call, grid ()).

    `launchers` holds (launcher name, kernel name, grid, num_warps, num_stages, number
    of buffer arguments). The host functions look launchers up as module globals, so
    they pick these up. The launcher objects stay in `LAUNCHERS` of the module, by name
    (a run form binds their compiled kernels).
    """
    objects: dict[str, FastLauncher | GridLauncher] = {}
    setattr(module, LAUNCHERS, objects)
    for launcher, kernel, grid, warps, stages, buffers in launchers:

        def install(launch: Callable[..., None], name: str = launcher) -> None:
            setattr(module, name, launch)

        jit = getattr(module, kernel)
        if not grid:
            objects[launcher] = GridLauncher(jit, buffers, warps, stages, binaries, install)
        else:
            objects[launcher] = FastLauncher(jit, grid, warps, stages, binaries, install)
        install(objects[launcher])


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


__all__ = [
    "FastLauncher",
    "GridLauncher",
    "TritonFunction",
    "install_fast_launchers",
    "load_module",
]
