// RUN: fuse-opt %s -p "tile-promote{shared-bytes=64}" -t cuda | filecheck %s
// A matmul whose right operand and output have a dynamic number of columns, with its
// operands kept in registers (no shared memory left for staging): the register dot
// addresses the operand with its run-time row pitch, in parentheses.

// CHECK: mm(const __nv_bfloat16* __restrict__ p0, const __nv_bfloat16* __restrict__ p1, __nv_bfloat16* __restrict__ p2, const long long p1_n1, const long long p2_n1) {
// CHECK: acc[0] += fo_a * (((iv + fo_q) < 128 && (i_{{[0-9]+}} + fo_n) < p1_n1) ? fo_f(p1[(iv + fo_q) * (p1_n1) + (i_{{[0-9]+}} + fo_n)])
tile.kernel @mm grid 1 (%0: memref<256x128xbf16>, %1: memref<128x?xbf16>, %2: memref<256x?xbf16>) attributes {schedule = "matmul", iteration_sizes = array<i64: 256, 256>, block_sizes = array<i64: 128, 128>, block_k = 64 : i64, group_m = 8 : i64} {
  %3 = arith.constant 16 : index
  %4 = arith.constant 8 : index
  %5 = arith.constant 2 : index
  %6 = arith.constant 128 : index
  %7 = arith.constant 0 : index
  %8 = arith.constant 64 : index
  %9 = tile.program_id 0
  %10 = arith.divsi %9, %3 : index
  %11 = arith.muli %10, %4 : index
  %12 = arith.subi %5, %11 : index
  %13 = arith.minsi %12, %4 : index
  %14 = arith.remsi %9, %3 : index
  %15 = arith.remsi %14, %13 : index
  %16 = arith.addi %11, %15 : index
  %17 = arith.divsi %14, %13 : index
  %18 = arith.muli %16, %6 : index
  %19 = arith.muli %17, %6 : index
  %20 = nn.constant 0.000000e+00 : tensor<128x128xf32>
  %21 = scf.for %22 = %7 to %6 step %8 iter_args(%23 = %20) -> (tensor<128x128xf32>) {
    %24 = tile.load %0[%18, %22] : memref<256x128xbf16> -> tensor<128x64xbf16>
    %25 = tile.load %1[%22, %19] : memref<128x?xbf16> -> tensor<64x128xbf16>
    %27 = tile.dot %24, %25, %23 : tensor<128x64xbf16>, tensor<64x128xbf16>, tensor<128x128xf32>
    scf.yield %27 : tensor<128x128xf32>
  }
  %28 = nn.cast %21 : tensor<128x128xf32> -> tensor<128x128xbf16>
  tile.store %28, %2[%18, %19] : tensor<128x128xbf16>, memref<256x?xbf16>
  tile.return
}
func.func @matmul(%0: memref<256x128xbf16>, %1: memref<128x?xbf16>, %2: memref<256x?xbf16> {tile.output, tile.dims_from = array<i64: 1, 1>}) {
  tile.launch @mm grid [4] (%0, %1, %2) : memref<256x128xbf16>, memref<128x?xbf16>, memref<256x?xbf16>
  func.return
}
