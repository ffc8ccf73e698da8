// nn functions of dynamic size whose lowering depends on the size in ways tile IR does not
// compute at run time are refused with a located error (passes/generalize_sizes.py).
// RUN: not fuse-opt %s --pipeline standard 2>&1 | filecheck %s

// Attention over a dynamic sequence: its kernel splits the sequence in ways the
// generalization does not compute yet.
// CHECK: generalize-sizes-refused.mlir:[[# @LINE + 4]]:3: error: dynamic sizes: an index constant depends on the size in a way tile IR cannot compute at run time; compile this function with static sizes
func.func @attention(%q: tensor<1x2x?x64xf32>, %k: tensor<1x2x?x64xf32>, %v: tensor<1x2x?x64xf32>) -> tensor<1x2x?x64xf32> {
  %s = nn.matmul %q, %k transpose_b : tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32> -> tensor<1x2x?x?xf32>
  %p = nn.softmax %s axis 3 : tensor<1x2x?x?xf32>
  %o = nn.matmul %p, %v : tensor<1x2x?x?xf32>, tensor<1x2x?x64xf32> -> tensor<1x2x?x64xf32>
  func.return %o : tensor<1x2x?x64xf32>
}
