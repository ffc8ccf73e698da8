// RUN: fuse-opt %s --split-input-file -p tile-promote | filecheck %s
// RUN: fuse-opt %s --split-input-file -p 'tile-promote{shared-bytes=64 num-stages=2}' | filecheck %s --check-prefix=SMALL
// RUN: fuse-opt %s --split-input-file -p 'tile-promote{num-stages=2}' | filecheck %s --check-prefix=STAGES
// RUN: fuse-opt %s --split-input-file -p tile-promote,tile-promote | filecheck %s
// RUN: fuse-opt %s --split-input-file -p 'tile-promote{shared-bytes=70000}' | filecheck %s --check-prefix=ONE
// RUN: fuse-opt %s --split-input-file -p 'tile-promote{row-cache-bytes=399}' | filecheck %s --check-prefix=NOCACHE
// RUN: not fuse-opt %s --split-input-file -p 'tile-promote{num-stages=0}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: not fuse-opt %s --split-input-file -p 'tile-promote{num-stages=99}' 2>&1 | filecheck %s --check-prefix=BAD
// BAD: error: tile-promote: shared-bytes and row-cache-bytes must be >= 0 and num-stages from 1 to 8
// BAD-NOT: Traceback
// (The second run of tile-promote changes nothing: the pass is idempotent.)

// Launch knobs on a pointwise kernel: 1024 bf16 per program -> 2 warps; 16-byte
// accesses are 8 bf16 wide.
// CHECK-LABEL: tile.kernel @silu
// CHECK-SAME:  num_warps = 2 : i64, num_stages = 1 : i64, vector_width = 8 : i64, shared_bytes = 0 : i64
// CHECK-NOT:   tile.alloc
// SMALL-LABEL: tile.kernel @silu
// SMALL-SAME:  vector_width = 8 : i64
tile.kernel @silu grid 1 (%0: memref<8192xbf16>, %1: memref<8192xbf16>) attributes {schedule = "pointwise", iteration_sizes = array<i64: 8192>, block_sizes = array<i64: 1024>} {
  %2 = arith.constant 1024 : index
  %3 = tile.program_id 0
  %4 = arith.muli %3, %2 : index
  %5 = tile.load %0[%4] : memref<8192xbf16> -> tensor<1024xbf16>
  %6 = nn.silu %5 : tensor<1024xbf16>
  tile.store %6, %1[%4] : tensor<1024xbf16>, memref<8192xbf16>
  tile.return
}
func.func @pointwise_bf16(%0: memref<64x128xbf16>, %1: memref<64x128xbf16> {tile.output}) {
  tile.launch @silu grid [8] (%0, %1) : memref<64x128xbf16>, memref<64x128xbf16>
  func.return
}

// -----

// Every other element (`x[:, ::2] * x[:, 1::2]`): each element a load of its own, 4
// per thread -> 8 warps for 1024 per program (16 per thread left 2 warps: 27 % slower),
// one element per access, so that a warp's loads span consecutive elements.
// CHECK-LABEL: tile.kernel @even_odd
// CHECK-SAME:  num_warps = 8 : i64, num_stages = 1 : i64, vector_width = 1 : i64
tile.kernel @even_odd grid 1 (%0: memref<8192xbf16, strided<[2]>>, %1: memref<8192xbf16, strided<[2], offset: 1>>, %2: memref<8192xbf16>) attributes {schedule = "pointwise", iteration_sizes = array<i64: 8192>, block_sizes = array<i64: 1024>} {
  %3 = arith.constant 1024 : index
  %4 = tile.program_id 0
  %5 = arith.muli %4, %3 : index
  %6 = tile.load %0[%5] : memref<8192xbf16, strided<[2]>> -> tensor<1024xbf16>
  %7 = tile.load %1[%5] : memref<8192xbf16, strided<[2], offset: 1>> -> tensor<1024xbf16>
  %8 = nn.mul %6, %7 : tensor<1024xbf16>
  tile.store %8, %2[%5] : tensor<1024xbf16>, memref<8192xbf16>
  tile.return
}
func.func @even_odd_columns(%0: memref<128x128xbf16>, %1: memref<128x64xbf16> {tile.output}) {
  tile.launch @even_odd grid [8] (%0, %0, %1) : memref<128x128xbf16>, memref<128x128xbf16>, memref<128x64xbf16>
  func.return
}

