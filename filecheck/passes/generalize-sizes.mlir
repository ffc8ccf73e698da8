// nn functions of dynamic size (`?`): the standard pipeline lowers them at two size hints
// and computes what depends on the size at run time (passes/generalize_sizes.py): buffer
// dims become `?`, grids `ceildiv` of `tile.dim`, mask bounds and block counts in
// kernels come from a parameter's size, outputs take their size from an input, and the
// host function says which input dims are one size.
// RUN: fuse-opt %s --split-input-file --pipeline standard | filecheck %s
// (what is refused: generalize-sizes-refused.mlir)

// CHECK-LABEL: tile.kernel @fused_0_cast_mul_mean_add grid 1
// CHECK-SAME:  (%[[X:.*]]: memref<?x320xbf16>, %{{.*}}: memref<320xbf16>, %{{.*}}: memref<?x320xbf16>, %{{.*}}: memref<?x320xbf16>)
// CHECK-SAME:  schedule = "row_reduction"
// CHECK-NEXT:  %[[N:.*]] = tile.dim %[[X]], 0 : memref<?x320xbf16>
// CHECK:       tile.mask [%{{.*}}, %{{.*}}] bounds [%[[N]], 320] : tensor<4x512xi1>
// CHECK-LABEL: func.func @rmsnorm_silu_gate
// CHECK-SAME:  %{{.*}}: memref<?x320xbf16> {tile.output, tile.dims_from = array<i64: 0, 0>})
// CHECK-SAME:  attributes {tile.same_size = array<i64: 0, 0, 2, 0>}
// CHECK-NEXT:  %[[R:.*]] = tile.dim %{{.*}}, 0 : memref<?x320xbf16>
// CHECK-NEXT:  %[[B:.*]] = arith.constant 4 : index
// CHECK-NEXT:  %[[G:.*]] = arith.ceildivui %[[R]], %[[B]] : index
// CHECK-NEXT:  tile.launch @fused_0_cast_mul_mean_add grid [%[[G]]]
func.func @rmsnorm_silu_gate(%x: tensor<?x320xbf16>, %w: tensor<320xbf16>, %g: tensor<?x320xbf16>) -> tensor<?x320xbf16> {
  %n = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<?x320xbf16>, tensor<320xbf16> -> tensor<?x320xbf16>
  %s = nn.silu %g : tensor<?x320xbf16>
  %y = nn.mul %n, %s : tensor<?x320xbf16>
  func.return %y : tensor<?x320xbf16>
}

// -----

// A batched matmul kernel over a dynamic batch: its program id splits by a block count
// of the size, computed in the kernel.
// CHECK-LABEL: tile.kernel @fused_0_matmul_add_gelu_exp grid 1
// CHECK-SAME:  (%[[A:.*]]: memref<?x5x64xf32>, %{{.*}}: memref<96x64xf32>, %{{.*}}: memref<96xf32>, %{{.*}}: memref<?x5x96xf32>)
// CHECK-NEXT:  %[[S:.*]] = tile.dim %[[A]], 0 : memref<?x5x64xf32>
// CHECK:       arith.remsi %{{.*}}, %[[S]] : index
// CHECK-LABEL: func.func @mlp
// CHECK-SAME:  %{{.*}}: memref<?x5x96xf32> {tile.output, tile.dims_from = array<i64: 2, 0>})
// CHECK-NEXT:  %[[B:.*]] = tile.dim %{{.*}}, 0 : memref<?x5x64xf32>
// CHECK-NEXT:  tile.launch @fused_0_matmul_add_gelu_exp grid [%[[B]]]
func.func @mlp(%w1: tensor<96x64xf32>, %b1: tensor<96xf32>, %x: tensor<?x5x64xf32>) -> tensor<?x5x96xf32> {
  %0 = nn.linear %x, %w1, %b1 : tensor<?x5x64xf32>, tensor<96x64xf32>, tensor<96xf32> -> tensor<?x5x96xf32>
  %1 = nn.gelu %0 : tensor<?x5x96xf32>
  %2 = nn.exp %1 : tensor<?x5x96xf32>
  func.return %2 : tensor<?x5x96xf32>
}

// -----

