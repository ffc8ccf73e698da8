// RUN: fuse-opt %s -t cuda | filecheck %s
// argmax over the rows of 8192 x 32, split into 32 chunks of 256 rows
// (nn-split-reductions): the row numbers the index kernel compares are a chunk's base
// (a 0-d tile.iota) plus the row within the chunk (a 1-d tile.iota), summed and
// broadcast along the columns. Each slot computes its own from its coordinate: no
// exchange through shared memory (it went through shared memory with two barriers per
// step of the row loop).

// CHECK-LABEL: // ===== file: fused_2_compare_add_select_reduce_min.cu =====
// CHECK:       for (long long iv
// CHECK-NOT:   = iota
// CHECK:       iota_{{[0-9]+}}[0] = ((0LL + 256LL * (long long)({{.*}})) + (0LL + 1LL * ((long long)(iv) + (((fo_tid * 8) + 0) / 16 % 128))));
// CHECK-NOT:   = iota
// CHECK:       // ===== file: fused_3_reduce_min.cu =====

builtin.module {
  tile.kernel @fused_0_reduce_max grid 1 (%0: memref<32x256x32xbf16>, %1: memref<32x32xbf16>) attributes {schedule = "row_reduction_looped", iteration_sizes = array<i64: 32, 256, 32>, block_sizes = array<i64: 1, 128, 16>, reduce_dim = 1 : i64, candidates = [{"block-cols" = 32 : i64, "block-rows" = 64 : i64}, {"block-cols" = 64 : i64, "block-rows" = 32 : i64}, {"block-cols" = 16 : i64, "block-rows" = 128 : i64}, {"block-cols" = 128 : i64, "block-rows" = 16 : i64}, {"block-cols" = 64 : i64, "block-rows" = 64 : i64}], num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 8 : i64, shared_bytes = 0 : i64} {
    %2 = arith.constant 2 : index
    %3 = arith.constant 16 : index
    %4 = arith.constant 0 : index
    %5 = arith.constant 256 : index
    %6 = arith.constant 128 : index
    %7 = tile.program_id 0
    %8 = arith.remsi %7, %2 : index
    %9 = arith.divsi %7, %2 : index
    %10 = arith.muli %8, %3 : index
    %11 = nn.constant 0xfff0000000000000 : tensor<128x16xf32>
    %12 = scf.for %13 = %4 to %5 step %6 iter_args(%14 = %11) -> (tensor<128x16xf32>) {
      %15 = tile.load %0[%9, %13, %10] : memref<32x256x32xbf16> -> tensor<128x16xbf16>
      %16 = nn.cast %15 : tensor<128x16xbf16> -> tensor<128x16xf32>
      %17 = nn.max %14, %16 : tensor<128x16xf32>
      scf.yield %17 : tensor<128x16xf32>
    }
    %18 = tile.reduce max %12 axis 0 : tensor<128x16xf32> -> tensor<16xf32>
    %19 = nn.cast %18 : tensor<16xf32> -> tensor<16xbf16>
    tile.store %19, %1[%9, %10] : tensor<16xbf16>, memref<32x32xbf16>
    tile.return
  }
  tile.kernel @fused_1_reduce_max grid 1 (%0: memref<32x32xbf16>, %1: memref<32xbf16>) attributes {schedule = "row_reduction", iteration_sizes = array<i64: 32, 32>, block_sizes = array<i64: 32, 32>, reduce_dim = 0 : i64, candidates = [{"block-rows" = 1 : i64}, {"block-rows" = 2 : i64}, {"block-rows" = 4 : i64}, {"block-rows" = 8 : i64}], num_warps = 2 : i64, num_stages = 1 : i64, vector_width = 8 : i64, shared_bytes = 0 : i64} {
    %2 = arith.constant 0 : index
    %3 = tile.program_id 0
    %4 = tile.load %0[%2, %2] : memref<32x32xbf16> -> tensor<32x32xbf16>
    %5 = nn.cast %4 : tensor<32x32xbf16> -> tensor<32x32xf32>
    %6 = tile.reduce max %5 axis 0 : tensor<32x32xf32> -> tensor<32xf32>
    %7 = nn.cast %6 : tensor<32xf32> -> tensor<32xbf16>
    tile.store %7, %1[%2] : tensor<32xbf16>, memref<32xbf16>
    tile.return
  }
  tile.kernel @fused_2_compare_add_select_reduce_min grid 1 (%0: memref<32xbf16>, %1: memref<32x256x32xbf16>, %2: memref<32x32xi64>) attributes {schedule = "row_reduction_looped", iteration_sizes = array<i64: 32, 256, 32>, block_sizes = array<i64: 1, 128, 16>, reduce_dim = 1 : i64, candidates = [{"block-cols" = 32 : i64, "block-rows" = 64 : i64}, {"block-cols" = 64 : i64, "block-rows" = 32 : i64}, {"block-cols" = 16 : i64, "block-rows" = 128 : i64}, {"block-cols" = 128 : i64, "block-rows" = 16 : i64}, {"block-cols" = 64 : i64, "block-rows" = 64 : i64}], num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 8 : i64, shared_bytes = 0 : i64} {
    %3 = arith.constant 2 : index
    %4 = arith.constant 16 : index
    %5 = arith.constant 0 : index
    %6 = arith.constant 256 : index
    %7 = arith.constant 128 : index
    %8 = tile.program_id 0
    %9 = arith.remsi %8, %3 : index
    %10 = arith.divsi %8, %3 : index
    %11 = arith.muli %9, %4 : index
    %12 = nn.constant 9223372036854775807 : tensor<128x16xi64>
    %13 = tile.load %0[%11] : memref<32xbf16> -> tensor<16xbf16>
    %14 = tile.iota %10 start 0 step 256 : tensor<i64>
    %15 = scf.for %16 = %5 to %6 step %7 iter_args(%17 = %12) -> (tensor<128x16xi64>) {
      %18 = tile.load %1[%10, %16, %11] : memref<32x256x32xbf16> -> tensor<128x16xbf16>
      %19 = nn.cast %18 : tensor<128x16xbf16> -> tensor<128x16xf32>
      %20 = tile.broadcast %13 dims [1] : tensor<16xbf16> -> tensor<128x16xbf16>
      %21 = nn.cast %20 : tensor<128x16xbf16> -> tensor<128x16xf32>
      %22 = nn.compare eq, %19, %21 : tensor<128x16xf32>
      %23 = tile.broadcast %14 dims [] : tensor<i64> -> tensor<128xi64>
      %24 = tile.iota %16 start 0 step 1 : tensor<128xi64>
      %25 = nn.add %23, %24 : tensor<128xi64>
      %26 = tile.broadcast %25 dims [0] : tensor<128xi64> -> tensor<128x16xi64>
      %27 = nn.constant 8192 : tensor<128x16xi64>
      %28 = nn.select %22, %26, %27 : tensor<128x16xi64>
      %29 = nn.min %17, %28 : tensor<128x16xi64>
      scf.yield %29 : tensor<128x16xi64>
    }
    %30 = tile.reduce min %15 axis 0 : tensor<128x16xi64> -> tensor<16xi64>
    tile.store %30, %2[%10, %11] : tensor<16xi64>, memref<32x32xi64>
    tile.return
  }
  tile.kernel @fused_3_reduce_min grid 1 (%0: memref<32x32xi64>, %1: memref<32xi64>) attributes {schedule = "row_reduction", iteration_sizes = array<i64: 32, 32>, block_sizes = array<i64: 32, 32>, reduce_dim = 0 : i64, candidates = [{"block-rows" = 1 : i64}, {"block-rows" = 2 : i64}, {"block-rows" = 4 : i64}, {"block-rows" = 8 : i64}], num_warps = 2 : i64, num_stages = 1 : i64, vector_width = 2 : i64, shared_bytes = 0 : i64} {
    %2 = arith.constant 0 : index
    %3 = tile.program_id 0
    %4 = tile.load %0[%2, %2] : memref<32x32xi64> -> tensor<32x32xi64>
    %5 = tile.reduce min %4 axis 0 : tensor<32x32xi64> -> tensor<32xi64>
    tile.store %5, %1[%2] : tensor<32xi64>, memref<32xi64>
    tile.return
  }
  func.func @argmax_rows(%0: memref<8192x32xbf16>, %1: memref<32xi64> {tile.output}) {
    %2 = tile.view %0 : memref<8192x32xbf16> -> memref<32x256x32xbf16>
    %3 = tile.alloc : memref<32x32xbf16>
    tile.launch @fused_0_reduce_max grid [64] (%2, %3) : memref<32x256x32xbf16>, memref<32x32xbf16>
    %4 = tile.alloc : memref<1x1x32xbf16>
    tile.launch @fused_1_reduce_max grid [1] (%3, %4) : memref<32x32xbf16>, memref<1x1x32xbf16>
    %5 = tile.alloc : memref<32x32xi64>
    tile.launch @fused_2_compare_add_select_reduce_min grid [64] (%4, %2, %5) : memref<1x1x32xbf16>, memref<32x256x32xbf16>, memref<32x32xi64>
    tile.launch @fused_3_reduce_min grid [1] (%5, %1) : memref<32x32xi64>, memref<32xi64>
    func.return
  }
}

