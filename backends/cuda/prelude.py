# ruff: noqa: E501 - the prelude is C++ source, kept one helper per line
"""The fixed head of every generated `.cu` file: includes and small device helpers.

Every helper is `static __device__ __forceinline__` and prefixed `fo_`, so a
translation unit stays self-contained (no fuseopt header to ship) and two kernels
linked together never clash. Works under nvcc and NVRTC (`__CUDACC_RTC__`: no host
headers there).
"""

from __future__ import annotations

PRELUDE = r"""#pragma nv_diag_suppress 177
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#ifndef __CUDACC_RTC__
#include <cuda_runtime.h>
#endif

#define FO_FULL_MASK 0xffffffffu

// ---- element conversions: compute in float (floats), long long (i64), bool (i1)
static __device__ __forceinline__ float fo_f(float x) { return x; }
static __device__ __forceinline__ float fo_f(__half x) { return __half2float(x); }
static __device__ __forceinline__ float fo_f(__nv_bfloat16 x) { return __bfloat162float(x); }
static __device__ __forceinline__ float fo_f(long long x) { return (float)x; }
static __device__ __forceinline__ float fo_f(bool x) { return x ? 1.0f : 0.0f; }
static __device__ __forceinline__ long long fo_i(float x) { return (long long)x; }
static __device__ __forceinline__ long long fo_i(__half x) { return (long long)__half2float(x); }
static __device__ __forceinline__ long long fo_i(__nv_bfloat16 x) { return (long long)__bfloat162float(x); }
static __device__ __forceinline__ long long fo_i(long long x) { return x; }
static __device__ __forceinline__ long long fo_i(bool x) { return x ? 1 : 0; }

template <typename T> struct fo_to;
template <> struct fo_to<float> {
  static __device__ __forceinline__ float of(float x) { return x; }
  static __device__ __forceinline__ float of(long long x) { return (float)x; }
  static __device__ __forceinline__ float of(bool x) { return x ? 1.0f : 0.0f; }
  static __device__ __forceinline__ float of(__half x) { return __half2float(x); }
  static __device__ __forceinline__ float of(__nv_bfloat16 x) { return __bfloat162float(x); }
};
template <> struct fo_to<__half> {
  static __device__ __forceinline__ __half of(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ __half of(long long x) { return __float2half_rn((float)x); }
  static __device__ __forceinline__ __half of(bool x) { return __float2half_rn(x ? 1.0f : 0.0f); }
  static __device__ __forceinline__ __half of(__half x) { return x; }
  static __device__ __forceinline__ __half of(__nv_bfloat16 x) { return __float2half_rn(__bfloat162float(x)); }
};
template <> struct fo_to<__nv_bfloat16> {
  static __device__ __forceinline__ __nv_bfloat16 of(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ __nv_bfloat16 of(long long x) { return __float2bfloat16_rn((float)x); }
  static __device__ __forceinline__ __nv_bfloat16 of(bool x) { return __float2bfloat16_rn(x ? 1.0f : 0.0f); }
  static __device__ __forceinline__ __nv_bfloat16 of(__half x) { return __float2bfloat16_rn(__half2float(x)); }
  static __device__ __forceinline__ __nv_bfloat16 of(__nv_bfloat16 x) { return x; }
};
template <> struct fo_to<long long> {
  static __device__ __forceinline__ long long of(float x) { return (long long)x; }
  static __device__ __forceinline__ long long of(long long x) { return x; }
  static __device__ __forceinline__ long long of(bool x) { return x ? 1 : 0; }
  static __device__ __forceinline__ long long of(__half x) { return (long long)__half2float(x); }
  static __device__ __forceinline__ long long of(__nv_bfloat16 x) { return (long long)__bfloat162float(x); }
};
template <> struct fo_to<bool> {
  static __device__ __forceinline__ bool of(float x) { return x != 0.0f; }
  static __device__ __forceinline__ bool of(long long x) { return x != 0; }
  static __device__ __forceinline__ bool of(bool x) { return x; }
  static __device__ __forceinline__ bool of(__half x) { return __half2float(x) != 0.0f; }
  static __device__ __forceinline__ bool of(__nv_bfloat16 x) { return __bfloat162float(x) != 0.0f; }
};

// ---- math with PyTorch's NaN rules (max/min/relu propagate NaN)
// (sm_80 and later: one max.NaN / min.NaN instruction, which returns NaN when either is NaN)
static __device__ __forceinline__ float fo_max(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r; asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r;
#else
  return (a > b || a != a) ? a : b;
#endif
}
static __device__ __forceinline__ float fo_min(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r; asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r;
#else
  return (a < b || a != a) ? a : b;
#endif
}
static __device__ __forceinline__ long long fo_max(long long a, long long b) { return a > b ? a : b; }
static __device__ __forceinline__ long long fo_min(long long a, long long b) { return a < b ? a : b; }
static __device__ __forceinline__ float fo_relu(float x) { return (x > 0.0f || x != x) ? x : 0.0f; }
// sigmoid and silu are eager's formulas over expf (__expf is ex2.approx(x * log2(e)), ~60 ulps at |x| near 88)
// and __fdividef (2 ulps; IEEE division's slow-path call made kernels spill), which returns 0 for divisors
// above 2**126: below x = -80, sigmoid(x) is exp(x) to within an f32 rounding (1 + exp(-x) ~ exp(-x))
static __device__ __forceinline__ float fo_sigmoid(float x) {
  return x < -80.0f ? expf(x) : __fdividef(1.0f, 1.0f + expf(-x));
}
static __device__ __forceinline__ float fo_silu(float x) {
  return x < -80.0f ? x * expf(x) : __fdividef(x, 1.0f + expf(-x));
}
static __device__ __forceinline__ float fo_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
static __device__ __forceinline__ float fo_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

// ---- index arithmetic (floor / ceil division of signed integers)
static __device__ __forceinline__ long long fo_floordiv(long long a, long long b) {
  long long q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static __device__ __forceinline__ long long fo_ceildiv(long long a, long long b) {
  long long q = a / b; return (q * b != a && ((a < 0) == (b < 0))) ? q + 1 : q;
}

// ---- rounding division (PyTorch's): floor_divide's div_floor_floating, and remainder with the divisor's sign
static __device__ __forceinline__ float fo_floor_div(float a, float b) {
  if (b == 0.0f) return a / b;
  float mod = fmodf(a, b);
  float div = (a - mod) / b;
  if (mod != 0.0f && (b < 0.0f) != (mod < 0.0f)) div -= 1.0f;
  if (div == 0.0f) return copysignf(0.0f, a / b);
  float floor = floorf(div);
  return div - floor > 0.5f ? floor + 1.0f : floor;
}
static __device__ __forceinline__ float fo_remainder(float a, float b) {
  float r = fmodf(a, b);
  return (r != 0.0f && (r < 0.0f) != (b < 0.0f)) ? r + b : r;
}
static __device__ __forceinline__ long long fo_remainder(long long a, long long b) {
  long long r = a % b;
  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}

// ---- reductions: a warp (or an aligned group of `width` lanes) combines its values
struct fo_sum_op { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; } };
struct fo_max_op { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return fo_max(a, b); } };
struct fo_min_op { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return fo_min(a, b); } };

template <int WIDTH, typename Op, typename T>
static __device__ __forceinline__ T fo_group_allreduce(T x, Op op) {
#pragma unroll
  for (int off = WIDTH / 2; off > 0; off /= 2) x = op(x, __shfl_xor_sync(FO_FULL_MASK, x, off));
  return x;
}

// ---- the lanes of a warp with the same lane % STRIDE combine their values
template <int STRIDE, typename Op, typename T>
static __device__ __forceinline__ T fo_strided_allreduce(T x, Op op) {
#pragma unroll
  for (int off = 16; off >= STRIDE; off /= 2) x = op(x, __shfl_xor_sync(FO_FULL_MASK, x, off));
  return x;
}

// ---- vector memory access: BYTES per access where aligned, else element by element
static __device__ __forceinline__ bool fo_aligned(const void* p, int bytes) {
  return (reinterpret_cast<unsigned long long>(p) & (unsigned long long)(bytes - 1)) == 0;
}
template <typename T, int V>
static __device__ __forceinline__ void fo_copy_vec(T* dst, const T* src) {
  constexpr int bytes = V * (int)sizeof(T);
  if constexpr (bytes % 16 == 0) {
#pragma unroll
    for (int j = 0; j < bytes / 16; ++j) reinterpret_cast<uint4*>(dst)[j] = reinterpret_cast<const uint4*>(src)[j];
  } else if constexpr (bytes % 8 == 0) {
#pragma unroll
    for (int j = 0; j < bytes / 8; ++j) reinterpret_cast<uint2*>(dst)[j] = reinterpret_cast<const uint2*>(src)[j];
  } else if constexpr (bytes % 4 == 0) {
#pragma unroll
    for (int j = 0; j < bytes / 4; ++j) reinterpret_cast<unsigned*>(dst)[j] = reinterpret_cast<const unsigned*>(src)[j];
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) dst[j] = src[j];
  }
}
template <typename T, int V>
static __device__ __forceinline__ int fo_vec_bytes() {
  constexpr int bytes = V * (int)sizeof(T);
  return bytes % 16 == 0 ? 16 : bytes % 8 == 0 ? 8 : bytes % 4 == 0 ? 4 : (int)sizeof(T);
}
"""
"""Includes and `fo_` device helpers that open every generated translation unit."""

WMMA_INCLUDE = "#include <mma.h>\n"
"""Included only by kernels that use tensor cores through WMMA."""

CP_ASYNC = r"""#ifndef FO_EMULATED
// ---- asynchronous global -> shared copies (sm_80+), one commit group per stage
static __device__ __forceinline__ void fo_cp_async16(void* smem, const void* gmem) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(gmem));
}
static __device__ __forceinline__ void fo_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> static __device__ __forceinline__ void fo_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}
#endif
"""
"""cp.async helpers, included only by kernels with a pipelined matmul loop."""
