// RUN: fuse-opt %s --split-input-file -p tile-promote | filecheck %s
// RUN: fuse-opt %s --split-input-file -p 'tile-promote{warp-per-row=true}' | filecheck %s --check-prefix=WARP

// `warp-per-row` (the Triton target): whole-row reductions get fewer warps. A column
// reduction (axis 0 of a 16x128 tile: Triton's warps split the outer dim, so every
// warp would hold part of each column) gets one warp per 2048 elements of its tile.
// CHECK-LABEL: tile.kernel @column_sum
// CHECK-SAME:  num_warps = 4 : i64
// WARP-LABEL:  tile.kernel @column_sum
// WARP-SAME:   num_warps = 1 : i64
tile.kernel @column_sum grid 1 (%0: memref<64x16x256xbf16>, %1: memref<64x256xbf16>) attributes {schedule = "row_reduction", iteration_sizes = array<i64: 64, 16, 256>, block_sizes = array<i64: 1, 16, 128>, reduce_dim = 1 : i64} {
  %2 = arith.constant 2 : index
  %3 = arith.constant 128 : index
  %4 = arith.constant 0 : index
  %5 = tile.program_id 0
  %6 = arith.remsi %5, %2 : index
  %7 = arith.divsi %5, %2 : index
  %8 = arith.muli %6, %3 : index
  %9 = tile.load %0[%7, %4, %8] : memref<64x16x256xbf16> -> tensor<16x128xbf16>
  %10 = nn.cast %9 : tensor<16x128xbf16> -> tensor<16x128xf32>
  %11 = tile.reduce sum %10 axis 0 : tensor<16x128xf32> -> tensor<128xf32>
  %12 = nn.cast %11 : tensor<128xf32> -> tensor<128xbf16>
  tile.store %12, %1[%7, %8] : tensor<128xbf16>, memref<64x256xbf16>
  tile.return
}
func.func @column(%0: memref<64x16x256xbf16>, %1: memref<64x256xbf16> {tile.output}) {
  tile.launch @column_sum grid [128] (%0, %1) : memref<64x16x256xbf16>, memref<64x256xbf16>
  func.return
}

// -----

// Rows of 1000 (a 1024-wide run), two per program: no more warps than rows (2), not
// the four warps of 16 elements per thread.
// CHECK-LABEL: tile.kernel @row_max_sum
// CHECK-SAME:  num_warps = 4 : i64
// WARP-LABEL:  tile.kernel @row_max_sum
// WARP-SAME:   num_warps = 2 : i64
tile.kernel @row_max_sum grid 1 (%0: memref<6x1000xbf16>, %1: memref<6xbf16>) attributes {schedule = "row_reduction", iteration_sizes = array<i64: 6, 1000>, block_sizes = array<i64: 2, 1024>, reduce_dim = 1 : i64} {
  %2 = arith.constant 2 : index
  %3 = arith.constant 0 : index
  %4 = tile.program_id 0
  %5 = arith.muli %4, %2 : index
  %6 = tile.load %0[%5, %3] : memref<6x1000xbf16> -> tensor<2x1024xbf16>
  %7 = nn.cast %6 : tensor<2x1024xbf16> -> tensor<2x1024xf32>
  %8 = tile.mask [%5, %3] bounds [6, 1000] : tensor<2x1024xi1>
  %9 = nn.constant 0xfff0000000000000 : tensor<2x1024xf32>
  %10 = nn.select %8, %7, %9 : tensor<2x1024xf32>
  %11 = tile.reduce max %10 axis 1 : tensor<2x1024xf32> -> tensor<2xf32>
  %12 = nn.constant 0.000000e+00 : tensor<2x1024xf32>
  %13 = nn.select %8, %7, %12 : tensor<2x1024xf32>
  %14 = tile.reduce sum %13 axis 1 : tensor<2x1024xf32> -> tensor<2xf32>
  %15 = nn.add %11, %14 : tensor<2xf32>
  %16 = nn.cast %15 : tensor<2xf32> -> tensor<2xbf16>
  tile.store %16, %1[%5] : tensor<2xbf16>, memref<6xbf16>
  tile.return
}
func.func @rows(%0: memref<6x1000xbf16>, %1: memref<6xbf16> {tile.output}) {
  tile.launch @row_max_sum grid [3] (%0, %1) : memref<6x1000xbf16>, memref<6xbf16>
  func.return
}