// -----

// Rows of 37 f32 are not 16-byte aligned: scalar accesses (vector width 1).
// CHECK-LABEL: tile.kernel @bias
// CHECK-SAME:  num_warps = 1 : i64, num_stages = 1 : i64, vector_width = 1 : i64, shared_bytes = 0 : i64
tile.kernel @bias grid 1 (%0: memref<5x37xf32>, %1: memref<37xf32>, %2: memref<5x37xf32>) attributes {schedule = "pointwise", iteration_sizes = array<i64: 5, 37>, block_sizes = array<i64: 8, 64>} {
  %3 = arith.constant 0 : index
  %4 = tile.program_id 0
  %5 = tile.load %0[%3, %3] : memref<5x37xf32> -> tensor<8x64xf32>
  %6 = tile.load %1[%3] : memref<37xf32> -> tensor<64xf32>
  %7 = tile.broadcast %6 dims [1] : tensor<64xf32> -> tensor<8x64xf32>
  %8 = nn.add %5, %7 : tensor<8x64xf32>
  tile.store %8, %2[%3, %3] : tensor<8x64xf32>, memref<5x37xf32>
  tile.return
}
func.func @pointwise_ragged(%0: memref<5x37xf32>, %1: memref<37xf32>, %2: memref<5x37xf32> {tile.output}) {
  tile.launch @bias grid [1] (%0, %1, %2) : memref<5x37xf32>, memref<37xf32>, memref<5x37xf32>
  func.return
}

// -----

