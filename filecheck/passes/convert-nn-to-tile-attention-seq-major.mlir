// RUN: fuse-opt %s --pipeline standard | filecheck %s
// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s --check-prefix=TRITON

// Attention between head transposes, as BERT and GPT-2 run SDPA: q, k and v arrive as
// [B, S, H, E] and the output goes back to it. The kernel reads and writes the
// [B, S, H * E] views (a head is a column block at h * E), so no transpose is lowered:
// one launch, no copy kernel, straight into the function's output.
// CHECK:       tile.kernel @attention grid 1 (%{{.*}}: memref<2x40x64xf32>, %{{.*}}: memref<2x40x64xf32>, %{{.*}}: memref<2x40x64xf32>, %{{.*}}: memref<2x40x64xf32>)
// CHECK:       tile.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x40x64xf32> -> tensor<64x16xf32>
// CHECK:       tile.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : tensor<64x16xf32>, memref<2x40x64xf32>
// CHECK-NOT:   tile.kernel
// CHECK:       func.func @main
// CHECK-COUNT-4: tile.view %{{.*}} : memref<2x40x4x16xf32> -> memref<2x40x64xf32>
// CHECK-NEXT:  tile.launch @attention
// CHECK-NEXT:  func.return
// TRITON:      def attention(
// TRITON-NOT:  def {{.*}}transpose
func.func @main(%q: tensor<2x40x4x16xf32>, %k: tensor<2x40x4x16xf32>, %v: tensor<2x40x4x16xf32>) -> tensor<2x40x4x16xf32> {
  %qt = nn.transpose %q [0, 2, 1, 3] : tensor<2x40x4x16xf32> -> tensor<2x4x40x16xf32>
  %kt = nn.transpose %k [0, 2, 1, 3] : tensor<2x40x4x16xf32> -> tensor<2x4x40x16xf32>
  %vt = nn.transpose %v [0, 2, 1, 3] : tensor<2x40x4x16xf32> -> tensor<2x4x40x16xf32>
  %o = nn.attention %qt, %kt, %vt {scale = 0.25 : f64} : tensor<2x4x40x16xf32>, tensor<2x4x40x16xf32>, tensor<2x4x40x16xf32> -> tensor<2x4x40x16xf32>
  %r = nn.transpose %o [0, 2, 1, 3] : tensor<2x4x40x16xf32> -> tensor<2x40x4x16xf32>
  func.return %r : tensor<2x40x4x16xf32>
}

