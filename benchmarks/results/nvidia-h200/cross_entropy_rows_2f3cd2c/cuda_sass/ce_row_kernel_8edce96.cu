// fuseopt CUDA kernel `fused_1_cast_reduce_max_sub_exp` (schedule: row_reduction_looped)
// launch: grid (300), block (256), dynamic shared memory 160 bytes, num_warps 8
// build: nvcc -arch=sm_90 -c fused_1_cast_reduce_max_sub_exp.cu

#pragma nv_diag_suppress 177
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

extern "C" __global__ void __launch_bounds__(256)
fused_1_cast_reduce_max_sub_exp(const __nv_bfloat16* __restrict__ p0, const long long* __restrict__ p1, const __nv_bfloat16* __restrict__ p2, const float* __restrict__ p3, const bool* __restrict__ p4, const float* __restrict__ p5, float* __restrict__ p6) {
  extern __shared__ __align__(128) unsigned char fo_smem[];
  const int fo_tid = threadIdx.x;
  const int fo_lane = fo_tid & 31;
  const int fo_warp = fo_tid >> 5;
  (void)fo_smem; (void)fo_lane; (void)fo_warp;
  float* red = reinterpret_cast<float*>(fo_smem + 0);
  float* red_2 = reinterpret_cast<float*>(fo_smem + 128);
  const long long pid0 = (long long)blockIdx.x;
  const float c = __int_as_float(0xff800000);
  const float c_1 = 0.0f;
  float acc = c;
  float acc_1 = c_1;
  for (long long iv = 0LL; iv < 128256LL; iv += 4096LL) {
    alignas(16) __nv_bfloat16 ld[16];
    {
      const int fo_f = (fo_tid * 4);
      const long long fo_g = (pid0 + (fo_f / 4096 % 1)) * 128256LL + (iv + (fo_f % 4096));
      const bool fo_ok = true;
      const long long fo_c = iv + (fo_f % 4096);
      if (fo_ok && fo_c + 4 <= 128256 && fo_aligned(p0, fo_vec_bytes<__nv_bfloat16, 4>())) {
        fo_copy_vec<__nv_bfloat16, 4>(&ld[0], p0 + fo_g);
      }
      else {
        __nv_bfloat16 fo_e[4];
        #pragma unroll 1
        for (int fo_j = 0; fo_j < 4; ++fo_j) fo_e[fo_j] = (fo_ok && fo_c + fo_j < 128256) ? p0[fo_g + fo_j] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[0] = fo_e[0];
        ld[1] = fo_e[1];
        ld[2] = fo_e[2];
        ld[3] = fo_e[3];
      }
    }
    {
      const int fo_f = (1024 + fo_tid * 4);
      const long long fo_g = (pid0 + (fo_f / 4096 % 1)) * 128256LL + (iv + (fo_f % 4096));
      const bool fo_ok = true;
      const long long fo_c = iv + (fo_f % 4096);
      if (fo_ok && fo_c + 4 <= 128256 && fo_aligned(p0, fo_vec_bytes<__nv_bfloat16, 4>())) {
        fo_copy_vec<__nv_bfloat16, 4>(&ld[4], p0 + fo_g);
      }
      else {
        __nv_bfloat16 fo_e[4];
        #pragma unroll 1
        for (int fo_j = 0; fo_j < 4; ++fo_j) fo_e[fo_j] = (fo_ok && fo_c + fo_j < 128256) ? p0[fo_g + fo_j] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[4] = fo_e[0];
        ld[5] = fo_e[1];
        ld[6] = fo_e[2];
        ld[7] = fo_e[3];
      }
    }
    {
      const int fo_f = (2048 + fo_tid * 4);
      const long long fo_g = (pid0 + (fo_f / 4096 % 1)) * 128256LL + (iv + (fo_f % 4096));
      const bool fo_ok = true;
      const long long fo_c = iv + (fo_f % 4096);
      if (fo_ok && fo_c + 4 <= 128256 && fo_aligned(p0, fo_vec_bytes<__nv_bfloat16, 4>())) {
        fo_copy_vec<__nv_bfloat16, 4>(&ld[8], p0 + fo_g);
      }
      else {
        __nv_bfloat16 fo_e[4];
        #pragma unroll 1
        for (int fo_j = 0; fo_j < 4; ++fo_j) fo_e[fo_j] = (fo_ok && fo_c + fo_j < 128256) ? p0[fo_g + fo_j] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[8] = fo_e[0];
        ld[9] = fo_e[1];
        ld[10] = fo_e[2];
        ld[11] = fo_e[3];
      }
    }
    {
      const int fo_f = (3072 + fo_tid * 4);
      const long long fo_g = (pid0 + (fo_f / 4096 % 1)) * 128256LL + (iv + (fo_f % 4096));
      const bool fo_ok = true;
      const long long fo_c = iv + (fo_f % 4096);
      if (fo_ok && fo_c + 4 <= 128256 && fo_aligned(p0, fo_vec_bytes<__nv_bfloat16, 4>())) {
        fo_copy_vec<__nv_bfloat16, 4>(&ld[12], p0 + fo_g);
      }
      else {
        __nv_bfloat16 fo_e[4];
        #pragma unroll 1
        for (int fo_j = 0; fo_j < 4; ++fo_j) fo_e[fo_j] = (fo_ok && fo_c + fo_j < 128256) ? p0[fo_g + fo_j] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[12] = fo_e[0];
        ld[13] = fo_e[1];
        ld[14] = fo_e[2];
        ld[15] = fo_e[3];
      }
    }
    alignas(16) float t[16];
    t[0] = fo_to<float>::of(ld[0]);
    t[1] = fo_to<float>::of(ld[1]);
    t[2] = fo_to<float>::of(ld[2]);
    t[3] = fo_to<float>::of(ld[3]);
    t[4] = fo_to<float>::of(ld[4]);
    t[5] = fo_to<float>::of(ld[5]);
    t[6] = fo_to<float>::of(ld[6]);
    t[7] = fo_to<float>::of(ld[7]);
    t[8] = fo_to<float>::of(ld[8]);
    t[9] = fo_to<float>::of(ld[9]);
    t[10] = fo_to<float>::of(ld[10]);
    t[11] = fo_to<float>::of(ld[11]);
    t[12] = fo_to<float>::of(ld[12]);
    t[13] = fo_to<float>::of(ld[13]);
    t[14] = fo_to<float>::of(ld[14]);
    t[15] = fo_to<float>::of(ld[15]);
    alignas(16) bool mask[16];
    mask[0] = iv + ((fo_tid * 4) + 0) % 4096 < 128256;
    mask[1] = iv + ((fo_tid * 4) + 1) % 4096 < 128256;
    mask[2] = iv + ((fo_tid * 4) + 2) % 4096 < 128256;
    mask[3] = iv + ((fo_tid * 4) + 3) % 4096 < 128256;
    mask[4] = iv + ((1024 + fo_tid * 4) + 0) % 4096 < 128256;
    mask[5] = iv + ((1024 + fo_tid * 4) + 1) % 4096 < 128256;
    mask[6] = iv + ((1024 + fo_tid * 4) + 2) % 4096 < 128256;
    mask[7] = iv + ((1024 + fo_tid * 4) + 3) % 4096 < 128256;
    mask[8] = iv + ((2048 + fo_tid * 4) + 0) % 4096 < 128256;
    mask[9] = iv + ((2048 + fo_tid * 4) + 1) % 4096 < 128256;
    mask[10] = iv + ((2048 + fo_tid * 4) + 2) % 4096 < 128256;
    mask[11] = iv + ((2048 + fo_tid * 4) + 3) % 4096 < 128256;
    mask[12] = iv + ((3072 + fo_tid * 4) + 0) % 4096 < 128256;
    mask[13] = iv + ((3072 + fo_tid * 4) + 1) % 4096 < 128256;
    mask[14] = iv + ((3072 + fo_tid * 4) + 2) % 4096 < 128256;
    mask[15] = iv + ((3072 + fo_tid * 4) + 3) % 4096 < 128256;
    const float c_2 = __int_as_float(0xff800000);
    alignas(16) float t_1[16];
    t_1[0] = (mask[0] ? t[0] : c_2);
    t_1[1] = (mask[1] ? t[1] : c_2);
    t_1[2] = (mask[2] ? t[2] : c_2);
    t_1[3] = (mask[3] ? t[3] : c_2);
    t_1[4] = (mask[4] ? t[4] : c_2);
    t_1[5] = (mask[5] ? t[5] : c_2);
    t_1[6] = (mask[6] ? t[6] : c_2);
    t_1[7] = (mask[7] ? t[7] : c_2);
    t_1[8] = (mask[8] ? t[8] : c_2);
    t_1[9] = (mask[9] ? t[9] : c_2);
    t_1[10] = (mask[10] ? t[10] : c_2);
    t_1[11] = (mask[11] ? t[11] : c_2);
    t_1[12] = (mask[12] ? t[12] : c_2);
    t_1[13] = (mask[13] ? t[13] : c_2);
    t_1[14] = (mask[14] ? t[14] : c_2);
    t_1[15] = (mask[15] ? t[15] : c_2);
    float part = __int_as_float(0xff800000);
    part = fo_max(part, t_1[0]);
    part = fo_max(part, t_1[1]);
    part = fo_max(part, t_1[2]);
    part = fo_max(part, t_1[3]);
    part = fo_max(part, t_1[4]);
    part = fo_max(part, t_1[5]);
    part = fo_max(part, t_1[6]);
    part = fo_max(part, t_1[7]);
    part = fo_max(part, t_1[8]);
    part = fo_max(part, t_1[9]);
    part = fo_max(part, t_1[10]);
    part = fo_max(part, t_1[11]);
    part = fo_max(part, t_1[12]);
    part = fo_max(part, t_1[13]);
    part = fo_max(part, t_1[14]);
    part = fo_max(part, t_1[15]);
    part = fo_group_allreduce<32>(part, fo_max_op());
    __syncthreads();
    if (fo_lane == 0) {
      red[0 + fo_warp] = part;
    }
    __syncthreads();
    part = red[0];
    part = fo_max(part, red[1]);
    part = fo_max(part, red[2]);
    part = fo_max(part, red[3]);
    part = fo_max(part, red[4]);
    part = fo_max(part, red[5]);
    part = fo_max(part, red[6]);
    part = fo_max(part, red[7]);
    const float red_1 = part;
    const float u = fo_max(acc, red_1);
    const float c_3 = __int_as_float(0xff800000);
    const bool u_1 = (u == c_3);
    const float c_4 = 0.0f;
    const float u_2 = (u_1 ? c_4 : u);
    alignas(16) float t_2[16];
    t_2[0] = (t[0] - u_2);
    t_2[1] = (t[1] - u_2);
    t_2[2] = (t[2] - u_2);
    t_2[3] = (t[3] - u_2);
    t_2[4] = (t[4] - u_2);
    t_2[5] = (t[5] - u_2);
    t_2[6] = (t[6] - u_2);
    t_2[7] = (t[7] - u_2);
    t_2[8] = (t[8] - u_2);
    t_2[9] = (t[9] - u_2);
    t_2[10] = (t[10] - u_2);
    t_2[11] = (t[11] - u_2);
    t_2[12] = (t[12] - u_2);
    t_2[13] = (t[13] - u_2);
    t_2[14] = (t[14] - u_2);
    t_2[15] = (t[15] - u_2);
    alignas(16) float t_3[16];
    t_3[0] = expf(t_2[0]);
    t_3[1] = expf(t_2[1]);
    t_3[2] = expf(t_2[2]);
    t_3[3] = expf(t_2[3]);
    t_3[4] = expf(t_2[4]);
    t_3[5] = expf(t_2[5]);
    t_3[6] = expf(t_2[6]);
    t_3[7] = expf(t_2[7]);
    t_3[8] = expf(t_2[8]);
    t_3[9] = expf(t_2[9]);
    t_3[10] = expf(t_2[10]);
    t_3[11] = expf(t_2[11]);
    t_3[12] = expf(t_2[12]);
    t_3[13] = expf(t_2[13]);
    t_3[14] = expf(t_2[14]);
    t_3[15] = expf(t_2[15]);
    const float c_5 = 0.0f;
    alignas(16) float t_4[16];
    t_4[0] = (mask[0] ? t_3[0] : c_5);
    t_4[1] = (mask[1] ? t_3[1] : c_5);
    t_4[2] = (mask[2] ? t_3[2] : c_5);
    t_4[3] = (mask[3] ? t_3[3] : c_5);
    t_4[4] = (mask[4] ? t_3[4] : c_5);
    t_4[5] = (mask[5] ? t_3[5] : c_5);
    t_4[6] = (mask[6] ? t_3[6] : c_5);
    t_4[7] = (mask[7] ? t_3[7] : c_5);
    t_4[8] = (mask[8] ? t_3[8] : c_5);
    t_4[9] = (mask[9] ? t_3[9] : c_5);
    t_4[10] = (mask[10] ? t_3[10] : c_5);
    t_4[11] = (mask[11] ? t_3[11] : c_5);
    t_4[12] = (mask[12] ? t_3[12] : c_5);
    t_4[13] = (mask[13] ? t_3[13] : c_5);
    t_4[14] = (mask[14] ? t_3[14] : c_5);
    t_4[15] = (mask[15] ? t_3[15] : c_5);
    float part_1 = 0.0f;
    part_1 = (part_1 + t_4[0]);
    part_1 = (part_1 + t_4[1]);
    part_1 = (part_1 + t_4[2]);
    part_1 = (part_1 + t_4[3]);
    part_1 = (part_1 + t_4[4]);
    part_1 = (part_1 + t_4[5]);
    part_1 = (part_1 + t_4[6]);
    part_1 = (part_1 + t_4[7]);
    part_1 = (part_1 + t_4[8]);
    part_1 = (part_1 + t_4[9]);
    part_1 = (part_1 + t_4[10]);
    part_1 = (part_1 + t_4[11]);
    part_1 = (part_1 + t_4[12]);
    part_1 = (part_1 + t_4[13]);
    part_1 = (part_1 + t_4[14]);
    part_1 = (part_1 + t_4[15]);
    part_1 = fo_group_allreduce<32>(part_1, fo_sum_op());
    __syncthreads();
    if (fo_lane == 0) {
      red_2[0 + fo_warp] = part_1;
    }
    __syncthreads();
    part_1 = red_2[0];
    part_1 = (part_1 + red_2[1]);
    part_1 = (part_1 + red_2[2]);
    part_1 = (part_1 + red_2[3]);
    part_1 = (part_1 + red_2[4]);
    part_1 = (part_1 + red_2[5]);
    part_1 = (part_1 + red_2[6]);
    part_1 = (part_1 + red_2[7]);
    const float red_3 = part_1;
    const float u_3 = (acc - u_2);
    const float u_4 = expf(u_3);
    const float u_5 = (acc_1 * u_4);
    const float u_6 = (u_5 + red_3);
    acc = u;
    acc_1 = u_6;
  }
  alignas(16) long long iota[1];
  iota[0] = (0LL + 128256LL * ((long long)(pid0) + ((fo_tid * 1) + 0)));
  alignas(16) long long ld_1[1];
  {
    const int fo_f = (fo_tid * 1);
    const long long fo_g = (pid0 + (fo_f % 1));
    const bool fo_ok = fo_f < 1;
    const long long fo_c = pid0 + (fo_f % 1);
    ld_1[0] = (fo_ok) ? p1[fo_g + 0] : 0LL;
  }
  const long long c_6 = 0LL;
  alignas(16) bool t_5[1];
  t_5[0] = (ld_1[0] >= c_6);
  const long long c_7 = 128256LL;
  alignas(16) bool t_6[1];
  t_6[0] = (ld_1[0] < c_7);
  const bool c_8 = false;
  alignas(16) bool t_7[1];
  t_7[0] = (t_5[0] ? t_6[0] : c_8);
  alignas(16) long long t_8[1];
  t_8[0] = (t_7[0] ? ld_1[0] : c_6);
  alignas(16) long long t_9[1];
  t_9[0] = (iota[0] + t_8[0]);
  alignas(16) __nv_bfloat16 gather[1];
  gather[0] = ((long long)(t_9[0]) >= 0 && (long long)(t_9[0]) < 38476800LL) ? p2[(long long)(t_9[0])] : fo_to<__nv_bfloat16>::of(0.0f);
  alignas(16) float t_10[1];
  t_10[0] = fo_to<float>::of(gather[0]);
  alignas(16) float t_11[1];
  t_11[0] = (t_10[0] - acc);
  const float u_7 = logf(acc_1);
  alignas(16) float t_12[1];
  t_12[0] = (t_11[0] - u_7);
  alignas(16) __nv_bfloat16 t_13[1];
  t_13[0] = fo_to<__nv_bfloat16>::of(t_12[0]);
  alignas(16) float t_14[1];
  t_14[0] = fo_to<float>::of(t_13[0]);
  const float c_9 = 0.0f;
  alignas(16) float t_15[1];
  t_15[0] = (t_7[0] ? t_14[0] : c_9);
  alignas(16) float t_16[1];
  t_16[0] = (-t_15[0]);
  alignas(16) float ld_2[1];
  {
    const int fo_f = (fo_tid * 1);
    const long long fo_g = (pid0 + (fo_f % 1));
    const bool fo_ok = fo_f < 1;
    const long long fo_c = pid0 + (fo_f % 1);
    ld_2[0] = (fo_ok) ? p3[fo_g + 0] : 0.0f;
  }
  alignas(16) float t_17[1];
  t_17[0] = (t_16[0] * ld_2[0]);
  alignas(16) bool ld_3[1];
  {
    const int fo_f = (fo_tid * 1);
    const long long fo_g = (pid0 + (fo_f % 1));
    const bool fo_ok = fo_f < 1;
    const long long fo_c = pid0 + (fo_f % 1);
    ld_3[0] = (fo_ok) ? p4[fo_g + 0] : false;
  }
  alignas(16) float t_18[1];
  t_18[0] = (ld_3[0] ? c_9 : t_17[0]);
  alignas(16) float ld_4[1];
  {
    const int fo_f = (fo_tid * 1);
    const long long fo_g = (pid0 + (fo_f % 1));
    const bool fo_ok = fo_f < 1;
    const long long fo_c = pid0 + (fo_f % 1);
    ld_4[0] = (fo_ok) ? p5[fo_g + 0] : 0.0f;
  }
  alignas(16) float t_19[1];
  t_19[0] = (t_7[0] ? t_18[0] : ld_4[0]);
  {
    const int fo_f = (fo_tid * 1);
    const long long fo_g = (pid0 + (fo_f % 1));
    const bool fo_ok = fo_f < 1;
    const long long fo_c = pid0 + (fo_f % 1);
    if (fo_ok) p6[fo_g + 0] = t_19[0];
  }
}

#ifndef __CUDACC_RTC__
extern "C" cudaError_t launch_fused_1_cast_reduce_max_sub_exp(const __nv_bfloat16* p0, const long long* p1, const __nv_bfloat16* p2, const float* p3, const bool* p4, const float* p5, float* p6, cudaStream_t stream) {
  fused_1_cast_reduce_max_sub_exp<<<dim3(300, 1, 1), dim3(256), 160, stream>>>(p0, p1, p2, p3, p4, p5, p6);
  return cudaGetLastError();
}
#endif

