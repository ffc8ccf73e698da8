"""Run printed CUDA kernels on the CPU, for tests on machines without a GPU.

The generated translation units are compiled as C++20 with g++ against small stand-in
headers (`HEADERS`): one `std::thread` per CUDA thread of a block (blocks run one
after another), `__syncthreads` as a `std::barrier`, warp shuffles through a per-block
exchange array between two barriers, bf16/f16 with round-to-nearest-even conversions,
and WMMA fragments that hold the whole 16x16 tile in every lane (the same results as
tensor cores up to f32 summation order). Everything the printer emits must be
callable by all threads of a block at once, which this checks too: a barrier that
some threads skip deadlocks here as on a GPU (the run has a timeout).

This is a test tool, not a fast path: `EmulatedFunction` runs a `CudaFunction`'s
printed host function on CPU tensors with these kernels (one thread at a time).
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from fuseopt.backends.cuda.backend import CudaFunction, as_compiled
from fuseopt.backends.cuda.printer import CudaKernel
from fuseopt.backends.launch_loop import LaunchRun
from fuseopt.diagnostics import CompileError

COMMON = r"""#pragma once
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <thread>
#include <barrier>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n)
#define __shared__
inline float __expf(float x) { return expf(x); }
inline float __fdividef(float a, float b) { return a / b; }
struct dim3 { unsigned x = 1, y = 1, z = 1; };
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 gridDim, blockDim;
struct fo_emu_block { std::barrier<>* bar; long long xchg[1024]; };
inline fo_emu_block* fo_emu_cur = nullptr;
inline void __syncthreads() { fo_emu_cur->bar->arrive_and_wait(); }
template <typename T> inline T __shfl_xor_sync(unsigned, T x, int off) {
  long long slot = 0; std::memcpy(&slot, &x, sizeof(T));
  fo_emu_cur->xchg[threadIdx.x] = slot;
  __syncthreads();
  long long got = fo_emu_cur->xchg[threadIdx.x ^ (unsigned)off];
  __syncthreads();
  T r; std::memcpy(&r, &got, sizeof(T)); return r;
}
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct __nv_bfloat16 { uint16_t v; };
inline float __bfloat162float(__nv_bfloat16 h) {
  uint32_t u = (uint32_t)h.v << 16; float f; std::memcpy(&f, &u, 4); return f;
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u; std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {uint16_t((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {uint16_t(u >> 16)};
}
struct __half { _Float16 v; };
inline float __half2float(__half h) { return (float)h.v; }
inline __half __float2half_rn(float f) { return {(_Float16)f}; }
inline void fo_cp_async16(void* smem, const void* gmem) { std::memcpy(smem, gmem, 16); }
inline void fo_cp_async_commit() {}
template <int N> inline void fo_cp_async_wait() {}
inline float fo_emu_float(float x) { return x; }
inline float fo_emu_float(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float fo_emu_float(__half x) { return __half2float(x); }
"""

MMA = r"""#pragma once
#include "fo_emu_common.h"
namespace nvcuda { namespace wmma {
struct matrix_a {}; struct matrix_b {}; struct accumulator {};
struct row_major {}; struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <typename Use, int M, int N, int K, typename T, typename L = void> struct fragment {
  static constexpr int num_elements = 256;
  T x[256];
};
template <typename Use, typename T, typename L>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L>& f, const T* p, unsigned ld) {
  constexpr bool col = std::is_same<L, col_major>::value;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = col ? p[c * ld + r] : p[r * ld + c];
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p,
                             unsigned ld, layout_t l) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      f.x[r * 16 + c] = l == mem_col_major ? p[c * ld + r] : p[r * ld + c];
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ld, layout_t l) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      (l == mem_col_major ? p[c * ld + r] : p[r * ld + c]) = f.x[r * 16 + c];
}
inline void fill_fragment(fragment<accumulator, 16, 16, 16, float>& f, float v) {
  for (int i = 0; i < 256; ++i) f.x[i] = v;
}
template <typename T, typename LA, typename LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
                     const fragment<matrix_a, 16, 16, 16, T, LA>& a,
                     const fragment<matrix_b, 16, 16, 16, T, LB>& b,
                     const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[256];
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 16; ++n) {
      float s = c.x[r * 16 + n];
      for (int k = 0; k < 16; ++k)
        s += fo_emu_float(a.x[r * 16 + k]) * fo_emu_float(b.x[k * 16 + n]);
      out[r * 16 + n] = s;
    }
  for (int i = 0; i < 256; ++i) d.x[i] = out[i];
}
} }
"""

HEADERS = {
    "fo_emu_common.h": COMMON,
    "cuda_fp16.h": '#pragma once\n#include "fo_emu_common.h"\n',
    "cuda_bf16.h": '#pragma once\n#include "fo_emu_common.h"\n',
    "mma.h": MMA,
}
"""Stand-ins for the CUDA headers the generated code includes."""

SMEM_BYTES = 256 * 1024


def emulator_available() -> bool:
    """Whether g++ (with C++20 `<barrier>`) is installed."""
    return shutil.which("g++") is not None


def _wrapper(k: CudaKernel) -> str:
    casts = ", ".join(f"({t})args[{i}]" for i, t in enumerate(k.params))
    return f"""