// A looped row reduction reads its input in three column loops (max, sum, store): the
// row (100 f32 = 400 bytes) is cached in shared memory. The first loop copies each chunk
// global -> shared and waits at a barrier; every loop then loads the chunk from shared
// memory, so HBM is read once. With a 64-byte budget, or a 399-byte row cache, the row
// does not fit: no cache.
// CHECK-LABEL: tile.kernel @softmax
// CHECK-SAME:  row_cache = [0 : i64], num_warps = 1 : i64, num_stages = 1 : i64, vector_width = 4 : i64, shared_bytes = 400 : i64
// CHECK:       %[[SH:.*]] = tile.alloc : memref<1x100xf32, #tile.memory_space<shared>>
// CHECK:       %[[ROW:.*]] = tile.program_id 0
// CHECK:       scf.for %[[K:.*]] = {{.*}} iter_args
// CHECK-NEXT:    tile.copy %{{.*}}[%[[ROW]], %[[K]]] to %[[SH]][%{{.*}}, %[[K]]] [1, 32] : memref<6x100xf32> to memref<1x100xf32, #tile.memory_space<shared>>
// CHECK-NEXT:    tile.barrier
// CHECK-NEXT:    tile.load %[[SH]][%{{.*}}, %[[K]]] : memref<1x100xf32, #tile.memory_space<shared>> -> tensor<1x32xf32>
// CHECK:       scf.for %[[K2:.*]] = {{.*}} iter_args
// CHECK-NEXT:    tile.load %[[SH]][%{{.*}}, %[[K2]]]
// CHECK:       scf.for %[[K3:.*]] =
// CHECK-NEXT:    tile.load %[[SH]][%{{.*}}, %[[K3]]]
// CHECK:         tile.store %{{.*}}, %{{.*}}[%[[ROW]], %[[K3]]] : tensor<1x32xf32>, memref<6x100xf32>
// CHECK-NOT:   tile.copy
// SMALL-LABEL: tile.kernel @softmax
// SMALL-NOT:   row_cache
// SMALL-SAME:  shared_bytes = 0 : i64
// SMALL-NOT:   tile.alloc
// NOCACHE-LABEL: tile.kernel @softmax
// NOCACHE-NOT:   row_cache
// NOCACHE-SAME:  shared_bytes = 0 : i64
tile.kernel @softmax grid 1 (%0: memref<6x100xf32>, %1: memref<6x100xf32>) attributes {schedule = "row_reduction_looped", iteration_sizes = array<i64: 6, 100>, block_sizes = array<i64: 1, 32>, reduce_dim = 1 : i64} {
  %2 = arith.constant 0 : index
  %3 = arith.constant 100 : index
  %4 = arith.constant 32 : index
  %5 = tile.program_id 0
  %6 = nn.constant 0xfff0000000000000 : tensor<1xf32>
  %7 = scf.for %8 = %2 to %3 step %4 iter_args(%9 = %6) -> (tensor<1xf32>) {
    %10 = tile.load %0[%5, %8] : memref<6x100xf32> -> tensor<1x32xf32>
    %11 = tile.mask [%5, %8] bounds [6, 100] : tensor<1x32xi1>
    %12 = nn.constant 0xfff0000000000000 : tensor<1x32xf32>
    %13 = nn.select %11, %10, %12 : tensor<1x32xf32>
    %14 = tile.reduce max %13 axis 1 : tensor<1x32xf32> -> tensor<1xf32>
    %15 = nn.max %9, %14 : tensor<1xf32>
    scf.yield %15 : tensor<1xf32>
  }
  %16 = nn.constant 0.000000e+00 : tensor<1xf32>
  %17 = scf.for %18 = %2 to %3 step %4 iter_args(%19 = %16) -> (tensor<1xf32>) {
    %20 = tile.load %0[%5, %18] : memref<6x100xf32> -> tensor<1x32xf32>
    %21 = tile.broadcast %7 dims [0] : tensor<1xf32> -> tensor<1x32xf32>
    %22 = nn.sub %20, %21 : tensor<1x32xf32>
    %23 = nn.exp %22 : tensor<1x32xf32>
    %24 = tile.mask [%5, %18] bounds [6, 100] : tensor<1x32xi1>
    %25 = nn.constant 0.000000e+00 : tensor<1x32xf32>
    %26 = nn.select %24, %23, %25 : tensor<1x32xf32>
    %27 = tile.reduce sum %26 axis 1 : tensor<1x32xf32> -> tensor<1xf32>
    %28 = nn.add %19, %27 : tensor<1xf32>
    scf.yield %28 : tensor<1xf32>
  }
  scf.for %29 = %2 to %3 step %4 {
    %30 = tile.load %0[%5, %29] : memref<6x100xf32> -> tensor<1x32xf32>
    %31 = tile.broadcast %7 dims [0] : tensor<1xf32> -> tensor<1x32xf32>
    %32 = nn.sub %30, %31 : tensor<1x32xf32>
    %33 = nn.exp %32 : tensor<1x32xf32>
    %34 = tile.broadcast %17 dims [0] : tensor<1xf32> -> tensor<1x32xf32>
    %35 = nn.div %33, %34 : tensor<1x32xf32>
    tile.store %35, %1[%5, %29] : tensor<1x32xf32>, memref<6x100xf32>
  }
  tile.return
}
func.func @softmax_long(%0: memref<6x100xf32>, %1: memref<6x100xf32> {tile.output}) {
  tile.launch @softmax grid [6] (%0, %1) : memref<6x100xf32>, memref<6x100xf32>
  func.return
}

// -----

