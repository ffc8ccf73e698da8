// RUN: fuse-opt %s --pipeline standard | filecheck %s
// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s --check-prefix=TRITON

// GPT-2's q, k and v: column blocks of one projection's [B, S, 3 * H * E] output,
// each reshaped to heads and transposed. The kernel reads every head from the
// projection's buffer itself (rows 192 wide; k's heads from column 64, v's from 128),
// so the slices, reshapes and transposes launch nothing: one kernel, the projection's
// buffer passed three times.
// CHECK:       tile.kernel @attention grid 1 (%[[Q:.*]]: memref<2x40x192xf32>, %[[K:.*]]: memref<2x40x192xf32>, %[[V:.*]]: memref<2x40x192xf32>, %{{.*}}: memref<2x40x64xf32>)
// CHECK-DAG:   %[[C64:.*]] = arith.constant 64 : index
// CHECK-DAG:   %[[C128:.*]] = arith.constant 128 : index
// CHECK-DAG:   %[[KCOL:.*]] = arith.addi %{{.*}}, %[[C64]] : index
// CHECK-DAG:   %[[VCOL:.*]] = arith.addi %{{.*}}, %[[C128]] : index
// CHECK:       tile.load %[[K]][%{{.*}}, %{{.*}}, %[[KCOL]]] : memref<2x40x192xf32> -> tensor<64x16xf32>
// CHECK:       tile.load %[[V]][%{{.*}}, %{{.*}}, %[[VCOL]]] : memref<2x40x192xf32> -> tensor<64x16xf32>
// CHECK-NOT:   tile.kernel
// CHECK:       func.func @main(%[[QKV:.*]]: memref<2x40x192xf32>, %[[O:.*]]: memref<2x40x4x16xf32> {tile.output})
// CHECK-NEXT:  %[[OUT:.*]] = tile.view %[[O]] : memref<2x40x4x16xf32> -> memref<2x40x64xf32>
// CHECK-NEXT:  tile.launch @attention grid [{{.*}}] (%[[QKV]], %[[QKV]], %[[QKV]], %[[OUT]])
// CHECK-NEXT:  func.return
// TRITON:      def attention(
// TRITON-NOT:  def {{.*}}slice
func.func @main(%qkv: tensor<2x40x192xf32>) -> (tensor<2x40x4x16xf32>) {
  %qs = nn.slice %qkv [0:2, 0:40, 0:64] : tensor<2x40x192xf32> -> tensor<2x40x64xf32>
  %qr = nn.reshape %qs : tensor<2x40x64xf32> -> tensor<2x40x4x16xf32>
  %qt = nn.transpose %qr [0, 2, 1, 3] : tensor<2x40x4x16xf32> -> tensor<2x4x40x16xf32>
  %ks = nn.slice %qkv [0:2, 0:40, 64:128] : tensor<2x40x192xf32> -> tensor<2x40x64xf32>
  %kr = nn.reshape %ks : tensor<2x40x64xf32> -> tensor<2x40x4x16xf32>
  %kt = nn.transpose %kr [0, 2, 1, 3] : tensor<2x40x4x16xf32> -> tensor<2x4x40x16xf32>
  %vs = nn.slice %qkv [0:2, 0:40, 128:192] : tensor<2x40x192xf32> -> tensor<2x40x64xf32>
  %vr = nn.reshape %vs : tensor<2x40x64xf32> -> tensor<2x40x4x16xf32>
  %vt = nn.transpose %vr [0, 2, 1, 3] : tensor<2x40x4x16xf32> -> tensor<2x4x40x16xf32>
  %o = nn.attention %qt, %kt, %vt {scale = 0.25 : f64} : tensor<2x4x40x16xf32>, tensor<2x4x40x16xf32>, tensor<2x4x40x16xf32> -> tensor<2x4x40x16xf32>
  %r = nn.transpose %o [0, 2, 1, 3] : tensor<2x4x40x16xf32> -> tensor<2x40x4x16xf32>
  func.return %r : tensor<2x40x4x16xf32>
}