// -----

// Rows of 2048 are longer than a warp holds (WARP_ROW = 1024): the rule of 16 elements
// per thread stands (4 warps for a 2048-element tile) with or without the option.
// CHECK-LABEL: tile.kernel @long_row_sum
// CHECK-SAME:  num_warps = 4 : i64
// WARP-LABEL:  tile.kernel @long_row_sum
// WARP-SAME:   num_warps = 4 : i64
tile.kernel @long_row_sum grid 1 (%0: memref<4x2048xf32>, %1: memref<4xf32>) attributes {schedule = "row_reduction", iteration_sizes = array<i64: 4, 2048>, block_sizes = array<i64: 1, 2048>, reduce_dim = 1 : i64} {
  %2 = tile.program_id 0
  %3 = arith.constant 0 : index
  %4 = tile.load %0[%2, %3] : memref<4x2048xf32> -> tensor<1x2048xf32>
  %5 = tile.reduce sum %4 axis 1 : tensor<1x2048xf32> -> tensor<1xf32>
  tile.store %5, %1[%2] : tensor<1xf32>, memref<4xf32>
  tile.return
}
func.func @long_rows(%0: memref<4x2048xf32>, %1: memref<4xf32> {tile.output}) {
  tile.launch @long_row_sum grid [4] (%0, %1) : memref<4x2048xf32>, memref<4xf32>
  func.return
}

// -----

// A tile of 3 rows (hand-written; the tiler's tiles are powers of two): the cap of 3
// rows rounds down to 2 warps (a power of two, as num_warps must be).
// CHECK-LABEL: tile.kernel @three_rows
// CHECK-SAME:  num_warps = 8 : i64
// WARP-LABEL:  tile.kernel @three_rows
// WARP-SAME:   num_warps = 2 : i64
tile.kernel @three_rows grid 1 (%0: memref<3x1000xf32>, %1: memref<3xf32>) attributes {schedule = "row_reduction", iteration_sizes = array<i64: 3, 1000>, block_sizes = array<i64: 3, 1000>, reduce_dim = 1 : i64} {
  %2 = arith.constant 0 : index
  %3 = tile.load %0[%2, %2] : memref<3x1000xf32> -> tensor<3x1000xf32>
  %4 = tile.reduce sum %3 axis 1 : tensor<3x1000xf32> -> tensor<3xf32>
  tile.store %4, %1[%2] : tensor<3xf32>, memref<3xf32>
  tile.return
}
func.func @three(%0: memref<3x1000xf32>, %1: memref<3xf32> {tile.output}) {
  tile.launch @three_rows grid [1] (%0, %1) : memref<3x1000xf32>, memref<3xf32>
  func.return
}

// -----

