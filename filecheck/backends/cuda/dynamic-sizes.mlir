// Buffers of dynamic size (`?`) on the CUDA target: each kernel takes every dynamic dim
// of its parameters after its pointers as a `long long` (`<param>_n<dim>`), which its
// addresses, bounds checks and masks read; its host launcher takes the grid, which the
// host computes per call. A whole-tensor kernel picks its grid from the sizes: of
// dynamic size, it is refused (a frontend region is then compiled per size).
// RUN: not fuse-opt %s --split-input-file -t cuda 2>&1 | filecheck %s --check-prefixes=CHECK,WHOLE

// CHECK:      // fuseopt CUDA kernel `u_double` (schedule: pointwise)
// CHECK-NEXT: // launch: grid (computed per call), block (128)
// CHECK:      u_double(const float* __restrict__ p0, float* __restrict__ p1, const long long p0_n0, const long long p1_n0) {
// CHECK:      const bool fo_ok = fo_f < 256 && (i + (fo_f / 128 % 2)) < p0_n0;
// CHECK:      extern "C" cudaError_t launch_u_double(const float* p0, float* p1, long long p0_n0, long long p1_n0, dim3 grid, cudaStream_t stream) {
// CHECK-NEXT:   u_double<<<grid, dim3(128), 0, stream>>>(p0, p1, p0_n0, p1_n0);
// CHECK:      // fuseopt CUDA kernel `rows` (schedule: row_reduction)
// CHECK:      rows(const float* __restrict__ p0, float* __restrict__ p1, const long long p0_n0, const long long p1_n0) {
// CHECK:      mask[0] = 0LL + ((fo_tid * 4) + 0) % 128 < 100 && i + ((fo_tid * 4) + 0) / 128 % 2 < p0_n0;
// CHECK:      if (fo_ok && fo_c + 0 < p1_n0) p1[fo_g + 0] = t_1[0];

tile.kernel @double grid 1 (%x: memref<?x100xf32>, %y: memref<?x100xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %p = tile.program_id 0
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %r = arith.muli %p, %c2 : index
  %t = tile.load %x[%r, %c0] : memref<?x100xf32> -> tensor<2x128xf32>
  %u = nn.add %t, %t : tensor<2x128xf32>
  tile.store %u, %y[%r, %c0] : tensor<2x128xf32>, memref<?x100xf32>
  tile.return
}

tile.kernel @rows grid 1 (%x: memref<?x100xf32>, %y: memref<?xf32>) attributes {schedule = "row_reduction", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %p = tile.program_id 0
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %r = arith.muli %p, %c2 : index
  %n = tile.dim %x, 0 : memref<?x100xf32>
  %t = tile.load %x[%r, %c0] : memref<?x100xf32> -> tensor<2x128xf32>
  %m = tile.mask [%r, %c0] bounds [%n, 100] : tensor<2x128xi1>
  %z = nn.constant 0.0 : tensor<2x128xf32>
  %s = nn.select %m, %t, %z : tensor<2x128xf32>
  %sum = tile.reduce sum %s axis 1 : tensor<2x128xf32> -> tensor<2xf32>
  tile.store %sum, %y[%r] : tensor<2xf32>, memref<?xf32>
  tile.return
}

func.func @rows_host(%x: memref<?x100xf32>, %y: memref<?xf32> {tile.output, tile.dims_from = array<i64: 0, 0>}) {
  %n = tile.dim %x, 0 : memref<?x100xf32>
  %c2 = arith.constant 2 : index
  %g = arith.ceildivui %n, %c2 : index
  %t = tile.alloc(%n) : memref<?x100xf32>
  tile.launch @double grid [%g] (%x, %t) : memref<?x100xf32>, memref<?x100xf32>
  tile.launch @rows grid [%g] (%t, %y) : memref<?x100xf32>, memref<?xf32>
  func.return
}

// -----

// WHOLE: dynamic-sizes.mlir:[[# @LINE + 1]]:1: error: the cuda target prints whole_tensor kernels over buffers of static size only; this one has dynamic sizes (?)
tile.kernel @transpose grid 1 (%x: memref<?x3xf32>, %y: memref<3x?xf32>) attributes {schedule = "whole_tensor", num_warps = 1 : i64, num_stages = 1 : i64, vector_width = 1 : i64} {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0, %c0] : memref<?x3xf32> -> tensor<64x3xf32>
  %u = nn.transpose %t [1, 0] : tensor<64x3xf32> -> tensor<3x64xf32>
  tile.store %u, %y[%c0, %c0] : tensor<3x64xf32>, memref<3x?xf32>
  tile.return
}
