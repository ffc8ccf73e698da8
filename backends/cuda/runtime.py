"""Compile CUDA translation units to cubins and launch them on PyTorch's stream.

- **compile** (`compile_cubin`): NVRTC through `cuda-python` when it is installed,
  else `nvcc -cubin`, for the device's architecture (`sm_XY`); binaries are cached
  in `fuseopt.backends.kernel_cache` under the "cuda" namespace, keyed by the source, the
  architecture and the compiler's identity. A failed compile raises a CompileError
  with the compiler's message and the path of the kept `.cu` file.
- **load and launch** (`LoadedKernel`): the driver API through ctypes on `libcuda`
  (`cuModuleLoadData`, `cuModuleGetFunction`, `cuFuncSetAttribute` for more than
  48 KB of shared memory, `cuLaunchKernel` on `torch.cuda.current_stream()`), so the
  runtime needs nothing beyond PyTorch and the driver.
- `check_gpu()` raises a clear error on a machine without a CUDA GPU.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import torch

from fuseopt.backends.launch_loop import (
    LaunchRun,
    RunLaunch,
    cu_launch_kernel,
    driver_message,
    launch_failed,
    launch_run_in_python,
    libcuda,
    raw_stream,
)
from fuseopt.diagnostics import CompileError, DeviceUnavailableError

CACHE_NAMESPACE = "cuda"
MAX_DYNAMIC_SMEM_ATTR = 8
"""CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES."""


class CudaUnavailableError(DeviceUnavailableError):
    """No CUDA GPU (or driver) to run CUDA-compiled kernels on."""


def check_gpu() -> None:
    """Raise CudaUnavailableError unless PyTorch sees a CUDA GPU."""
    if not torch.cuda.is_available():
        raise CudaUnavailableError(
            "the 'cuda' backend needs an NVIDIA GPU with a CUDA driver, and none is "
            "available here; printing (`fuse-opt -t cuda`) and compile checks still work, "
            "or use backend='interpret' or 'triton'"
        )


def find_nvcc() -> str | None:
    """The nvcc executable: `$CUDA_HOME/bin/nvcc`, else the one on PATH."""
    for env in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(env)
        if root and (Path(root) / "bin" / "nvcc").exists():
            return str(Path(root) / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.exists() else None


@cache
def _nvrtc():  # noqa: ANN202 - cuda-python's module, or None
    try:
        from cuda.bindings import nvrtc  # type: ignore[import-not-found]
    except ImportError:
        try:
            from cuda import nvrtc  # type: ignore[import-not-found,no-redef]
        except ImportError:
            return None
    return nvrtc


@cache
def compiler_identity() -> str:
    """Which compiler `compile_cubin` uses and its version (part of the cache key)."""
    nvrtc = _nvrtc()
    if nvrtc is not None:
        try:
            _, major, minor = nvrtc.nvrtcVersion()
            return f"nvrtc-{major}.{minor}"
        except Exception:  # noqa: BLE001 - an unusable NVRTC falls back to nvcc
            pass
    nvcc = find_nvcc()
    if nvcc is None:
        return "none"
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
        return "nvcc-" + out.stdout.strip().splitlines()[-1]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "nvcc-unknown"


def device_arch(device: torch.device | None = None) -> str:
    """`sm_XY` of the current (or given) CUDA device."""
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def _source_dir() -> Path:
    """The kernel cache's private `cuda-src` directory (owner and permissions checked;
    a private stand-in when it cannot be used)."""
    from fuseopt.backends.kernel_cache import KernelCache

    return KernelCache().directory("cuda-src")


def _keep_source(source: str, name: str) -> Path:
    """Write `source` where a user can open it (named after the kernel and content)."""
    import hashlib

    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    path = _source_dir() / f"{name}-{digest}.cu"
    path.write_text(source)
    return path


def _nvcc_cubin(source: str, name: str, arch: str) -> bytes:
    nvcc = find_nvcc()
    if nvcc is None:
        raise CompileError(
            "cannot compile CUDA kernels: neither cuda-python's NVRTC nor nvcc is installed"
        )
    src = _keep_source(source, name)
    with tempfile.TemporaryDirectory(prefix="fuseopt-nvcc-") as tmp:
        out = Path(tmp) / f"{name}.cubin"
        cmd = [nvcc, "-cubin", f"-arch={arch}", "-O3", "-std=c++17", "-o", str(out), str(src)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as e:
            raise CompileError(f"nvcc failed to run on {src}: {e}") from None
        if r.returncode != 0:
            raise CompileError(
                f"nvcc failed to compile kernel '{name}' ({src}):\n{r.stderr.strip()}"
            )
        return out.read_bytes()


def _nvrtc_cubin(source: str, name: str, arch: str) -> bytes | None:
    """The cubin by NVRTC, None when NVRTC is absent or unusable (headers missing)."""
    nvrtc = _nvrtc()
    if nvrtc is None:
        return None
    opts = [f"--gpu-architecture={arch}".encode(), b"-std=c++17"]
    nvcc = find_nvcc()
    if nvcc is not None:
        opts.append(f"--include-path={Path(nvcc).resolve().parent.parent / 'include'}".encode())
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], [])
    if int(err) != 0:
        return None
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if int(err) != 0:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            text = log.decode(errors="replace").strip()
            if "cannot open source file" in text:
                return None  # no CUDA headers for NVRTC here: nvcc may still work
            src = _keep_source(source, name)
            raise CompileError(f"NVRTC failed to compile kernel '{name}' ({src}):\n{text}")
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        nvrtc.nvrtcGetCUBIN(prog, cubin)
        return bytes(cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def compile_cubin(source: str, name: str, arch: str, use_cache: bool = True) -> bytes:
    """The cubin of `source` for `arch` (cached; see the module docstring)."""
    from fuseopt.backends.kernel_cache import KernelCache, cache_key

    key = cache_key(source=source, arch=arch, compiler=compiler_identity())
    store = KernelCache()
    if use_cache:
        try:
            hit = store.get(CACHE_NAMESPACE, key, "kernel.cubin")
        except OSError:
            hit = None
        if hit is not None:
            return hit
    try:
        cubin = _nvrtc_cubin(source, name, arch)
    except Exception:  # noqa: BLE001 - NVRTC refused: nvcc decides (and reports)
        if find_nvcc() is None:
            raise
        cubin = None
    if cubin is None:
        cubin = _nvcc_cubin(source, name, arch)
    if use_cache:
        try:
            store.put(CACHE_NAMESPACE, key, "kernel.cubin", cubin)
        except OSError:
            pass  # an unwritable cache costs a recompile, never a failure
    return cubin


# --------------------------------------------------------------------------- driver API


def check_result(result: int, what: str) -> None:
    """Raise CompileError naming `what` and the driver's message for a nonzero CUresult."""
    if result != 0:
        raise CompileError(f"CUDA driver: {what} failed: {driver_message(result)}")


