// RUN: fuse-opt %s -p convert-nn-to-tile | filecheck %s
// RUN: fuse-opt %s -p 'convert-nn-to-tile{attention-block-m=32 attention-block-n=16}' | filecheck %s --check-prefix=FORCED
// RUN: fuse-opt %s -p 'convert-nn-to-tile,tile-promote' | filecheck %s --check-prefix=KNOBS
// RUN: fuse-opt %s -p 'convert-nn-to-tile{attention-block-m=32 attention-block-n=16 attention-query-tiles=2}' | filecheck %s --check-prefix=TILES
// RUN: not fuse-opt %s -p 'convert-nn-to-tile{attention-block-m=48}' 2>&1 | filecheck %s --check-prefix=BADSIZE
// BADSIZE: error: convert-nn-to-tile: attention-block-m=48 must be a positive power of two
// BADSIZE-NOT: Traceback

// Causal grouped-query attention with a padding mask, 100 queries against 120 keys: one
// flash-attention kernel, a program per (batch, query head, block of 128 queries), the
// last query block of every (batch, head) first (longest first: the query block varies
// slowest). Query head h reads key/value head h // 2. The query tile is
// loaded once; the keys every row keeps whole (left of the program's diagonal) come in a
// loop without index masks, the diagonal and the ragged end in a second loop that masks
// by comparing key and query indices. Scores are in base-2 units (scale * log2(e)),
// each exponential an nn.exp2; the mask [2, 1, 1, 120] is read one [1, 64] row per key
// block and broadcast.
// CHECK-LABEL: tile.kernel @attention grid 1
// CHECK-SAME:  (%[[Q:.*]]: memref<2x4x100x64xbf16>, %[[K:.*]]: memref<2x2x120x64xbf16>, %[[V:.*]]: memref<2x2x120x64xbf16>, %[[M:.*]]: memref<2x1x1x120xi1>, %[[O:.*]]: memref<2x4x100x64xbf16>)
// CHECK-SAME:  schedule = "attention", iteration_sizes = array<i64: 2, 4, 100, 120>, block_sizes = array<i64: 1, 1, 128, 64>
// CHECK:       %[[PID:.*]] = tile.program_id 0
// CHECK:       %[[FROM_END:.*]] = arith.divsi %[[PID]], %[[BHS:.*]] : index
// CHECK:       %[[BH:.*]] = arith.remsi %[[PID]], %[[BHS]] : index
// CHECK:       %[[MB:.*]] = arith.subi %{{.*}}, %[[FROM_END]] : index
// CHECK:       %[[HEAD:.*]] = arith.remsi %[[BH]], %{{.*}} : index
// CHECK:       %[[B:.*]] = arith.divsi %[[BH]], %{{.*}} : index
// CHECK:       %[[KVH:.*]] = arith.divsi %[[HEAD]], %{{.*}} : index
// CHECK:       %[[M0:.*]] = arith.muli %[[MB]], %{{.*}} : index
// CHECK:       %[[QT:.*]] = tile.load %[[Q]][%[[B]], %[[HEAD]], %[[M0]], %{{.*}}] : memref<2x4x100x64xbf16> -> tensor<128x64xbf16>
// CHECK:       %[[WHOLE:.*]] = arith.minsi %[[M0]],
// CHECK:       scf.for %[[N:.*]] = %{{.*}} to %[[WHOLE]] step %{{.*}} iter_args
// CHECK-NOT:     tile.iota
// CHECK:         %[[KT:.*]] = tile.load %[[K]][%[[B]], %[[KVH]], %[[N]], %{{.*}}] : memref<2x2x120x64xbf16> -> tensor<64x64xbf16>
// CHECK:         tile.transpose %[[KT]] [1, 0]
// CHECK:         tile.dot %[[QT]], %{{.*}} : tensor<128x64xbf16>, tensor<64x64xbf16>, tensor<128x64xf32>
// CHECK:         nn.constant 0.18033688011112042 : tensor<128x64xf32>
// CHECK:         tile.load %[[M]][%[[B]], %{{.*}}, %{{.*}}, %[[N]]] : memref<2x1x1x120xi1> -> tensor<1x64xi1>
// CHECK:         tile.broadcast %{{.*}} dims [0, 1] : tensor<1x64xi1> -> tensor<128x64xi1>
// CHECK:         tile.load %[[V]][%[[B]], %[[KVH]], %[[N]], %{{.*}}] : memref<2x2x120x64xbf16> -> tensor<64x64xbf16>
// CHECK:         tile.reduce max
// CHECK:         nn.exp2
// CHECK:         nn.exp2
// CHECK:         tile.reduce sum
// CHECK:         nn.cast %{{.*}} : tensor<128x64xf32> -> tensor<128x64xbf16>
// CHECK:         tile.dot
// CHECK:         scf.yield
// CHECK:       %[[END:.*]] = arith.minsi
// CHECK:       scf.for %[[N2:.*]] = %[[WHOLE]] to %[[END]] step
// CHECK:         tile.iota %[[N2]] start 0 step 1 : tensor<64xi64>
// CHECK:         nn.compare lt
// CHECK:         tile.iota %[[M0]] start 0 step 1 : tensor<128xi64>
// CHECK:         nn.compare le
// CHECK:       nn.div
// CHECK:       tile.store %{{.*}}, %[[O]][%[[B]], %[[HEAD]], %[[M0]], %{{.*}}] : tensor<128x64xbf16>, memref<2x4x100x64xbf16>
// CHECK:       func.func @main
// CHECK:       tile.launch @attention grid [8]

