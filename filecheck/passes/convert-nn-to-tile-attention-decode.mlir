// RUN: fuse-opt %s -p convert-nn-to-tile | filecheck %s

// A grouped-query decode step (8 sequences, 32 query heads over 8 key/value heads, one
// new token, 4096 keys, a padding mask the same for every head): the 4 query heads of a
// key/value head are packed as the rows of one program (host views of the query and
// output, [8, 8, 4, 128]), so each K/V block is read once per group; 64 such programs
// would leave the GPU idle, so the keys are split into 4 chunks of 1024 (256 programs),
// each writing its normalized partial output, its row max (base-2 units) and its sum of
// exponentials, and a combine kernel merges the chunks per row, each weighed by its sum
// scaled to the largest max.
// CHECK-LABEL: tile.kernel @attention grid 1
// CHECK-SAME:  (%[[Q:.*]]: memref<8x8x4x128xbf16>, %[[K:.*]]: memref<8x8x4096x128xbf16>, %{{.*}}: memref<8x8x4096x128xbf16>, %[[M:.*]]: memref<8x1x1x4096xi1>, %[[PO:.*]]: memref<8x8x4x4x128xf32>, %[[PM:.*]]: memref<8x8x4x4xf32>, %[[PS:.*]]: memref<8x8x4x4xf32>)
// CHECK-SAME:  block_sizes = array<i64: 1, 1, 16, 64>
// CHECK:       %[[PID:.*]] = tile.program_id 0
// CHECK:       %[[CHUNK:.*]] = arith.remsi %[[PID]], %{{.*}} : index
// CHECK:       tile.load %[[Q]]{{.*}} -> tensor<16x128xbf16>
// CHECK:       %[[LO:.*]] = arith.muli %[[CHUNK]], %{{.*}} : index
// CHECK:       scf.for %[[N:.*]] = %[[LO]] to %{{.*}} step
// CHECK:         tile.load %[[K]][%{{.*}}, %{{.*}}, %[[N]], %{{.*}}] : memref<8x8x4096x128xbf16> -> tensor<64x128xbf16>
// CHECK:         tile.load %[[M]]
// CHECK:       tile.store %{{.*}}, %[[PO]][%{{.*}}, %{{.*}}, %[[CHUNK]], %{{.*}}, %{{.*}}] : tensor<16x128xf32>, memref<8x8x4x4x128xf32>
// CHECK:       tile.store %{{.*}}, %[[PM]][%{{.*}}, %{{.*}}, %[[CHUNK]], %{{.*}}] : tensor<16xf32>, memref<8x8x4x4xf32>
// CHECK:       tile.store %{{.*}}, %[[PS]][%{{.*}}, %{{.*}}, %[[CHUNK]], %{{.*}}] : tensor<16xf32>, memref<8x8x4x4xf32>
// CHECK-LABEL: tile.kernel @attention_combine grid 1
// CHECK:       %[[MAX:.*]] = tile.load %{{.*}} fill -inf : memref<8x8x4x4xf32> -> tensor<4x4xf32>
// CHECK:       %[[SUM:.*]] = tile.load %{{.*}} : memref<8x8x4x4xf32> -> tensor<4x4xf32>
// CHECK:       tile.load %{{.*}} : memref<8x8x4x4x128xf32> -> tensor<4x4x128xf32>
// CHECK:       tile.reduce max %[[MAX]] axis 0 : tensor<4x4xf32> -> tensor<4xf32>
// CHECK:       %[[E:.*]] = nn.exp2
// CHECK:       nn.mul %[[SUM]], %[[E]] : tensor<4x4xf32>
// CHECK:       tile.reduce sum %{{.*}} axis 0 : tensor<4x4x128xf32> -> tensor<4x128xf32>
// CHECK:       tile.store %{{.*}} : tensor<4x128xbf16>, memref<8x8x4x128xbf16>
// CHECK-LABEL: func.func @main
// CHECK:       %[[QV:.*]] = tile.view %{{.*}} : memref<8x32x1x128xbf16> -> memref<8x8x4x128xbf16>
// CHECK:       %[[OV:.*]] = tile.view %{{.*}} : memref<8x32x1x128xbf16> -> memref<8x8x4x128xbf16>
// CHECK:       %[[T1:.*]] = tile.alloc : memref<8x8x4x4x128xf32>
// CHECK:       %[[T2:.*]] = tile.alloc : memref<8x8x4x4xf32>
// CHECK:       %[[T3:.*]] = tile.alloc : memref<8x8x4x4xf32>
// CHECK:       tile.launch @attention grid [256] (%[[QV]], {{.*}}, %[[T1]], %[[T2]], %[[T3]])
// CHECK:       tile.launch @attention_combine grid [64] (%[[T1]], %[[T2]], %[[T3]], %[[OV]])
func.func @main(%q: tensor<8x32x1x128xbf16>, %k: tensor<8x8x4096x128xbf16>, %v: tensor<8x8x4096x128xbf16>, %m: tensor<8x1x1x4096xi1>) -> tensor<8x32x1x128xbf16> {
  %o = nn.attention %q, %k, %v mask %m {scale = 0.08838834764831845 : f64} : tensor<8x32x1x128xbf16>, tensor<8x8x4096x128xbf16>, tensor<8x8x4096x128xbf16>, tensor<8x1x1x4096xi1> -> tensor<8x32x1x128xbf16>
  func.return %o : tensor<8x32x1x128xbf16>
}
