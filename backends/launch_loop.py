"""Runs of kernel launches issued by one call: the launch loop in C, for both backends.

A printed host function (`backends/cuda/host_function.py`, `backends/triton/host_runs.py`)
launches the kernels between two library or PyTorch calls as one *run*: it stores the
pointer and size arguments of the run's launches in the run's `values` with one line
(and, for a grid of dynamic size, the grid in its `geometry`), then makes one call,
`launch_run(run, stream)`. That call is a short C loop over `cuLaunchKernel` (`SOURCE`),
built once per machine with the host's C compiler and cached in the kernel cache (keyed
by the compiler, its version and the platform), so a launch costs the driver's own time
plus its share of one store from Python, not a Python call through ctypes each.
Without a C compiler (or when the build fails, or a cached build does not load: logged
once) the same runs go through `launch_run_in_python`, one ctypes call per launch.

Before launching anything the loop checks the run's *guards*: value slots that must
hold a 16-byte-aligned pointer and slots that must hold a size below 2**31 (a Triton
kernel was compiled for aligned pointers and int32 sizes). A run whose guard fails
launches nothing and returns `GUARD_FAILED`: the host function then launches that run
another way. A launch may take trailing null pointer parameters the host never fills
(`RunLaunch.trailing_nulls`: Triton's scratch pointers).

A grid with a dimension of 0 launches nothing (CUDA refuses an empty grid; a dynamic
size of 0 gives one). A failed launch returns `1000 * index + CUresult`, which
`launch_failed` turns into an error naming the kernel.

The driver entry points a run needs (`libcuda`, `cu_launch_kernel`, `driver_message`,
`raw_stream`) live here too, for both backends.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import torch

from fuseopt.diagnostics import CompileError, DeviceUnavailableError

log = logging.getLogger("fuseopt")

SOURCE = r"""/* fuseopt's launch loop: a run of kernel launches in one call (launch_loop.py). */
typedef int (*fo_launch_fn)(void*, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, unsigned, void*, void**, void**);
typedef struct {
  void* launch;                   /* cuLaunchKernel */
  long long count;
  void* const* functions;         /* CUfunction per launch */
  const unsigned* geometry;       /* per launch: grid x, y, z, threads, shared bytes */
  void** const* params;           /* per launch: its kernelParams */
  const unsigned long long* values;
  long long aligned_count;        /* guards: slots of `values` holding 16-byte-aligned */
  const long long* aligned;       /* pointers, */
  long long small_count;          /* and slots holding sizes below 2**31 */
  const long long* small;
} fo_run;

int fo_launch_run(const fo_run* run, void* stream) {
  for (long long i = 0; i < run->aligned_count; ++i)
    if (run->values[run->aligned[i]] & 15) return -1; /* GUARD_FAILED: nothing launched */
  for (long long i = 0; i < run->small_count; ++i)
    if (run->values[run->small[i]] >= 2147483648ULL) return -1;
  fo_launch_fn launch = (fo_launch_fn)run->launch;
  for (long long i = 0; i < run->count; ++i) {
    const unsigned* g = run->geometry + 5 * i;
    if (g[0] == 0 || g[1] == 0 || g[2] == 0) continue; /* an empty grid: nothing to run */
    int r = launch(run->functions[i], g[0], g[1], g[2], g[3], 1, 1, g[4], stream,
                   run->params[i], 0);
    if (r != 0) return (int)(1000 * i) + r;
  }
  return 0;
}
"""

GEOMETRY = 5
"""Numbers per launch in a run's `geometry`: grid x, y, z, threads, shared bytes."""

GUARD_FAILED = -1
"""What a run returns when a guard fails (module doc): nothing was launched."""

SMALL = 2**31
"""A size slot guarded as small holds less than this (an int32 kernel parameter)."""


class _Run(ctypes.Structure):
    _fields_ = [
        ("launch", ctypes.c_void_p),
        ("count", ctypes.c_longlong),
        ("functions", ctypes.c_void_p),
        ("geometry", ctypes.c_void_p),
        ("params", ctypes.c_void_p),
        ("values", ctypes.c_void_p),
        ("aligned_count", ctypes.c_longlong),
        ("aligned", ctypes.c_void_p),
        ("small_count", ctypes.c_longlong),
        ("small", ctypes.c_void_p),
    ]


@dataclass(frozen=True)
class RunLaunch:
    """One launch of a run, as bound to a device: its function handle (an int), grid
    (zeros where the printed host function sets it per call), threads, shared bytes and
    how many argument values it takes, then how many null pointer parameters follow
    them (parameters the kernel declares and the host never fills)."""

    function: int
    grid: tuple[int, int, int]
    threads: int
    smem_bytes: int
    values: int
    trailing_nulls: int = 0