// A looped column reduction that keeps statistics per lane (a variance's pilot, mean and
// M2: three 128x16 tiles carried by its loop) is bound by its arithmetic and gets one
// warp per 2048 tile elements, as whole columns do; a looped column sum (one tile
// carried) keeps the default.
// CHECK-LABEL: tile.kernel @fused_0_cast_mean_sub_mul
// CHECK-SAME:  num_warps = 4 : i64
// CHECK-LABEL: tile.kernel @fused_1_cast_sum
// CHECK-SAME:  num_warps = 4 : i64
// WARP-LABEL:  tile.kernel @fused_0_cast_mean_sub_mul
// WARP-SAME:   num_warps = 1 : i64
// WARP-LABEL:  tile.kernel @fused_1_cast_sum
// WARP-SAME:   num_warps = 4 : i64
tile.kernel @fused_0_cast_mean_sub_mul grid 1 (%0: memref<2x4096x64xbf16>, %1: memref<2x64xf32>) attributes {schedule = "row_reduction_looped", iteration_sizes = array<i64: 2, 4096, 64>, block_sizes = array<i64: 1, 128, 16>, reduce_dim = 1 : i64, candidates = [{"block-cols" = 32 : i64, "block-rows" = 64 : i64}, {"block-cols" = 64 : i64, "block-rows" = 32 : i64}, {"block-cols" = 16 : i64, "block-rows" = 128 : i64}, {"block-cols" = 128 : i64, "block-rows" = 16 : i64}, {"block-cols" = 64 : i64, "block-rows" = 64 : i64}]} {
  %2 = arith.constant 4 : index
  %3 = arith.constant 16 : index
  %4 = arith.constant 0 : index
  %5 = arith.constant 4096 : index
  %6 = arith.constant 128 : index
  %7 = tile.program_id 0
  %8 = arith.remsi %7, %2 : index
  %9 = arith.divsi %7, %2 : index
  %10 = arith.muli %8, %3 : index
  %11 = nn.constant 0.000000e+00 : tensor<128x16xf32>
  %12 = nn.constant 0.000000e+00 : tensor<16xf32>
  %13, %14, %15, %16 = scf.for %17 = %4 to %5 step %6 iter_args(%18 = %12, %19 = %11, %20 = %11, %21 = %11) -> (tensor<16xf32>, tensor<128x16xf32>, tensor<128x16xf32>, tensor<128x16xf32>) {
    %22 = tile.broadcast %18 dims [1] : tensor<16xf32> -> tensor<128x16xf32>
    %23 = nn.constant 0.000000e+00 : tensor<128x16xf32>
    %24 = nn.compare eq, %22, %23 : tensor<128x16xf32>
    %25 = nn.constant 1.000000e+00 : tensor<16xf32>
    %26 = nn.add %18, %25 : tensor<16xf32>
    %27 = nn.constant 1.000000e+00 : tensor<16xf32>
    %28 = nn.div %27, %26 : tensor<16xf32>
    %29 = tile.broadcast %28 dims [1] : tensor<16xf32> -> tensor<128x16xf32>
    %30 = tile.load %0[%9, %17, %10] : memref<2x4096x64xbf16> -> tensor<128x16xbf16>
    %31 = nn.cast %30 : tensor<128x16xbf16> -> tensor<128x16xf32>
    %32 = nn.select %24, %31, %19 : tensor<128x16xf32>
    %33 = nn.sub %31, %32 : tensor<128x16xf32>
    %34 = nn.sub %33, %20 : tensor<128x16xf32>
    %35 = nn.mul %34, %29 : tensor<128x16xf32>
    %36 = nn.add %20, %35 : tensor<128x16xf32>
    %37 = nn.sub %33, %36 : tensor<128x16xf32>
    %38 = nn.mul %34, %37 : tensor<128x16xf32>
    %39 = nn.add %21, %38 : tensor<128x16xf32>
    scf.yield %26, %32, %36, %39 : tensor<16xf32>, tensor<128x16xf32>, tensor<128x16xf32>, tensor<128x16xf32>
  }
  %40 = tile.broadcast %13 dims [1] : tensor<16xf32> -> tensor<128x16xf32>
  %41 = tile.reduce sum %40 axis 0 : tensor<128x16xf32> -> tensor<16xf32>
  %42 = nn.add %14, %15 : tensor<128x16xf32>
  %43 = nn.mul %40, %42 : tensor<128x16xf32>
  %44 = tile.reduce sum %43 axis 0 : tensor<128x16xf32> -> tensor<16xf32>
  %45 = nn.div %44, %41 : tensor<16xf32>
  %46 = tile.broadcast %45 dims [1] : tensor<16xf32> -> tensor<128x16xf32>
  %47 = nn.sub %14, %46 : tensor<128x16xf32>
  %48 = nn.add %47, %15 : tensor<128x16xf32>
  %49 = nn.mul %48, %48 : tensor<128x16xf32>
  %50 = nn.mul %40, %49 : tensor<128x16xf32>
  %51 = tile.reduce sum %50 axis 0 : tensor<128x16xf32> -> tensor<16xf32>
  %52 = tile.reduce sum %16 axis 0 : tensor<128x16xf32> -> tensor<16xf32>
  %53 = nn.add %52, %51 : tensor<16xf32>
  %54 = nn.constant 4.096000e+03 : tensor<16xf32>
  %55 = nn.div %53, %54 : tensor<16xf32>
  tile.store %55, %1[%9, %10] : tensor<16xf32>, memref<2x64xf32>
  tile.return
}
func.func @column_variance(%0: memref<2x4096x64xbf16>, %1: memref<2x64xf32> {tile.output}) {
  tile.launch @fused_0_cast_mean_sub_mul grid [8] (%0, %1) : memref<2x4096x64xbf16>, memref<2x64xf32>
  func.return
}
tile.kernel @fused_1_cast_sum grid 1 (%0: memref<2x4096x64xbf16>, %1: memref<2x64xf32>) attributes {schedule = "row_reduction_looped", iteration_sizes = array<i64: 2, 4096, 64>, block_sizes = array<i64: 1, 128, 16>, reduce_dim = 1 : i64, candidates = [{"block-cols" = 32 : i64, "block-rows" = 64 : i64}, {"block-cols" = 64 : i64, "block-rows" = 32 : i64}, {"block-cols" = 16 : i64, "block-rows" = 128 : i64}, {"block-cols" = 128 : i64, "block-rows" = 16 : i64}, {"block-cols" = 64 : i64, "block-rows" = 64 : i64}]} {
  %2 = arith.constant 4 : index
  %3 = arith.constant 16 : index
  %4 = arith.constant 0 : index
  %5 = arith.constant 4096 : index
  %6 = arith.constant 128 : index
  %7 = tile.program_id 0
  %8 = arith.remsi %7, %2 : index
  %9 = arith.divsi %7, %2 : index
  %10 = arith.muli %8, %3 : index
  %11 = nn.constant 0.000000e+00 : tensor<128x16xf32>
  %12 = scf.for %13 = %4 to %5 step %6 iter_args(%14 = %11) -> (tensor<128x16xf32>) {
    %15 = tile.load %0[%9, %13, %10] : memref<2x4096x64xbf16> -> tensor<128x16xbf16>
    %16 = nn.cast %15 : tensor<128x16xbf16> -> tensor<128x16xf32>
    %17 = nn.add %14, %16 : tensor<128x16xf32>
    scf.yield %17 : tensor<128x16xf32>
  }
  %18 = tile.reduce sum %12 axis 0 : tensor<128x16xf32> -> tensor<16xf32>
  tile.store %18, %1[%9, %10] : tensor<16xf32>, memref<2x64xf32>
  tile.return
}
func.func @column_sum_looped(%0: memref<2x4096x64xbf16>, %1: memref<2x64xf32> {tile.output}) {
  tile.launch @fused_1_cast_sum grid [8] (%0, %1) : memref<2x4096x64xbf16>, memref<2x64xf32>
  func.return
}

