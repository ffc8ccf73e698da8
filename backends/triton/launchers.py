"""Launching a printed Triton module's kernels cheaply on a GPU.

- `FastLauncher` replaces a printed launcher on the GPU: the first call goes through
  `JITFunction` (which compiles and specializes), later calls launch the returned
  `CompiledKernel`'s C launcher directly with the grid fixed at print time, skipping
  the JIT's per-call argument binding. Pointer alignment (Triton specializes on 16-byte
  alignment) is checked per call; a misaligned pointer takes the JIT path.
- `GridLauncher` does the same for a kernel over buffers of dynamic size, whose sizes
  follow the buffers and whose grid comes with every call (the sizes are not
  specialized, so one compiled kernel serves every size that fits int32).
- `install_fast_launchers` puts them in a loaded module (`runtime.load_module`) in place
  of its printed launchers, and keeps them by name (`LAUNCHERS`) for the run form
  (`host_runs.py`), which binds their compiled kernels.
- `launch_hooks_probe` tells whether Triton launch hooks (profilers) are installed:
  launches that skip Triton's launcher would skip them too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch


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


__all__ = [
    "C_LAUNCHER_TRITON",
    "LAUNCHERS",
    "FastLauncher",
    "GridLauncher",
    "direct_runner",
    "grid_runner",
    "install_fast_launchers",
    "launch_hooks_probe",
]