// Attention over a dynamic batch: the kernel streams the keys (its last iteration dim)
// in each program, so the grid is not the block count of every iteration dim; it is 4
// programs (heads x query blocks) per batch at both hints, so `4 * n`.
// CHECK-LABEL: tile.kernel @attention grid 1
// CHECK-SAME:  schedule = "attention"
// CHECK-LABEL: func.func @attention_batch
// CHECK-NEXT:  %[[N:.*]] = tile.dim %{{.*}}, 0 : memref<?x4x128x64xbf16>
// CHECK-NEXT:  %[[H:.*]] = arith.constant 4 : index
// CHECK-NEXT:  %[[G:.*]] = arith.muli %[[N]], %[[H]] : index
// CHECK-NEXT:  tile.launch @attention grid [%[[G]]]
func.func @attention_batch(%q: tensor<?x4x128x64xbf16>, %k: tensor<?x4x128x64xbf16>, %v: tensor<?x4x128x64xbf16>) -> tensor<?x4x128x64xbf16> {
  %o = nn.attention %q, %k, %v causal {scale = 1.250000e-01 : f64} : tensor<?x4x128x64xbf16>, tensor<?x4x128x64xbf16>, tensor<?x4x128x64xbf16> -> tensor<?x4x128x64xbf16>
  func.return %o : tensor<?x4x128x64xbf16>
}

// -----

// A pointwise kernel over the flattened rows: its buffers have `320 * n` elements, which
// the kernel records (`size_multiples`), so a printer can tell its compiler.
// CHECK-LABEL: tile.kernel @fused_0_silu_mul grid 1
// CHECK-SAME:  (%{{.*}}: memref<?xbf16>, %{{.*}}: memref<?xbf16>, %{{.*}}: memref<?xbf16>)
// CHECK-SAME:  size_multiples = array<i64: 320, 320, 320>
func.func @pointwise(%x: tensor<?x320xbf16>, %y: tensor<?x320xbf16>) -> tensor<?x320xbf16> {
  %s = nn.silu %x : tensor<?x320xbf16>
  %m = nn.mul %s, %y : tensor<?x320xbf16>
  func.return %m : tensor<?x320xbf16>
}

// -----

// A decode step's attention over a dynamic key length (a growing KV cache): the grid
// (8 sequences x 8 key/value heads of 4 packed query heads x 4 key chunks) does not
// depend on the keys; each program computes its chunk from the key length at run time:
// ceil(S / 256) blocks of 64 keys (a power-of-two chunk count), the last whole block
// (S - S mod 64), and masks the ragged end by the length.
// CHECK-LABEL: tile.kernel @attention grid 1
// CHECK-SAME:  (%{{.*}}: memref<8x8x4x128xbf16>, %[[K:.*]]: memref<8x8x?x128xbf16>, %{{.*}}: memref<8x8x?x128xbf16>, %{{.*}}: memref<8x1x1x?xi1>, %{{.*}}: memref<8x8x4x4x128xf32>, %{{.*}}: memref<8x8x4x4xf32>, %{{.*}}: memref<8x8x4x4xf32>)
// CHECK-NEXT:  %[[S:.*]] = tile.dim %[[K]], 2 : memref<8x8x?x128xbf16>
// CHECK:       %[[BN:.*]] = arith.constant 64 : index
// CHECK:       %[[R:.*]] = arith.remsi %[[S]], %[[BN]] : index
// CHECK:       %[[WHOLE:.*]] = arith.subi %[[S]], %[[R]] : index
// CHECK:       %[[Q:.*]] = arith.constant 256 : index
// CHECK:       %[[BLOCKS:.*]] = arith.ceildivui %[[S]], %[[Q]] : index
// CHECK:       %[[CHUNK:.*]] = arith.muli %[[BLOCKS]], %[[BN]] : index
// CHECK:       %[[HI:.*]] = arith.minsi %{{.*}}, %[[S]] : index
// CHECK:       scf.for
// CHECK-NOT:     tile.iota
// CHECK:       scf.for
// CHECK:         tile.mask [%{{.*}}] bounds [%[[S]]] : tensor<64xi1>
// CHECK-LABEL: func.func @decode
// CHECK:       tile.launch @attention grid [256]
// CHECK:       tile.launch @attention_combine grid [64]
func.func @decode(%q: tensor<8x32x1x128xbf16>, %k: tensor<8x8x?x128xbf16>, %v: tensor<8x8x?x128xbf16>, %m: tensor<8x1x1x?xi1>) -> tensor<8x32x1x128xbf16> {
  %o = nn.attention %q, %k, %v mask %m {scale = 0.08838834764831845 : f64} : tensor<8x32x1x128xbf16>, tensor<8x8x?x128xbf16>, tensor<8x8x?x128xbf16>, tensor<8x1x1x?xi1> -> tensor<8x32x1x128xbf16>
  func.return %o : tensor<8x32x1x128xbf16>
}
