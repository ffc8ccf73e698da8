// RUN: fuse-opt %s --split-input-file -p 'nn-decompose,canonicalize,nn-fuse,convert-nn-to-tile{max-row-block=32768 statistics-row-block=8192 statistics-row-chunk=4096}' | filecheck %s
// RUN: fuse-opt %s --split-input-file -p 'nn-decompose,canonicalize,nn-fuse,convert-nn-to-tile{max-row-block=32768 statistics-row-block=8192 statistics-row-chunk=4096},tile-promote' | filecheck %s --check-prefix=VEC

// A normalization's mean and variance over rows longer than statistics-row-block loop
// in chunks of statistics-row-chunk, each lane keeping its Welford statistics (no
// tile.reduce in the loop); the store loop reads the row again.
// CHECK-LABEL: tile.kernel @fused_0
// CHECK-SAME:    schedule = "row_reduction_looped"
// CHECK-SAME:    block_sizes = array<i64: 1, 4096>
// CHECK:         scf.for
// CHECK-NOT:     tile.reduce
// CHECK:         scf.yield
// CHECK:         tile.reduce sum
// CHECK:         scf.for
// CHECK:         tile.store
// The per-row statistics it stores (one element a row) do not limit the vector width
// of its row loads and stores (16 bytes of f32).
// VEC-LABEL: tile.kernel @fused_0
// VEC-SAME:    vector_width = 4
func.func @layer_norm(%x: tensor<4x12000xf32>, %w: tensor<12000xf32>, %b: tensor<12000xf32>) -> tensor<4x12000xf32> {
  %y = nn.layer_norm %x weight %w bias %b {eps = 1.0e-05 : f64} : tensor<4x12000xf32>, tensor<12000xf32>, tensor<12000xf32> -> tensor<4x12000xf32>
  func.return %y : tensor<4x12000xf32>
}

// -----

// A softmax over the same rows keeps the whole row in one program (max-row-block).
// CHECK-LABEL: tile.kernel @fused_0
// CHECK-SAME:    schedule = "row_reduction"
// CHECK-SAME:    block_sizes = array<i64: 1, 16384>
// CHECK-NOT:     scf.for
func.func @softmax(%x: tensor<4x12000xf32>) -> tensor<4x12000xf32> {
  %y = nn.softmax %x axis 1 : tensor<4x12000xf32>
  func.return %y : tensor<4x12000xf32>
}