class LoadedKernel:
    """A cubin's kernel loaded into the current device's context, ready to launch."""

    def __init__(self, cubin: bytes, c_name: str, smem_bytes: int):
        check_gpu()
        torch.cuda.init()
        torch.empty(1, device="cuda")  # makes PyTorch's primary context current
        lib = libcuda()
        self.module = ctypes.c_void_p()
        self._image = ctypes.create_string_buffer(cubin)
        check_result(
            lib.cuModuleLoadData(ctypes.byref(self.module), self._image), "cuModuleLoadData"
        )
        self.function = ctypes.c_void_p()
        check_result(
            lib.cuModuleGetFunction(ctypes.byref(self.function), self.module, c_name.encode()),
            f"cuModuleGetFunction({c_name})",
        )
        self.c_name, self.smem_bytes = c_name, smem_bytes
        if smem_bytes > 48 * 1024:
            check_result(
                lib.cuFuncSetAttribute(
                    self.function, MAX_DYNAMIC_SMEM_ATTR, ctypes.c_int(smem_bytes)
                ),
                f"cuFuncSetAttribute({c_name}, {smem_bytes} bytes of shared memory)",
            )

    def launch(self, grid: tuple[int, ...], threads: int, args: list[torch.Tensor]) -> None:
        """Launch over `grid` blocks of `threads` threads with tensor pointers `args`, on
        the current stream (one launch through `launch_loop`'s Python loop)."""
        g = (*grid, 1, 1)[:3]
        function = self.function.value or 0
        run = LaunchRun([RunLaunch(function, g, threads, self.smem_bytes, len(args))], 0)  # type: ignore[arg-type]
        run.values[: len(args)] = [a.data_ptr() for a in args]
        stream = current_stream(args[0].device if args else None)
        code = launch_run_in_python(cu_launch_kernel())(run, stream)
        if code:
            raise launch_failed(code, [self.c_name], driver_message)


def current_stream(device: torch.device | None) -> int:
    """The raw handle of PyTorch's current stream on `device` (the current device when
    it names none)."""
    index = device.index if device is not None and device.index is not None else None
    return raw_stream(torch.cuda.current_device() if index is None else index)
