// RUN: fuse-opt %s -t cuda | filecheck %s
// Input text never becomes C++ (a schedule is one of the tiler's names: the verifier
// rejects any other text, dialects/tile/invalid.mlir), and kernels named like a C
// library function (`expf`) or like another kernel's launcher are renamed.

// CHECK: // ===== file: u_expf.cu =====
// CHECK-NEXT: // fuseopt CUDA kernel `u_expf` (schedule: pointwise)
// CHECK-NOT: #include <stdlib.h>
// CHECK-NOT: system(
// CHECK: extern "C" __global__ void __launch_bounds__(128)
// CHECK-NEXT: u_expf(
// CHECK: extern "C" cudaError_t launch_u_expf(
tile.kernel @expf grid 1 (%x: memref<64xf32>, %y: memref<64xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %p = tile.program_id 0
  %c16 = arith.constant 16 : index
  %o = arith.muli %p, %c16 : index
  %t = tile.load %x[%o] : memref<64xf32> -> tensor<16xf32>
  %e = nn.exp %t : tensor<16xf32>
  tile.store %e, %y[%o] : tensor<16xf32>, memref<64xf32>
  tile.return
}

// CHECK: // ===== file: k.cu =====
// CHECK: extern "C" cudaError_t launch_k(
tile.kernel @k grid 1 (%x: memref<64xf32>, %y: memref<64xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %p = tile.program_id 0
  %c16 = arith.constant 16 : index
  %o = arith.muli %p, %c16 : index
  %t = tile.load %x[%o] : memref<64xf32> -> tensor<16xf32>
  %e = nn.neg %t : tensor<16xf32>
  tile.store %e, %y[%o] : tensor<16xf32>, memref<64xf32>
  tile.return
}

// The kernel named `launch_k` cannot be k's launcher.
// CHECK: // ===== file: launch_k_1.cu =====
// CHECK: extern "C" cudaError_t launch_launch_k_1(
tile.kernel @launch_k grid 1 (%x: memref<64xf32>, %y: memref<64xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %p = tile.program_id 0
  %c16 = arith.constant 16 : index
  %o = arith.muli %p, %c16 : index
  %t = tile.load %x[%o] : memref<64xf32> -> tensor<16xf32>
  %e = nn.abs %t : tensor<16xf32>
  tile.store %e, %y[%o] : tensor<16xf32>, memref<64xf32>
  tile.return
}