class LaunchRun:
    """The ctypes arrays of one run (module doc): `values` and `geometry`, which the
    printed host function fills, and the `fo_run` struct the C loop reads (`address`).
    `aligned` and `small` are the guarded slots of `values`. One per run, device and
    host thread: ctypes releases the GIL during a launch."""

    def __init__(
        self,
        launches: Sequence[RunLaunch],
        launch_function: int,
        aligned: Sequence[int] = (),
        small: Sequence[int] = (),
    ):
        self.launches = list(launches)
        total = sum(x.values for x in launches)
        self.offsets: list[int] = []
        at = 0
        for x in launches:
            self.offsets.append(at)
            at += x.values
        size = ctypes.sizeof(ctypes.c_void_p)
        self.values = (ctypes.c_void_p * max(1, total))()
        self.null = ctypes.c_void_p(0)  # what every trailing null parameter points at
        base, null = ctypes.addressof(self.values), ctypes.addressof(self.null)
        # cuLaunchKernel reads each parameter through a pointer: a block per launch
        blocks = [
            [base + (o + i) * size for i in range(x.values)] + [null] * x.trailing_nulls
            for x, o in zip(launches, self.offsets, strict=True)
        ]
        flat = [p for block in blocks for p in block]
        self.pointers = (ctypes.c_void_p * max(1, len(flat)))(*flat)
        pointers, starts, first = ctypes.addressof(self.pointers), [], 0
        for block in blocks:
            starts.append(pointers + first * size)
            first += len(block)
        n = len(launches)
        self.params = (ctypes.c_void_p * max(1, n))(*starts)
        self.functions = (ctypes.c_void_p * max(1, n))(*[x.function for x in launches])
        self.geometry = (ctypes.c_uint * max(1, GEOMETRY * n))(
            *[v for x in launches for v in (*x.grid, x.threads, x.smem_bytes)]
        )
        self.aligned = list(aligned)
        self.small = list(small)
        self._aligned = (ctypes.c_longlong * max(1, len(self.aligned)))(*self.aligned)
        self._small = (ctypes.c_longlong * max(1, len(self.small)))(*self.small)
        self.struct = _Run(
            launch_function,
            n,
            ctypes.addressof(self.functions),
            ctypes.addressof(self.geometry),
            ctypes.addressof(self.params),
            base,
            len(self.aligned),
            ctypes.addressof(self._aligned),
            len(self.small),
            ctypes.addressof(self._small),
        )
        self.address = ctypes.addressof(self.struct)

    def guards_hold(self) -> bool:
        """Whether every guarded slot holds what it must (the C loop's first check)."""
        return all(not (self.values[i] or 0) & 15 for i in self.aligned) and all(
            (self.values[i] or 0) < SMALL for i in self.small
        )

    def arguments(self, i: int) -> list[int]:
        """The values launch `i` takes, as stored now (a null pointer reads as 0)."""
        o = self.offsets[i]
        return [v or 0 for v in self.values[o : o + self.launches[i].values]]

    def grid(self, i: int) -> tuple[int, int, int]:
        """The grid of launch `i`, as stored now."""
        g = self.geometry[GEOMETRY * i : GEOMETRY * i + 3]
        return g[0], g[1], g[2]


def launch_run_in_python(
    launch: Callable[..., int],
) -> Callable[[LaunchRun, int], int]:
    """The C loop's twin in Python (no C compiler here): `launch` is cuLaunchKernel
    through ctypes; same guards, same skipping of empty grids, same return value."""

    def run_launches(run: LaunchRun, stream: int) -> int:
        if not run.guards_hold():
            return GUARD_FAILED
        for i, x in enumerate(run.launches):
            g0, g1, g2 = run.grid(i)
            if not (g0 and g1 and g2):
                continue
            r = launch(
                x.function, g0, g1, g2, x.threads, 1, 1, x.smem_bytes, stream, run.params[i], None
            )
            if r:
                return 1000 * i + r
        return 0

    return run_launches


def _compiler() -> str | None:
    """The host C compiler: `$CC`, else cc, gcc or clang on PATH."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _compiler_version(cc: str) -> str:
    """The first line of `cc --version` (part of the cache key)."""
    try:
        r = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (r.stdout.splitlines() or ["unknown"])[0]


@cache
def libcuda() -> ctypes.CDLL:
    """The CUDA driver library (loaded once); DeviceUnavailableError without one."""
    for lib in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            return ctypes.CDLL(lib)
        except OSError:
            continue
    raise DeviceUnavailableError("the CUDA driver library (libcuda) cannot be loaded")


def driver_message(result: int) -> str:
    """The driver's name for CUresult `result`."""
    name = ctypes.c_char_p()
    libcuda().cuGetErrorString(result, ctypes.byref(name))
    return name.value.decode() if name.value else f"error {result}"


@cache
def cu_launch_kernel():  # noqa: ANN202 - a ctypes function
    """The driver's cuLaunchKernel with its argument types declared (loaded once)."""
    fn = libcuda().cuLaunchKernel
    u = ctypes.c_uint
    pointer = ctypes.c_void_p
    fn.argtypes = [pointer, u, u, u, u, u, u, u, pointer, pointer, pointer]
    fn.restype = ctypes.c_int
    return fn


