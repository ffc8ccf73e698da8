// nn functions of dynamic size whose lowering depends on the size in ways tile IR does not
// compute at run time are refused with a located error (passes/generalize_sizes.py).
// RUN: not fuse-opt %s --split-input-file --pipeline standard 2>&1 | filecheck %s

// Attention over a dynamic sequence: its kernel splits the sequence in ways the
// generalization does not compute yet.
// CHECK: generalize-sizes-refused.mlir:[[# @LINE + 4]]:3: error: dynamic sizes: an index constant depends on the size in a way tile IR cannot compute at run time; compile this function with static sizes
func.func @attention(%q: tensor<1x2x?x64xf32>, %k: tensor<1x2x?x64xf32>, %v: tensor<1x2x?x64xf32>) -> tensor<1x2x?x64xf32> {
  %s = nn.matmul %q, %k transpose_b : tensor<1x2x?x64xf32>, tensor<1x2x?x64xf32> -> tensor<1x2x?x?xf32>
  %p = nn.softmax %s axis 3 : tensor<1x2x?x?xf32>
  %o = nn.matmul %p, %v : tensor<1x2x?x?xf32>, tensor<1x2x?x64xf32> -> tensor<1x2x?x64xf32>
  func.return %o : tensor<1x2x?x64xf32>
}

// -----

// A matmul summing over the dynamic dim (a weight gradient): a GEMM's contraction dim
// must be static, so the lowering, made of dynamic size, does not verify; the error
// says so at the function (the FX frontend compiles such a region per size instead).
// CHECK: generalize-sizes-refused.mlir:[[# @LINE + 1]]:1: error: dynamic sizes: made of dynamic size, the lowering does not verify (an op needs a static size where the size is); compile this function with static sizes: 'tile.gemm' op rhs must have a static shape, got memref<?x8xf32>
func.func @weight_grad(%x: tensor<?x4xf32>, %y: tensor<?x8xf32>) -> tensor<4x8xf32> {
  %t = nn.transpose %x [1, 0] : tensor<?x4xf32> -> tensor<4x?xf32>
  %g = nn.matmul %t, %y : tensor<4x?xf32>, tensor<?x8xf32> -> tensor<4x8xf32>
  func.return %g : tensor<4x8xf32>
}
