// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s
// A decode step over a key/value cache of any length (`?` keys, one query), lowered at
// the size hints and printed for CUDA: the split attention kernel takes the cache's
// length (its keys', values' and mask's dynamic dims) after its pointers; its key loop
// runs between bounds computed from it, and its launch grid is computed per call. The
// combine kernel reads only buffers of static size.

// CHECK:      // fuseopt CUDA kernel `attention` (schedule: attention)
// CHECK-NEXT: // launch: grid (computed per call)
// CHECK:      attention({{.*}}, float* __restrict__ p6, const long long p1_n2, const long long p2_n2, const long long p3_n3) {
// CHECK:      for (long long iv = i_{{[0-9]+}}; iv < i_{{[0-9]+}}; iv += 64LL) {
// CHECK:      fo_c + 4 <= p3_n3
// CHECK:      extern "C" cudaError_t launch_attention({{.*}}, long long p1_n2, long long p2_n2, long long p3_n3, dim3 grid, cudaStream_t stream) {
// CHECK:      // fuseopt CUDA kernel `attention_combine` (schedule: attention)
// CHECK-NEXT: // launch: grid (64)
// CHECK:      attention_combine(const float* __restrict__ p0, const float* __restrict__ p1, const float* __restrict__ p2, __nv_bfloat16* __restrict__ p3) {
func.func @decode(%q: tensor<8x32x1x128xbf16>, %k: tensor<8x8x?x128xbf16>, %v: tensor<8x8x?x128xbf16>, %m: tensor<8x1x1x?xi1>) -> tensor<8x32x1x128xbf16> {
  %o = nn.attention %q, %k, %v mask %m {scale = 0.08838834764831845 : f64} : tensor<8x32x1x128xbf16>, tensor<8x8x?x128xbf16>, tensor<8x8x?x128xbf16>, tensor<8x1x1x?xi1> -> tensor<8x32x1x128xbf16>
  func.return %o : tensor<8x32x1x128xbf16>
}