extern "C" int fo_emu_run(void** args, int gx, int gy, int gz, int nt) {{
  gridDim = dim3{{(unsigned)gx, (unsigned)gy, (unsigned)gz}};
  blockDim = dim3{{(unsigned)nt, 1u, 1u}};
  for (int z = 0; z < gz; ++z) for (int y = 0; y < gy; ++y) for (int x = 0; x < gx; ++x) {{
    std::barrier<> bar(nt);
    fo_emu_block blk; blk.bar = &bar; fo_emu_cur = &blk;
    std::vector<std::thread> ts;
    for (int t = 0; t < nt; ++t) ts.emplace_back([&, t] {{
      threadIdx = dim3{{(unsigned)t, 0u, 0u}};
      blockIdx = dim3{{(unsigned)x, (unsigned)y, (unsigned)z}};
      {k.c_name}({casts});
    }});
    for (auto& th : ts) th.join();
  }}
  return 0;
}}
"""


class EmulatedKernel:
    """One kernel compiled for the CPU emulation (a shared library)."""

    def __init__(self, k: CudaKernel, workdir: Path):
        if k.smem_bytes > SMEM_BYTES:
            raise CompileError(f"{k.c_name}: {k.smem_bytes} bytes of shared memory")
        inc = workdir / "include"
        inc.mkdir(parents=True, exist_ok=True)
        for name, text in HEADERS.items():
            (inc / name).write_text(text)
        source = k.source.replace("extern __shared__ __align__(128) unsigned char fo_smem[];", "")
        head = '#include "fo_emu_common.h"\n'
        head += f"alignas(128) static unsigned char fo_smem[{SMEM_BYTES}];\n"
        text = head + source + _wrapper(k)
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        src = workdir / f"{k.c_name}-{digest}.cpp"
        lib = workdir / f"{k.c_name}-{digest}.so"
        src.write_text(text)
        if not lib.exists():
            cmd = [
                "g++",
                "-std=c++20",
                "-O1",
                "-w",
                "-shared",
                "-fPIC",
                "-pthread",
                "-D__CUDACC_RTC__",
                "-DFO_EMULATED",
                f"-I{inc}",
                "-o",
                str(lib),
                str(src),
            ]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise CompileError(f"g++ failed on the emulated {src}:\n{r.stderr[:4000]}")
        self.lib = ctypes.CDLL(str(lib))
        self.lib.fo_emu_run.restype = ctypes.c_int

    def launch(self, grid: tuple[int, ...], threads: int, args: list[int]) -> None:
        """Run the kernel over `grid` blocks of `threads` CPU threads; `args`: the
        pointer values, then the sizes (`Launch.resolve`)."""
        g = (list(grid) + [1, 1])[:3]
        ptrs = (ctypes.c_void_p * max(1, len(args)))(*args)
        self.lib.fo_emu_run(ptrs, g[0], g[1], g[2], threads)


class EmulatedFunction(CudaFunction):
    """A CudaFunction whose kernels run in the CPU emulation, on CPU tensors."""

    def __init__(self, fn: CudaFunction, workdir: Path | None = None):
        self.__dict__.update(fn.__dict__)
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="fuseopt-cuda-emu-"))
        self._emulated: dict[str, EmulatedKernel] = {}
        self._emulated_host = None

    def compile_all(self, device: torch.device | None = None) -> None:
        """Build every kernel's emulation library."""
        for k in self.cuda_kernels:
            self._kernel(k, torch.device("cpu"))

    def _kernel(self, k: CudaKernel, dev: torch.device) -> EmulatedKernel:  # type: ignore[override]
        got = self._emulated.get(k.c_name)
        if got is None:
            got = self._emulated[k.c_name] = EmulatedKernel(k, self.workdir)
        return got

    def check(self, inputs):  # noqa: ANN001, ANN201 - CPU tensors instead of CUDA ones
        """The inputs as contiguous CPU tensors of the compiled shapes."""
        return [
            as_compiled(i, x, shape, dt)
            for i, (x, (shape, dt)) in enumerate(zip(inputs, self.inputs, strict=True))
        ]

    def trusting(self, trusted: Sequence[bool]) -> EmulatedFunction:  # noqa: ARG002
        """This function itself: the emulation checks every input (a test tool)."""
        return self

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Run the printed host function on the CPU with emulated kernels."""
        xs = self.check(inputs)
        if self._emulated_host is None:
            self._emulated_host = self._bind_emulated()
        return self._emulated_host(*xs, device=torch.device("cpu"))

    def _bind_emulated(self):  # noqa: ANN202 - the bound host function
        """The host function bound with emulated kernels: a kernel's handle is its
        position in `cuda_kernels` (plus one), a run goes through `_launch_run`."""
        handles = {k.c_name: i + 1 for i, k in enumerate(self.cuda_kernels)}
        by_handle = {i + 1: k for i, k in enumerate(self.cuda_kernels)}

        def launch_run(run: LaunchRun, stream: int) -> int:  # noqa: ARG001
            for i, x in enumerate(run.launches):
                grid = run.grid(i)
                if all(grid):
                    k = by_handle[x.function]
                    self._kernel(k, torch.device("cpu")).launch(grid, x.threads, run.arguments(i))
            return 0

        return self.host_code.bind(
            lambda k: (handles[k.c_name], k.smem_bytes),
            launch_run,
            lambda run: run,
            0,
            lambda index: 0,
            0,
            str,
        )
