// RUN: fuse-opt %s --pipeline standard | filecheck %s
// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s --check-prefix=TRITON
// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s --check-prefix=CUDA

// An embedding as the frontend builds it (row id times the row length plus the column
// index vector, then nn.take) fuses with the add and the layer norm after it: one row
// kernel computes each element's position from the loaded ids and a tile.iota, reads
// the table by address (tile.gather) and never materializes the gathered rows. The
// table is passed whole, in its own shape.
// CHECK:       tile.kernel @{{.*}} grid 1 ({{.*}}: memref<12xi64>, {{.*}}: memref<50x96xf32>,
// CHECK-SAME:  schedule = "row_reduction"
// CHECK:       tile.load {{.*}} : memref<12xi64> -> tensor<{{[0-9]+}}xi64>
// CHECK:       tile.iota
// CHECK:       tile.gather %{{.*}}[%{{.*}}] : memref<50x96xf32>, tensor<{{[0-9]+}}x128xi64> -> tensor<{{[0-9]+}}x128xf32>
// CHECK:       tile.reduce sum
// CHECK-NOT:   tile.kernel
// CHECK:       func.func @embed
// CHECK-COUNT-1: tile.launch
// CHECK-NOT:   tile.launch
// TRITON:      gathered = tl.load(in{{[0-9]}}_ptr + [[POS:[a-z_0-9]+]], mask=([[POS]] >= 0) & ([[POS]] < 4800), other=0.0)
// CUDA:        ? p{{[0-9]}}[(long long)({{.*}})] : 0.0f;
func.func @embed(%w: tensor<50x96xf32>, %ids: tensor<3x4xi64>, %pos: tensor<3x4x96xf32>) -> tensor<3x4x96xf32> {
  %i = nn.reshape %ids : tensor<3x4xi64> -> tensor<3x4x1xi64>
  %d = nn.constant 96 : tensor<3x4x1xi64>
  %s = nn.mul %i, %d : tensor<3x4x1xi64>
  %sb = nn.broadcast %s : tensor<3x4x1xi64> -> tensor<3x4x96xi64>
  %ar = nn.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95]> : tensor<96xi64>
  %arb = nn.broadcast %ar : tensor<96xi64> -> tensor<3x4x96xi64>
  %p = nn.add %sb, %arb : tensor<3x4x96xi64>
  %e = nn.take %w, %p : tensor<50x96xf32>, tensor<3x4x96xi64> -> tensor<3x4x96xf32>
  %x = nn.add %e, %pos : tensor<3x4x96xf32>
  %n = nn.layer_norm %x {eps = 1.0e-05 : f64, normalized_rank = 1 : i64} : tensor<3x4x96xf32> -> tensor<3x4x96xf32>
  func.return %n : tensor<3x4x96xf32>
}

// A take from a value computed in the function reads it from memory: the exp is a
// kernel of its own (a kernel gathers only from its inputs), the take another.
// CHECK-LABEL: tile.kernel @{{.*}}exp
// CHECK-NOT:   tile.gather
// CHECK:       tile.kernel
// CHECK:       tile.gather
// CHECK-LABEL: func.func @computed_input
// CHECK-COUNT-2: tile.launch
func.func @computed_input(%x: tensor<64xf32>, %p: tensor<8x16xi64>) -> tensor<8x16xf32> {
  %e = nn.exp %x : tensor<64xf32>
  %t = nn.take %e, %p : tensor<64xf32>, tensor<8x16xi64> -> tensor<8x16xf32>
  func.return %t : tensor<8x16xf32>
}