// -----

// Three sibling column sums in one looped kernel carry three chunk tiles too, but no
// pilot: they stay bound by their loads and keep the default.
// WARP-LABEL:  tile.kernel @fused_0_cast_mul_sum
// WARP-SAME:   num_warps = 4 : i64
tile.kernel @fused_0_cast_mul_sum grid 1 (%0: memref<2x4096x64xbf16>, %1: memref<2x4096x64xbf16>, %2: memref<2x64xf32>, %3: memref<2x64xf32>, %4: memref<2x64xf32>) attributes {schedule = "row_reduction_looped", iteration_sizes = array<i64: 2, 4096, 64>, block_sizes = array<i64: 1, 128, 16>, reduce_dim = 1 : i64, candidates = [{"block-cols" = 32 : i64, "block-rows" = 64 : i64}, {"block-cols" = 64 : i64, "block-rows" = 32 : i64}, {"block-cols" = 16 : i64, "block-rows" = 128 : i64}, {"block-cols" = 128 : i64, "block-rows" = 16 : i64}, {"block-cols" = 64 : i64, "block-rows" = 64 : i64}]} {
  %5 = arith.constant 4 : index
  %6 = arith.constant 16 : index
  %7 = arith.constant 0 : index
  %8 = arith.constant 4096 : index
  %9 = arith.constant 128 : index
  %10 = tile.program_id 0
  %11 = arith.remsi %10, %5 : index
  %12 = arith.divsi %10, %5 : index
  %13 = arith.muli %11, %6 : index
  %14 = nn.constant 0.000000e+00 : tensor<128x16xf32>
  %15 = nn.constant 0.000000e+00 : tensor<128x16xf32>
  %16 = nn.constant 0.000000e+00 : tensor<128x16xf32>
  %17, %18, %19 = scf.for %20 = %7 to %8 step %9 iter_args(%21 = %14, %22 = %15, %23 = %16) -> (tensor<128x16xf32>, tensor<128x16xf32>, tensor<128x16xf32>) {
    %24 = tile.load %0[%12, %20, %13] : memref<2x4096x64xbf16> -> tensor<128x16xbf16>
    %25 = nn.cast %24 : tensor<128x16xbf16> -> tensor<128x16xf32>
    %26 = nn.add %21, %25 : tensor<128x16xf32>
    %27 = tile.load %1[%12, %20, %13] : memref<2x4096x64xbf16> -> tensor<128x16xbf16>
    %28 = nn.cast %27 : tensor<128x16xbf16> -> tensor<128x16xf32>
    %29 = nn.mul %25, %28 : tensor<128x16xf32>
    %30 = nn.add %22, %29 : tensor<128x16xf32>
    %31 = nn.add %23, %28 : tensor<128x16xf32>
    scf.yield %26, %30, %31 : tensor<128x16xf32>, tensor<128x16xf32>, tensor<128x16xf32>
  }
  %32 = tile.reduce sum %17 axis 0 : tensor<128x16xf32> -> tensor<16xf32>
  %33 = tile.reduce sum %18 axis 0 : tensor<128x16xf32> -> tensor<16xf32>
  %34 = tile.reduce sum %19 axis 0 : tensor<128x16xf32> -> tensor<16xf32>
  tile.store %32, %2[%12, %13] : tensor<16xf32>, memref<2x64xf32>
  tile.store %33, %3[%12, %13] : tensor<16xf32>, memref<2x64xf32>
  tile.store %34, %4[%12, %13] : tensor<16xf32>, memref<2x64xf32>
  tile.return
}
func.func @siblings(%0: memref<2x4096x64xbf16>, %1: memref<2x4096x64xbf16>, %2: memref<2x64xf32> {tile.output}, %3: memref<2x64xf32> {tile.output}, %4: memref<2x64xf32> {tile.output}) {
  tile.launch @fused_0_cast_mul_sum grid [8] (%0, %1, %2, %3, %4) : memref<2x4096x64xbf16>, memref<2x4096x64xbf16>, memref<2x64xf32>, memref<2x64xf32>, memref<2x64xf32>
  func.return
}

