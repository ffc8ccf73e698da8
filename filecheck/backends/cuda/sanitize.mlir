// RUN: fuse-opt %s -t cuda | filecheck %s
// A kernel whose name is hostile text: the C identifier is sanitized.

tile.kernel @"k\"); system(\"rm -rf /\"); //" grid 1 (%x: memref<64xf32>, %y: memref<64xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %p = tile.program_id 0
  %c16 = arith.constant 16 : index
  %o = arith.muli %p, %c16 : index
  %t = tile.load %x[%o] : memref<64xf32> -> tensor<16xf32>
  %e = nn.exp %t : tensor<16xf32>
  tile.store %e, %y[%o] : tensor<16xf32>, memref<64xf32>
  tile.return
}

// CHECK: // ===== file: k_system_rm_rf.cu =====
// CHECK-NOT: system(
// CHECK: extern "C" __global__ void __launch_bounds__(128)
// CHECK-NEXT: k_system_rm_rf(const float* __restrict__ p0, float* __restrict__ p1) {
// CHECK: = expf(
