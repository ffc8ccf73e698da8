// A stage that needs a kernel attribute an earlier stage sets fails with a located
// error naming that stage; it never substitutes a default.
// RUN: not fuse-opt %s -t triton 2>&1 | filecheck %s --check-prefix=TRITON
// RUN: not fuse-opt %s -t cuda 2>&1 | filecheck %s --check-prefix=CUDA
// RUN: not fuse-opt %s -p tile-promote 2>&1 | filecheck %s --check-prefix=PROMOTE
// RUN: sed -e 's/schedule = "pointwise", //' %s | not fuse-opt -t triton 2>&1 | filecheck %s --check-prefix=NOSCHED
// RUN: sed -e 's/, num_warps = 4 : i64//' %s | not fuse-opt -t cuda 2>&1 | filecheck %s --check-prefix=NOWARPS

// TRITON: kernel-attributes.mlir:[[# @LINE + 5]]:1: error: tile.kernel @no_stages has no `num_stages` attribute (tile-promote sets it)
// CUDA: kernel-attributes.mlir:[[# @LINE + 4]]:1: error: tile.kernel @no_stages has no `vector_width` attribute (tile-promote sets it)
// PROMOTE: kernel-attributes.mlir:[[# @LINE + 13]]:1: error: tile.kernel @no_schedule has no `schedule` attribute (convert-nn-to-tile sets it)
// NOSCHED: stdin:[[# @LINE + 2]]:1: error: tile.kernel @no_stages has no `schedule` attribute (convert-nn-to-tile sets it)
// NOWARPS: stdin:[[# @LINE + 1]]:1: error: tile.kernel @no_stages has no `num_warps` attribute (tile-promote sets it)
tile.kernel @no_stages grid 1 (%x: memref<64xf32>, %y: memref<64xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64} {
  %p = tile.program_id 0
  %c16 = arith.constant 16 : index
  %o = arith.muli %p, %c16 : index
  %t = tile.load %x[%o] : memref<64xf32> -> tensor<16xf32>
  %e = nn.exp %t : tensor<16xf32>
  tile.store %e, %y[%o] : tensor<16xf32>, memref<64xf32>
  tile.return
}

tile.kernel @no_schedule grid 1 (%x: memref<64xf32>, %y: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%c0] : memref<64xf32> -> tensor<64xf32>
  tile.store %t, %y[%c0] : tensor<64xf32>, memref<64xf32>
  tile.return
}