// FORCED:      block_sizes = array<i64: 1, 1, 32, 16>
// FORCED:      tile.launch @attention grid [32]

// Two query tiles per program (forced; by default long non-causal attention takes two):
// the program covers 64 rows, a tile of 32 at m0 and one at m0 + 32; each key block's
// two q @ k^T products come first, then the value block, then each tile's softmax and
// p @ v; each tile stores its own rows. Causal: after the blocks every row keeps whole,
// tile 0's diagonal band is a loop of both tiles, only tile 0 under the causal mask
// (tile 1 keeps those keys whole), and tile 1's band a loop of tile 1 alone, so no tile
// steps through keys right of its diagonal.
// TILES-LABEL: tile.kernel @attention
// TILES-SAME:  block_sizes = array<i64: 1, 1, 64, 16>
// TILES:       %[[M0:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// TILES:       %[[M1:.*]] = arith.addi %[[M0]], %{{.*}} : index
// TILES:       %[[QA:.*]] = tile.load %{{.*}}[%{{.*}}, %{{.*}}, %[[M0]], %{{.*}}] : memref<2x4x100x64xbf16> -> tensor<32x64xbf16>
// TILES:       %[[QB:.*]] = tile.load %{{.*}}[%{{.*}}, %{{.*}}, %[[M1]], %{{.*}}] : memref<2x4x100x64xbf16> -> tensor<32x64xbf16>
// TILES:       scf.for
// TILES:         tile.dot %[[QA]], %{{.*}} : tensor<32x64xbf16>, tensor<64x16xbf16>, tensor<32x16xf32>
// TILES:         tile.dot %[[QB]], %{{.*}} : tensor<32x64xbf16>, tensor<64x16xbf16>, tensor<32x16xf32>
// TILES:         tile.load %{{.*}} : memref<2x2x120x64xbf16> -> tensor<16x64xbf16>
// TILES:         tile.reduce max
// TILES:         tile.dot %{{.*}} : tensor<32x16xbf16>, tensor<16x64xbf16>, tensor<32x64xf32>
// TILES:         tile.reduce max
// TILES:         tile.dot %{{.*}} : tensor<32x16xbf16>, tensor<16x64xbf16>, tensor<32x64xf32>
// TILES:         scf.yield
// TILES:       scf.for %{{.*}} -> (tensor<32xf32>, tensor<32xf32>, tensor<32x64xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32x64xf32>)
// TILES:         tile.iota %[[M0]] start 0 step 1 : tensor<32xi64>
// TILES:         nn.compare le
// TILES-NOT:     nn.compare le
// TILES:         scf.yield
// TILES:       scf.for %{{.*}} -> (tensor<32xf32>, tensor<32xf32>, tensor<32x64xf32>) {
// TILES-NOT:     tile.dot %[[QA]]
// TILES:         tile.dot %[[QB]]
// TILES:         tile.iota %[[M1]] start 0 step 1 : tensor<32xi64>
// TILES:         nn.compare le
// TILES:         scf.yield
// TILES:       tile.store %{{.*}}[%{{.*}}, %{{.*}}, %[[M0]], %{{.*}}] : tensor<32x64xbf16>
// TILES:       tile.store %{{.*}}[%{{.*}}, %{{.*}}, %[[M1]], %{{.*}}] : tensor<32x64xbf16>
// TILES:       tile.launch @attention grid [16]

// KNOBS:       schedule = "attention"
// KNOBS-SAME:  num_warps = 4 : i64, num_stages = 3 : i64
func.func @main(%q: tensor<2x4x100x64xbf16>, %k: tensor<2x2x120x64xbf16>, %v: tensor<2x2x120x64xbf16>, %m: tensor<2x1x1x120xi1>) -> tensor<2x4x100x64xbf16> {
  %o = nn.attention %q, %k, %v mask %m causal {scale = 0.125 : f64} : tensor<2x4x100x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x1x1x120xi1> -> tensor<2x4x100x64xbf16>
  func.return %o : tensor<2x4x100x64xbf16>
}
