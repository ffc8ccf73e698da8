// fuseopt CUDA kernel `fused_0_sum` (schedule: row_reduction_looped)
// launch: grid (512), block (128), dynamic shared memory 1280 bytes, num_warps 4
// build: nvcc -arch=sm_90 -c fused_0_sum.cu

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
static __device__ __forceinline__ float fo_max(float a, float b) { return (a > b || a != a) ? a : b; }
static __device__ __forceinline__ float fo_min(float a, float b) { return (a < b || a != a) ? a : b; }
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

extern "C" __global__ void __launch_bounds__(128)
fused_0_sum(const __nv_bfloat16* __restrict__ p0, __nv_bfloat16* __restrict__ p1) {
  extern __shared__ __align__(128) unsigned char fo_smem[];
  const int fo_tid = threadIdx.x;
  const int fo_lane = fo_tid & 31;
  const int fo_warp = fo_tid >> 5;
  (void)fo_smem; (void)fo_lane; (void)fo_warp;
  float* cols = reinterpret_cast<float*>(fo_smem + 0);
  float* red = reinterpret_cast<float*>(fo_smem + 1024);
  const long long pid0 = (long long)blockIdx.x;
  const long long i = (pid0 * 64LL);
  const float c = 0.0f;
  alignas(16) float acc[16];
  acc[0] = c;
  acc[1] = c;
  acc[2] = c;
  acc[3] = c;
  acc[4] = c;
  acc[5] = c;
  acc[6] = c;
  acc[7] = c;
  acc[8] = c;
  acc[9] = c;
  acc[10] = c;
  acc[11] = c;
  acc[12] = c;
  acc[13] = c;
  acc[14] = c;
  acc[15] = c;
  for (long long iv = 0LL; iv < 1024LL; iv += 32LL) {
    alignas(16) __nv_bfloat16 ld[16];
    {
      const int fo_f = (fo_tid * 8);
      const long long fo_g = (iv + (fo_f / 64 % 32)) * 32768LL + (i + (fo_f % 64));
      const bool fo_ok = (iv + (fo_f / 64 % 32)) < 1024;
      const long long fo_c = i + (fo_f % 64);
      if (fo_ok && fo_c + 8 <= 32768 && fo_aligned(p0 + fo_g, fo_vec_bytes<__nv_bfloat16, 8>())) {
        fo_copy_vec<__nv_bfloat16, 8>(&ld[0], p0 + fo_g);
      }
      else {
        ld[0] = (fo_ok && fo_c + 0 < 32768) ? p0[fo_g + 0] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[1] = (fo_ok && fo_c + 1 < 32768) ? p0[fo_g + 1] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[2] = (fo_ok && fo_c + 2 < 32768) ? p0[fo_g + 2] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[3] = (fo_ok && fo_c + 3 < 32768) ? p0[fo_g + 3] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[4] = (fo_ok && fo_c + 4 < 32768) ? p0[fo_g + 4] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[5] = (fo_ok && fo_c + 5 < 32768) ? p0[fo_g + 5] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[6] = (fo_ok && fo_c + 6 < 32768) ? p0[fo_g + 6] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[7] = (fo_ok && fo_c + 7 < 32768) ? p0[fo_g + 7] : fo_to<__nv_bfloat16>::of(0.0f);
      }
    }
    {
      const int fo_f = (1024 + fo_tid * 8);
      const long long fo_g = (iv + (fo_f / 64 % 32)) * 32768LL + (i + (fo_f % 64));
      const bool fo_ok = (iv + (fo_f / 64 % 32)) < 1024;
      const long long fo_c = i + (fo_f % 64);
      if (fo_ok && fo_c + 8 <= 32768 && fo_aligned(p0 + fo_g, fo_vec_bytes<__nv_bfloat16, 8>())) {
        fo_copy_vec<__nv_bfloat16, 8>(&ld[8], p0 + fo_g);
      }
      else {
        ld[8] = (fo_ok && fo_c + 0 < 32768) ? p0[fo_g + 0] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[9] = (fo_ok && fo_c + 1 < 32768) ? p0[fo_g + 1] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[10] = (fo_ok && fo_c + 2 < 32768) ? p0[fo_g + 2] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[11] = (fo_ok && fo_c + 3 < 32768) ? p0[fo_g + 3] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[12] = (fo_ok && fo_c + 4 < 32768) ? p0[fo_g + 4] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[13] = (fo_ok && fo_c + 5 < 32768) ? p0[fo_g + 5] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[14] = (fo_ok && fo_c + 6 < 32768) ? p0[fo_g + 6] : fo_to<__nv_bfloat16>::of(0.0f);
        ld[15] = (fo_ok && fo_c + 7 < 32768) ? p0[fo_g + 7] : fo_to<__nv_bfloat16>::of(0.0f);
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
    alignas(16) float t_1[16];
    t_1[0] = (acc[0] + t[0]);
    t_1[1] = (acc[1] + t[1]);
    t_1[2] = (acc[2] + t[2]);
    t_1[3] = (acc[3] + t[3]);
    t_1[4] = (acc[4] + t[4]);
    t_1[5] = (acc[5] + t[5]);
    t_1[6] = (acc[6] + t[6]);
    t_1[7] = (acc[7] + t[7]);
    t_1[8] = (acc[8] + t[8]);
    t_1[9] = (acc[9] + t[9]);
    t_1[10] = (acc[10] + t[10]);
    t_1[11] = (acc[11] + t[11]);
    t_1[12] = (acc[12] + t[12]);
    t_1[13] = (acc[13] + t[13]);
    t_1[14] = (acc[14] + t[14]);
    t_1[15] = (acc[15] + t[15]);
    acc[0] = t_1[0];
    acc[1] = t_1[1];
    acc[2] = t_1[2];
    acc[3] = t_1[3];
    acc[4] = t_1[4];
    acc[5] = t_1[5];
    acc[6] = t_1[6];
    acc[7] = t_1[7];
    acc[8] = t_1[8];
    acc[9] = t_1[9];
    acc[10] = t_1[10];
    acc[11] = t_1[11];
    acc[12] = t_1[12];
    acc[13] = t_1[13];
    acc[14] = t_1[14];
    acc[15] = t_1[15];
  }
  float col = acc[0];
  col = (col + acc[8]);
  float col_1 = acc[1];
  col_1 = (col_1 + acc[9]);
  float col_2 = acc[2];
  col_2 = (col_2 + acc[10]);
  float col_3 = acc[3];
  col_3 = (col_3 + acc[11]);
  float col_4 = acc[4];
  col_4 = (col_4 + acc[12]);
  float col_5 = acc[5];
  col_5 = (col_5 + acc[13]);
  float col_6 = acc[6];
  col_6 = (col_6 + acc[14]);
  float col_7 = acc[7];
  col_7 = (col_7 + acc[15]);
  col = fo_strided_allreduce<8>(col, fo_sum_op());
  col_1 = fo_strided_allreduce<8>(col_1, fo_sum_op());
  col_2 = fo_strided_allreduce<8>(col_2, fo_sum_op());
  col_3 = fo_strided_allreduce<8>(col_3, fo_sum_op());
  col_4 = fo_strided_allreduce<8>(col_4, fo_sum_op());
  col_5 = fo_strided_allreduce<8>(col_5, fo_sum_op());
  col_6 = fo_strided_allreduce<8>(col_6, fo_sum_op());
  col_7 = fo_strided_allreduce<8>(col_7, fo_sum_op());
  if (fo_lane < 8) {
    cols[fo_warp * 64 + (fo_tid % 8) * 8 + 0] = col;
    cols[fo_warp * 64 + (fo_tid % 8) * 8 + 1] = col_1;
    cols[fo_warp * 64 + (fo_tid % 8) * 8 + 2] = col_2;
    cols[fo_warp * 64 + (fo_tid % 8) * 8 + 3] = col_3;
    cols[fo_warp * 64 + (fo_tid % 8) * 8 + 4] = col_4;
    cols[fo_warp * 64 + (fo_tid % 8) * 8 + 5] = col_5;
    cols[fo_warp * 64 + (fo_tid % 8) * 8 + 6] = col_6;
    cols[fo_warp * 64 + (fo_tid % 8) * 8 + 7] = col_7;
  }
  __syncthreads();
  for (int fo_o = fo_tid; fo_o < 64; fo_o += 128) {
    float fo_a = cols[fo_o];
    fo_a = (fo_a + cols[64 + fo_o]);
    fo_a = (fo_a + cols[128 + fo_o]);
    fo_a = (fo_a + cols[192 + fo_o]);
    red[fo_o] = fo_a;
  }
  __syncthreads();
  alignas(16) float t_2[8];
  if ((fo_tid * 8) < 64) {
    t_2[0] = red[(fo_tid * 8) + 0];
    t_2[1] = red[(fo_tid * 8) + 1];
    t_2[2] = red[(fo_tid * 8) + 2];
    t_2[3] = red[(fo_tid * 8) + 3];
    t_2[4] = red[(fo_tid * 8) + 4];
    t_2[5] = red[(fo_tid * 8) + 5];
    t_2[6] = red[(fo_tid * 8) + 6];
    t_2[7] = red[(fo_tid * 8) + 7];
  }
  alignas(16) __nv_bfloat16 t_3[8];
  t_3[0] = fo_to<__nv_bfloat16>::of(t_2[0]);
  t_3[1] = fo_to<__nv_bfloat16>::of(t_2[1]);
  t_3[2] = fo_to<__nv_bfloat16>::of(t_2[2]);
  t_3[3] = fo_to<__nv_bfloat16>::of(t_2[3]);
  t_3[4] = fo_to<__nv_bfloat16>::of(t_2[4]);
  t_3[5] = fo_to<__nv_bfloat16>::of(t_2[5]);
  t_3[6] = fo_to<__nv_bfloat16>::of(t_2[6]);
  t_3[7] = fo_to<__nv_bfloat16>::of(t_2[7]);
  {
    const int fo_f = (fo_tid * 8);
    const long long fo_g = (i + (fo_f % 64));
    const bool fo_ok = fo_f < 64;
    const long long fo_c = i + (fo_f % 64);
    if (fo_ok && fo_c + 8 <= 32768 && fo_aligned(p1 + fo_g, fo_vec_bytes<__nv_bfloat16, 8>())) {
      fo_copy_vec<__nv_bfloat16, 8>(p1 + fo_g, &t_3[0]);
    }
    else {
      if (fo_ok && fo_c + 0 < 32768) p1[fo_g + 0] = t_3[0];
      if (fo_ok && fo_c + 1 < 32768) p1[fo_g + 1] = t_3[1];
      if (fo_ok && fo_c + 2 < 32768) p1[fo_g + 2] = t_3[2];
      if (fo_ok && fo_c + 3 < 32768) p1[fo_g + 3] = t_3[3];
      if (fo_ok && fo_c + 4 < 32768) p1[fo_g + 4] = t_3[4];
      if (fo_ok && fo_c + 5 < 32768) p1[fo_g + 5] = t_3[5];
      if (fo_ok && fo_c + 6 < 32768) p1[fo_g + 6] = t_3[6];
      if (fo_ok && fo_c + 7 < 32768) p1[fo_g + 7] = t_3[7];
    }
  }
}

#ifndef __CUDACC_RTC__
extern "C" cudaError_t launch_fused_0_sum(const __nv_bfloat16* p0, __nv_bfloat16* p1, cudaStream_t stream) {
  fused_0_sum<<<dim3(512, 1, 1), dim3(128), 1280, stream>>>(p0, p1);
  return cudaGetLastError();
}
#endif