// -----

// The same variance of an f32 input keeps the default: the rule applies where every
// load is 16-bit (the case measured; an f32 loop loads twice the bytes per op).
// WARP-LABEL:  tile.kernel @fused_0_mean_sub_mul
// WARP-SAME:   num_warps = 4 : i64
tile.kernel @fused_0_mean_sub_mul grid 1 (%0: memref<2x4096x64xf32>, %1: memref<2x64xf32>) attributes {schedule = "row_reduction_looped", iteration_sizes = array<i64: 2, 4096, 64>, block_sizes = array<i64: 1, 128, 16>, reduce_dim = 1 : i64, candidates = [{"block-cols" = 32 : i64, "block-rows" = 64 : i64}, {"block-cols" = 64 : i64, "block-rows" = 32 : i64}, {"block-cols" = 16 : i64, "block-rows" = 128 : i64}, {"block-cols" = 128 : i64, "block-rows" = 16 : i64}, {"block-cols" = 64 : i64, "block-rows" = 64 : i64}]} {
  %2 = arith.constant 4 : index
  %3 = arith.constant 16 : index
  %4 = arith.constant 0 : index
  %5 = arith.constant 4096 : index
  %6 = arith.constant 128 : index
  %7 = tile.program_id 0
  %8 = arith.remsi %7, %2 : index
  %9 = arith.divsi %7, %2 : index
  %10 = arith.muli %8, %3 : index
  %11 = nn.constant 0.000000e+00 : tensor<128x16xf32>
  %12 = nn.constant 0.000000e+00 : tensor<16xf32>
  %13, %14, %15, %16 = scf.for %17 = %4 to %5 step %6 iter_args(%18 = %12, %19 = %11, %20 = %11, %21 = %11) -> (tensor<16xf32>, tensor<128x16xf32>, tensor<128x16xf32>, tensor<128x16xf32>) {
    %22 = tile.broadcast %18 dims [1] : tensor<16xf32> -> tensor<128x16xf32>
    %23 = nn.constant 0.000000e+00 : tensor<128x16xf32>
    %24 = nn.compare eq, %22, %23 : tensor<128x16xf32>
    %25 = nn.constant 1.000000e+00 : tensor<16xf32>
    %26 = nn.add %18, %25 : tensor<16xf32>
    %27 = nn.constant 1.000000e+00 : tensor<16xf32>
    %28 = nn.div %27, %26 : tensor<16xf32>
    %29 = tile.broadcast %28 dims [1] : tensor<16xf32> -> tensor<128x16xf32>
    %30 = tile.load %0[%9, %17, %10] : memref<2x4096x64xf32> -> tensor<128x16xf32>
    %31 = nn.select %24, %30, %19 : tensor<128x16xf32>
    %32 = nn.sub %30, %31 : tensor<128x16xf32>
    %33 = nn.sub %32, %20 : tensor<128x16xf32>
    %34 = nn.mul %33, %29 : tensor<128x16xf32>
    %35 = nn.add %20, %34 : tensor<128x16xf32>
    %36 = nn.sub %32, %35 : tensor<128x16xf32>
    %37 = nn.mul %33, %36 : tensor<128x16xf32>
    %38 = nn.add %21, %37 : tensor<128x16xf32>
    scf.yield %26, %31, %35, %38 : tensor<16xf32>, tensor<128x16xf32>, tensor<128x16xf32>, tensor<128x16xf32>
  }
  %39 = tile.broadcast %13 dims [1] : tensor<16xf32> -> tensor<128x16xf32>
  %40 = tile.reduce sum %39 axis 0 : tensor<128x16xf32> -> tensor<16xf32>
  %41 = nn.add %14, %15 : tensor<128x16xf32>
  %42 = nn.mul %39, %41 : tensor<128x16xf32>
  %43 = tile.reduce sum %42 axis 0 : tensor<128x16xf32> -> tensor<16xf32>
  %44 = nn.div %43, %40 : tensor<16xf32>
  %45 = tile.broadcast %44 dims [1] : tensor<16xf32> -> tensor<128x16xf32>
  %46 = nn.sub %14, %45 : tensor<128x16xf32>
  %47 = nn.add %46, %15 : tensor<128x16xf32>
  %48 = nn.mul %47, %47 : tensor<128x16xf32>
  %49 = nn.mul %39, %48 : tensor<128x16xf32>
  %50 = tile.reduce sum %49 axis 0 : tensor<128x16xf32> -> tensor<16xf32>
  %51 = tile.reduce sum %16 axis 0 : tensor<128x16xf32> -> tensor<16xf32>
  %52 = nn.add %51, %50 : tensor<16xf32>
  %53 = nn.constant 4.096000e+03 : tensor<16xf32>
  %54 = nn.div %52, %53 : tensor<16xf32>
  tile.store %54, %1[%9, %10] : tensor<16xf32>, memref<2x64xf32>
  tile.return
}
func.func @column_variance_f32(%0: memref<2x4096x64xf32>, %1: memref<2x64xf32> {tile.output}) {
  tile.launch @fused_0_mean_sub_mul grid [8] (%0, %1) : memref<2x4096x64xf32>, memref<2x64xf32>
  func.return
}
