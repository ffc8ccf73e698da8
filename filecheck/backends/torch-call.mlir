// RUN: fuse-opt %s | filecheck %s --check-prefix=IR
// RUN: fuse-opt %s --pipeline fuse | filecheck %s --check-prefix=FUSED
// RUN: fuse-opt %s --pipeline standard | filecheck %s --check-prefix=TILE
// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s --check-prefix=TRITON
// RUN: fuse-opt %s --pipeline standard | fuse-opt | filecheck %s --check-prefix=TILE

// An op without an nn lowering is kept as a call of its ATen op (as fuseopt.export
// writes it): it round-trips, nn-fuse leaves it out of every group (the relu after it is
// a kernel of its own), convert-nn-to-tile makes it a host-side tile.torch_call into a
// buffer per result, and the Triton host function calls torch.ops.aten.<op> and copies
// each result into its buffer.

// IR:        %e = nn.torch_call "aten.embedding.default"(%w, %ids) {call = "{'args':[{'operand':0},{'operand':1}],'kwargs':{}}"} : (tensor<64x32xf32>, tensor<1x8xi64>) -> tensor<1x8x32xf32>
// IR:        nn.torch_call "aten.sort.default"(%r) {call = "{'args':[{'operand':0},-1,true],'kwargs':{}}"} : (tensor<1x8x32xf32>) -> (tensor<1x8x32xf32>, tensor<1x8x32xi64>)

// FUSED:     nn.torch_call "aten.embedding.default"
// FUSED-NEXT: nn.fusion ins(%e : tensor<1x8x32xf32>)
// FUSED:     nn.relu
// FUSED:     nn.yield
// FUSED-NEXT: }
// FUSED-NEXT: nn.torch_call "aten.sort.default"

// TILE-LABEL: func.func @f(
// TILE:      tile.torch_call "aten.embedding.default"(%{{.*}}, %{{.*}}) into (%[[E:.*]]) {call = "{'args':[{'operand':0},{'operand':1}],'kwargs':{}}"} : (memref<64x32xf32>, memref<1x8xi64>) -> (memref<1x8x32xf32>)
// TILE:      tile.launch @fused_0_relu grid [{{.*}}] (%[[E]], %[[R:.*]]) :
// TILE:      tile.torch_call "aten.sort.default"(%[[R]]) into (%{{.*}}, %{{.*}})

// TRITON-LABEL: def f(
// TRITON:    called = (torch.ops.aten.embedding.default(in0, in1),)
// TRITON:    tmp.copy_(called[0].reshape((1, 8, 32)))
// TRITON:    launch_fused_0_relu(
// TRITON:    called_1 = torch.ops.aten.sort.default({{.*}}, -1, True)
// TRITON:    .copy_(called_1[0].reshape((1, 8, 32)))
// TRITON:    .copy_(called_1[1].reshape((1, 8, 32)))
func.func @f(%w: tensor<64x32xf32>, %ids: tensor<1x8xi64>) -> (tensor<1x8x32xf32>, tensor<1x8x32xi64>) {
  %e = nn.torch_call "aten.embedding.default"(%w, %ids) {call = "{'args':[{'operand':0},{'operand':1}],'kwargs':{}}"} : (tensor<64x32xf32>, tensor<1x8xi64>) -> tensor<1x8x32xf32>
  %r = nn.relu %e : tensor<1x8x32xf32>
  %s, %i = nn.torch_call "aten.sort.default"(%r) {call = "{'args':[{'operand':0},-1,true],'kwargs':{}}"} : (tensor<1x8x32xf32>) -> (tensor<1x8x32xf32>, tensor<1x8x32xi64>)
  func.return %s, %i : tensor<1x8x32xf32>, tensor<1x8x32xi64>
}
