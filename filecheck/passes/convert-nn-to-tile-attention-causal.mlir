// RUN: fuse-opt %s -p convert-nn-to-tile | filecheck %s

// Causal attention at head dim 128 with 256 queries and keys: 128 keys a step (BN = BM,
// faster for causal kernels at this head dim), and since 256 is a multiple of 128 no
// block reaches past the last key: the diagonal loop compares key with query indices
// only (no bounds comparison).
// CHECK-LABEL: tile.kernel @attention grid 1
// CHECK-SAME:  block_sizes = array<i64: 1, 1, 128, 128>
// CHECK:       scf.for
// CHECK-NOT:     tile.iota
// CHECK:       scf.for
// CHECK:         tile.iota %{{.*}} start 0 step 1 : tensor<128xi64>
// CHECK-NOT:     nn.compare lt
// CHECK:         nn.compare le
// CHECK:       tile.launch @attention grid [4]
func.func @main(%q: tensor<1x2x256x128xbf16>, %k: tensor<1x2x256x128xbf16>, %v: tensor<1x2x256x128xbf16>) -> tensor<1x2x256x128xbf16> {
  %o = nn.attention %q, %k, %v causal {scale = 0.08838834764831845 : f64} : tensor<1x2x256x128xbf16>, tensor<1x2x256x128xbf16>, tensor<1x2x256x128xbf16> -> tensor<1x2x256x128xbf16>
  func.return %o : tensor<1x2x256x128xbf16>
}
