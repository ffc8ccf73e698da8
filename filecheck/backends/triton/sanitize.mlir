// RUN: fuse-opt %s -t triton | filecheck %s
// Input text never becomes Python (a schedule is one of the tiler's names: the
// verifier rejects any other text, dialects/tile/invalid.mlir); kernels named like the module's helpers
// (`fuseopt_tanh`), a launcher's parameters (`buf0`, `grid`) or `INTERPRETED` are
// renamed, so no definition shadows another.

// CHECK:       def fuseopt_tanh(x):
// CHECK:       def u_fuseopt_tanh(x_ptr, y_ptr):
// CHECK-NEXT:      """Schedule pointwise."""
// CHECK:           e = fuseopt_tanh(t)
// CHECK:       def launch_u_fuseopt_tanh(buf0, buf1, grid=(4,)):
// CHECK-NEXT:      """Launch u_fuseopt_tanh over `grid` programs."""
// CHECK-NEXT:      u_fuseopt_tanh[grid](buf0, buf1,
tile.kernel @fuseopt_tanh grid 1 (%x: memref<64xf32>, %y: memref<64xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %p = tile.program_id 0
  %c16 = arith.constant 16 : index
  %o = arith.muli %p, %c16 : index
  %t = tile.load %x[%o] : memref<64xf32> -> tensor<16xf32>
  %e = nn.tanh %t : tensor<16xf32>
  tile.store %e, %y[%o] : tensor<16xf32>, memref<64xf32>
  tile.return
}

// CHECK:       def buf0(x_ptr, y_ptr):
// CHECK:       def launch_buf0(buf0_1, buf1, grid=(4,)):
// CHECK-NEXT:      """Launch buf0 over `grid` programs."""
// CHECK-NEXT:      buf0[grid](buf0_1, buf1,
tile.kernel @buf0 grid 1 (%x: memref<64xf32>, %y: memref<64xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %p = tile.program_id 0
  %c16 = arith.constant 16 : index
  %o = arith.muli %p, %c16 : index
  %t = tile.load %x[%o] : memref<64xf32> -> tensor<16xf32>
  %e = nn.neg %t : tensor<16xf32>
  tile.store %e, %y[%o] : tensor<16xf32>, memref<64xf32>
  tile.return
}

// CHECK:       def grid_(x_ptr, y_ptr):
// CHECK:       def INTERPRETED_(x_ptr, y_ptr):
// CHECK:       def main(x, *, device):
// CHECK:           launch_u_fuseopt_tanh(x, y0)
// CHECK-NEXT:      launch_buf0(x, y1)
// CHECK-NEXT:      launch_grid(x, y2)
// CHECK-NEXT:      launch_INTERPRETED(x, y3)
tile.kernel @grid grid 1 (%x: memref<64xf32>, %y: memref<64xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %p = tile.program_id 0
  %c16 = arith.constant 16 : index
  %o = arith.muli %p, %c16 : index
  %t = tile.load %x[%o] : memref<64xf32> -> tensor<16xf32>
  %e = nn.abs %t : tensor<16xf32>
  tile.store %e, %y[%o] : tensor<16xf32>, memref<64xf32>
  tile.return
}

tile.kernel @INTERPRETED grid 1 (%x: memref<64xf32>, %y: memref<64xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %p = tile.program_id 0
  %c16 = arith.constant 16 : index
  %o = arith.muli %p, %c16 : index
  %t = tile.load %x[%o] : memref<64xf32> -> tensor<16xf32>
  %e = nn.exp %t : tensor<16xf32>
  tile.store %e, %y[%o] : tensor<16xf32>, memref<64xf32>
  tile.return
}

func.func @main(%x: memref<64xf32>, %y0: memref<64xf32> {tile.output}, %y1: memref<64xf32> {tile.output}, %y2: memref<64xf32> {tile.output}, %y3: memref<64xf32> {tile.output}) {
  tile.launch @fuseopt_tanh grid [4] (%x, %y0) : memref<64xf32>, memref<64xf32>
  tile.launch @buf0 grid [4] (%x, %y1) : memref<64xf32>, memref<64xf32>
  tile.launch @grid grid [4] (%x, %y2) : memref<64xf32>, memref<64xf32>
  tile.launch @INTERPRETED grid [4] (%x, %y3) : memref<64xf32>, memref<64xf32>
  func.return
}