// Matmul: operand tiles are staged in shared memory as the CUDA printer lays them out,
// rows padded by 16 bytes (128x64 bf16 -> 128 x 72 x 2 = 18 KiB; A and B: 36 KiB a
// stage), 3 stages deep (108 KiB), then the f32 accumulator for the epilogue (64 KiB):
// 172 KiB. 2 stages when asked (136 KiB). Under a 70000-byte budget one stage and the
// accumulator do not fit side by side, so the accumulator reuses the stage after the
// K loop (64 KiB). With a 64-byte budget not even that fits: the operands stay in
// registers, no shared memory.
// CHECK-LABEL: tile.kernel @mm
// CHECK-SAME:  operand_staging = "shared", num_warps = 8 : i64, num_stages = 3 : i64, vector_width = 8 : i64, shared_bytes = 176128 : i64
// STAGES-LABEL: tile.kernel @mm
// STAGES-SAME:  operand_staging = "shared", num_warps = 8 : i64, num_stages = 2 : i64, vector_width = 8 : i64, shared_bytes = 139264 : i64
// ONE-LABEL: tile.kernel @mm
// ONE-SAME:  operand_staging = "shared", num_warps = 8 : i64, num_stages = 1 : i64, vector_width = 8 : i64, shared_bytes = 65536 : i64
// SMALL-LABEL: tile.kernel @mm
// SMALL-SAME:  operand_staging = "registers", num_warps = 8 : i64, num_stages = 1 : i64, vector_width = 8 : i64, shared_bytes = 0 : i64
tile.kernel @mm grid 1 (%0: memref<256x128xbf16>, %1: memref<256x128xbf16>, %2: memref<256x256xbf16>) attributes {schedule = "matmul", iteration_sizes = array<i64: 256, 256>, block_sizes = array<i64: 128, 128>, block_k = 64 : i64, group_m = 8 : i64} {
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
    %25 = tile.load %1[%19, %22] : memref<256x128xbf16> -> tensor<128x64xbf16>
    %26 = tile.transpose %25 [1, 0] : tensor<128x64xbf16> -> tensor<64x128xbf16>
    %27 = tile.dot %24, %26, %23 : tensor<128x64xbf16>, tensor<64x128xbf16>, tensor<128x128xf32>
    scf.yield %27 : tensor<128x128xf32>
  }
  %28 = nn.cast %21 : tensor<128x128xf32> -> tensor<128x128xbf16>
  tile.store %28, %2[%18, %19] : tensor<128x128xbf16>, memref<256x256xbf16>
  tile.return
}
func.func @matmul(%0: memref<256x128xbf16>, %1: memref<256x128xbf16>, %2: memref<256x256xbf16> {tile.output}) {
  tile.launch @mm grid [4] (%0, %1, %2) : memref<256x128xbf16>, memref<256x128xbf16>, memref<256x256xbf16>
  func.return
}

// -----

// A kernel that reads only by address (a ragged split's chunk: gathers at clamped
// positions, one sum per program) gets the warps of its 4096-element gather tile, as a
// load of that tile would, not the one warp of its one-element store.
// CHECK-LABEL: tile.kernel @ragged_chunk
// CHECK-SAME:  num_warps = 8 : i64
tile.kernel @ragged_chunk grid 1 (%0: memref<10007xf32>, %1: memref<3xf32>) attributes {schedule = "row_reduction", iteration_sizes = array<i64: 3, 4096>, block_sizes = array<i64: 1, 4096>, reduce_dim = 1 : i64} {
  %2 = tile.program_id 0
  %3 = arith.constant 0 : index
  %4 = tile.iota %2 start 0 step 4096 : tensor<1xi64>
  %5 = tile.broadcast %4 dims [0] : tensor<1xi64> -> tensor<1x4096xi64>
  %6 = tile.iota %3 start 0 step 1 : tensor<4096xi64>
  %7 = tile.broadcast %6 dims [1] : tensor<4096xi64> -> tensor<1x4096xi64>
  %8 = nn.add %5, %7 : tensor<1x4096xi64>
  %9 = nn.constant 10007 : tensor<1x4096xi64>
  %10 = nn.compare lt, %8, %9 : tensor<1x4096xi64>
  %11 = nn.constant 10006 : tensor<1x4096xi64>
  %12 = nn.min %8, %11 : tensor<1x4096xi64>
  %13 = tile.gather %0[%12] : memref<10007xf32>, tensor<1x4096xi64> -> tensor<1x4096xf32>
  %14 = nn.constant 0.000000e+00 : tensor<1x4096xf32>
  %15 = nn.select %10, %13, %14 : tensor<1x4096xf32>
  %16 = tile.reduce sum %15 axis 1 : tensor<1x4096xf32> -> tensor<1xf32>
  tile.store %16, %1[%2] : tensor<1xf32>, memref<3xf32>
  tile.return
}
