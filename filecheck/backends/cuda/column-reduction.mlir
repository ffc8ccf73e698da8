// RUN: fuse-opt %s -t cuda | filecheck %s
// Column reductions (the reduced axis is not the tile's last) in the CUDA printer's
// columns strategy: every thread holds the same columns in each of its chunks, folds
// them in registers, lanes holding the same columns combine by shuffles (4 chunks a
// row: lanes 4 apart), and the warps' partials meet in shared memory once; with 64
// chunks a row (whole warps) the two threads 64 apart meet in shared memory directly.
// (Before, the whole tile went through shared memory and 32 of the 128 threads each
// reduced one column serially.) Each thread then reads its own columns' totals back
// into registers (`cr`), the slots every later chunk of it holds, so the cast and the
// store read registers; with one warp the totals are in every lane after the shuffles
// and the kernel uses no shared memory and no barrier.

// CHECK-LABEL: // ===== file: fused_0_reduce_max.cu =====
// CHECK:       float col = t[0];
// CHECK-NEXT:  col = fo_max(col, t[8]);
// CHECK:       col = fo_strided_allreduce<4>(col, fo_max_op());
// CHECK:       if (fo_lane < 4) {
// CHECK-NEXT:    cols[fo_warp * 32 + (fo_tid % 4) * 8 + 0] = col;
// CHECK:       __syncthreads();
// CHECK-NEXT:  for (int fo_o = fo_tid; fo_o < 32; fo_o += 128) {
// CHECK-NEXT:    float fo_a = cols[fo_o];
// CHECK-NEXT:    fo_a = fo_max(fo_a, cols[32 + fo_o]);
// CHECK-NEXT:    fo_a = fo_max(fo_a, cols[64 + fo_o]);
// CHECK-NEXT:    fo_a = fo_max(fo_a, cols[96 + fo_o]);
// CHECK-NEXT:    red[fo_o] = fo_a;
// CHECK:       __syncthreads();
// CHECK-NEXT:  float cr[8];
// CHECK-NEXT:  cr[0] = red[(fo_tid % 4) * 8 + 0];
// CHECK:       cr_1[0] = fo_to<__nv_bfloat16>::of(cr[0]);
// CHECK-NOT:   red[

// CHECK-LABEL: // ===== file: fused_0_column_sum.cu =====
// CHECK:       float col = ld[0];
// CHECK-NEXT:  col = (col + ld[4]);
// CHECK-NEXT:  col = (col + ld[8]);
// CHECK-NEXT:  col = (col + ld[12]);
// CHECK-NOT:   fo_strided_allreduce
// CHECK:       cols[(fo_tid / 64) * 256 + (fo_tid % 64) * 4 + 0] = col;
// CHECK:       __syncthreads();
// CHECK-NEXT:  for (int fo_o = fo_tid; fo_o < 256; fo_o += 128) {
// CHECK-NEXT:    float fo_a = cols[fo_o];
// CHECK-NEXT:    fo_a = (fo_a + cols[256 + fo_o]);
// CHECK-NEXT:    red[fo_o] = fo_a;

// CHECK-LABEL: // ===== file: one_warp_max.cu =====
// CHECK:       dynamic shared memory 0 bytes
// CHECK-NOT:   __syncthreads
// CHECK:       col = fo_strided_allreduce<4>(col, fo_max_op());
// CHECK-NOT:   __syncthreads
// CHECK:       float cr[8];
// CHECK-NEXT:  cr[0] = col;
// CHECK-NOT:   __syncthreads
// CHECK:       extern "C" cudaError_t launch_one_warp_max(

