// RUN: fuse-opt %s -t cuda | filecheck %s

// Element types come from one table (dialects/dtypes.py): an i32 buffer is 4-byte
// `int` elements (it used to print as 8-byte `long long`), vectorized in 16-byte runs.
// CHECK:      k(const int* __restrict__ p0, int* __restrict__ p1) {
// CHECK:        alignas(16) int ld[4];
// CHECK:        fo_vec_bytes<int, 4>()
// CHECK:      extern "C" cudaError_t launch_k(const int* p0, int* p1, cudaStream_t stream) {
tile.kernel @k grid 1 (%x: memref<16xi32>, %y: memref<16xi32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<16xi32> -> tensor<16xi32>
  tile.store %t, %y[%c0] : tensor<16xi32>, memref<16xi32>
  tile.return
}
