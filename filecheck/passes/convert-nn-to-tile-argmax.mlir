// RUN: fuse-opt %s --split-input-file -p 'nn-fuse,convert-nn-to-tile{block-rows=16 block-cols=16 max-row-block=16}' | filecheck %s
// RUN: fuse-opt %s --split-input-file -p 'nn-fuse,convert-nn-to-tile{block-rows=16 block-cols=16 max-row-block=16 column-statistics=false}' | filecheck %s --check-prefix=OFF

// An argmax across columns (the frontend's form: the max, the positions holding it or
// NaN, their least) loops once: each lane keeps its running max and the position of
// its first max (the positions rise along the loop: a comparison and two selects, no
// tile.reduce in the loop); after it the lanes combine, the least position among the
// lanes holding the column's max (40, the value of the others, never wins).
// CHECK-LABEL: tile.kernel @fused_0
// CHECK-SAME:    schedule = "row_reduction_looped"
// CHECK:         %[[M:.*]], %[[I:.*]] = scf.for
// CHECK-NOT:     tile.reduce
// CHECK:           nn.compare gt
// CHECK:           nn.compare ne
// CHECK:           tile.iota
// CHECK-NOT:     tile.reduce
// CHECK:           scf.yield
// CHECK:         %[[MAX:.*]] = tile.reduce max %[[M]] axis 0
// CHECK:         nn.constant 40
// CHECK:         %[[LEAST:.*]] = tile.reduce min
// CHECK:         tile.store %[[LEAST]]
// CHECK-NOT:     scf.for
// CHECK:         tile.return
// column-statistics=false: a loop for the max, one for the positions.
// OFF-LABEL: tile.kernel @fused_0
// OFF:         scf.for
// OFF:         scf.for
// OFF:         tile.return
func.func @argmax_columns(%x: tensor<40x4xf32>) -> tensor<1x4xi64> {
  %m = nn.reduce_max %x [0] keepdim : tensor<40x4xf32> -> tensor<1x4xf32>
  %r = nn.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39]> : tensor<40xi64>
  %rr = nn.reshape %r : tensor<40xi64> -> tensor<40x1xi64>
  %i = nn.broadcast %rr : tensor<40x1xi64> -> tensor<40x4xi64>
  %p = nn.constant 40 : tensor<40x4xi64>
  %mb = nn.broadcast %m : tensor<1x4xf32> -> tensor<40x4xf32>
  %hit = nn.compare eq, %x, %mb : tensor<40x4xf32>
  %c = nn.select %hit, %i, %p : tensor<40x4xi64>
  %n = nn.compare ne, %x, %x : tensor<40x4xf32>
  %d = nn.select %n, %i, %c : tensor<40x4xi64>
  %y = nn.reduce_min %d [0] keepdim : tensor<40x4xi64> -> tensor<1x4xi64>
  func.return %y : tensor<1x4xi64>
}

// -----

// Rows keep a loop per level (measured faster on an H200: the second read hits L2,
// and the running position costs more than it saves).
// CHECK-LABEL: tile.kernel @fused_0
// CHECK:         scf.for
// CHECK:         scf.yield
// CHECK:         scf.for
// CHECK:         scf.yield
// CHECK:         tile.return
func.func @argmax_rows(%x: tensor<4x40xf32>) -> tensor<4x1xi64> {
  %m = nn.reduce_max %x [1] keepdim : tensor<4x40xf32> -> tensor<4x1xf32>
  %r = nn.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39]> : tensor<40xi64>
  %rr = nn.reshape %r : tensor<40xi64> -> tensor<1x40xi64>
  %i = nn.broadcast %rr : tensor<1x40xi64> -> tensor<4x40xi64>
  %p = nn.constant 40 : tensor<4x40xi64>
  %mb = nn.broadcast %m : tensor<4x1xf32> -> tensor<4x40xf32>
  %hit = nn.compare eq, %x, %mb : tensor<4x40xf32>
  %c = nn.select %hit, %i, %p : tensor<4x40xi64>
  %n = nn.compare ne, %x, %x : tensor<4x40xf32>
  %d = nn.select %n, %i, %c : tensor<4x40xi64>
  %y = nn.reduce_min %d [1] keepdim : tensor<4x40xi64> -> tensor<4x1xi64>
  func.return %y : tensor<4x1xi64>
}