builtin.module {
  tile.kernel @fused_0_reduce_max grid 1 (%0: memref<64x256xbf16>, %1: memref<256xbf16>) attributes {schedule = "row_reduction", iteration_sizes = array<i64: 64, 256>, block_sizes = array<i64: 64, 32>, reduce_dim = 0 : i64, candidates = [{"block-rows" = 1 : i64}, {"block-rows" = 2 : i64}, {"block-rows" = 4 : i64}, {"block-rows" = 8 : i64}], num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 8 : i64, shared_bytes = 0 : i64} {
    %2 = arith.constant 32 : index
    %3 = arith.constant 0 : index
    %4 = tile.program_id 0
    %5 = arith.muli %4, %2 : index
    %6 = tile.load %0[%3, %5] : memref<64x256xbf16> -> tensor<64x32xbf16>
    %7 = nn.cast %6 : tensor<64x32xbf16> -> tensor<64x32xf32>
    %8 = tile.reduce max %7 axis 0 : tensor<64x32xf32> -> tensor<32xf32>
    %9 = nn.cast %8 : tensor<32xf32> -> tensor<32xbf16>
    tile.store %9, %1[%5] : tensor<32xbf16>, memref<256xbf16>
    tile.return
  }
  func.func @main(%0: memref<64x256xbf16>, %1: memref<256xbf16> {tile.output}) {
    tile.launch @fused_0_reduce_max grid [8] (%0, %1) : memref<64x256xbf16>, memref<256xbf16>
    func.return
  }
  tile.kernel @fused_0_column_sum grid 1 (%0: memref<8x4096xf32>, %1: memref<4096xf32>) attributes {schedule = "row_reduction", iteration_sizes = array<i64: 8, 4096>, block_sizes = array<i64: 8, 256>, reduce_dim = 0 : i64, candidates = [{"block-rows" = 1 : i64}, {"block-rows" = 2 : i64}, {"block-rows" = 4 : i64}, {"block-rows" = 8 : i64}], num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64, shared_bytes = 0 : i64} {
    %2 = arith.constant 256 : index
    %3 = arith.constant 0 : index
    %4 = tile.program_id 0
    %5 = arith.muli %4, %2 : index
    %6 = tile.load %0[%3, %5] : memref<8x4096xf32> -> tensor<8x256xf32>
    %7 = tile.reduce sum %6 axis 0 : tensor<8x256xf32> -> tensor<256xf32>
    tile.store %7, %1[%5] : tensor<256xf32>, memref<4096xf32>
    tile.return
  }
  tile.kernel @one_warp_max grid 1 (%0: memref<64x256xbf16>, %1: memref<256xbf16>) attributes {schedule = "row_reduction", iteration_sizes = array<i64: 64, 256>, block_sizes = array<i64: 64, 32>, reduce_dim = 0 : i64, num_warps = 1 : i64, num_stages = 1 : i64, vector_width = 8 : i64, shared_bytes = 0 : i64} {
    %2 = arith.constant 32 : index
    %3 = arith.constant 0 : index
    %4 = tile.program_id 0
    %5 = arith.muli %4, %2 : index
    %6 = tile.load %0[%3, %5] : memref<64x256xbf16> -> tensor<64x32xbf16>
    %7 = nn.cast %6 : tensor<64x32xbf16> -> tensor<64x32xf32>
    %8 = tile.reduce max %7 axis 0 : tensor<64x32xf32> -> tensor<32xf32>
    %9 = nn.cast %8 : tensor<32xf32> -> tensor<32xbf16>
    tile.store %9, %1[%5] : tensor<32xbf16>, memref<256xbf16>
    tile.return
  }
  func.func @main3(%0: memref<64x256xbf16>, %1: memref<256xbf16> {tile.output}) {
    tile.launch @one_warp_max grid [8] (%0, %1) : memref<64x256xbf16>, memref<256xbf16>
    func.return
  }
  func.func @main2(%0: memref<8x4096xf32>, %1: memref<4096xf32> {tile.output}) {
    tile.launch @fused_0_column_sum grid [16] (%0, %1) : memref<8x4096xf32>, memref<4096xf32>
    func.return
  }
}