def raw_stream(index: int) -> int:
    """The raw handle of PyTorch's current stream on CUDA device `index`."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(index)
    return torch.cuda.current_stream(index).cuda_stream


def run_launcher() -> tuple[Callable[[Any, int], int], Callable[[LaunchRun], Any], int]:
    """How runs are issued here: (launch_run, run_object, launch function address).
    `launch_run(run_object(run), stream)` issues a run: through the C loop, which takes
    the run's struct address, or through `launch_run_in_python`, which takes the run."""
    launch = cu_launch_kernel()
    address = ctypes.cast(launch, ctypes.c_void_p).value or 0
    loop = c_launch_loop()
    if loop is not None:
        return loop, _run_address, address
    return launch_run_in_python(launch), _same_run, address


def _run_address(run: LaunchRun) -> int:
    """What the C loop takes for a run: the address of its `fo_run` struct."""
    return run.address


def _same_run(run: LaunchRun) -> LaunchRun:
    """What the Python loop takes for a run: the run."""
    return run


@cache
def c_launch_loop() -> Callable[[int, int], int] | None:
    """`fo_launch_run(run address, stream)` from the built loop (module doc), or None
    where it cannot be built (logged once: launches then go through Python)."""
    from fuseopt.backends.kernel_cache import KernelCache, cache_key

    cc = _compiler()
    if cc is None:
        log.info("fuseopt: no C compiler: kernels launch one ctypes call each")
        return None
    store = KernelCache()
    key = cache_key(
        source=SOURCE,
        compiler=cc,
        version=_compiler_version(cc),
        machine=platform.machine(),
        system=sys.platform,
    )
    try:
        binary = store.get("cuda", key, "launch_loop.so")
    except OSError:
        binary = None
    with tempfile.TemporaryDirectory(prefix="fuseopt-launch-") as tmp:
        lib = Path(tmp) / "launch_loop.so"
        if binary is None:
            src = Path(tmp) / "launch_loop.c"
            src.write_text(SOURCE)
            cmd = [cc, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.SubprocessError) as e:
                log.info("fuseopt: the C launch loop did not build (%s): launching from Python", e)
                return None
            if r.returncode != 0:
                log.info(
                    "fuseopt: the C launch loop did not build: launching from Python:\n%s",
                    r.stderr.strip()[:2000],
                )
                return None
            binary = lib.read_bytes()
            try:
                store.put("cuda", key, "launch_loop.so", binary)
            except OSError:
                pass  # an unwritable cache costs a rebuild, never a failure
        else:
            lib.write_bytes(binary)
        try:
            loaded = ctypes.CDLL(str(lib))  # mapped: the file may go with the directory
        except OSError as e:  # a noexec temporary directory, a foreign binary
            log.info("fuseopt: the C launch loop did not load (%s): launching from Python", e)
            return None
    fn = loaded.fo_launch_run
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    fn.library = loaded  # type: ignore[attr-defined] - keeps the library loaded
    return fn


def bind_runs(
    namespace: dict[str, Any],
    runs: Sequence[LaunchRun],
    names: Sequence[Sequence[str]],
    run_object: Callable[[LaunchRun], Any],
    launch_run: Callable[[Any, int], int],
    stream: Callable[[int], int],
    device_index: int,
    driver_message: Callable[[int], str],
) -> None:
    """Put in `namespace` what a printed host function in runs reads: per run r,
    `fuseopt_run{r}` (what `launch_run` takes), `fuseopt_run{r}_values` and
    `fuseopt_run{r}_geometry`; then `fuseopt_launch_run`, `fuseopt_launch_failed(code,
    r)` (the error naming run r's kernel, `names[r]`), `fuseopt_stream`,
    `fuseopt_device_index`, and the runs themselves (alive as long as the function)."""
    for r, run in enumerate(runs):
        namespace[f"fuseopt_run{r}"] = run_object(run)
        namespace[f"fuseopt_run{r}_values"] = run.values
        namespace[f"fuseopt_run{r}_geometry"] = run.geometry

    def failed(code: int, run: int) -> Exception:
        return launch_failed(code, names[run], driver_message)

    namespace.update(
        fuseopt_launch_run=launch_run,
        fuseopt_launch_failed=failed,
        fuseopt_stream=stream,
        fuseopt_device_index=device_index,
        fuseopt_runs=list(runs),
    )


def launch_failed(code: int, names: Sequence[str], why: Callable[[int], str]) -> CompileError:
    """The error for a run's failed launch: `code` is `1000 * index + CUresult`, `names`
    the run's kernels, `why` the driver's message for a CUresult."""
    index, result = divmod(code, 1000)
    name = names[index] if index < len(names) else "?"
    return CompileError(f"CUDA driver: cuLaunchKernel of {name} failed: {why(result)}")


__all__ = [
    "GEOMETRY",
    "GUARD_FAILED",
    "SMALL",
    "SOURCE",
    "LaunchRun",
    "RunLaunch",
    "bind_runs",
    "c_launch_loop",
    "cu_launch_kernel",
    "driver_message",
    "launch_failed",
    "launch_run_in_python",
    "libcuda",
    "raw_stream",
    "run_launcher",
]
