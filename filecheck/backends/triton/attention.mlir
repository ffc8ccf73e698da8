// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s

// One flash-attention kernel (a program per batch, head and 128 queries): the query tile
// loaded once, K read transposed by addressing, tensor-core dots (`fuseopt_dot`), scores
// in base-2 units with `fuseopt_exp2` (libdevice's exp2f), the online max/sum carried through two key loops (the
// second masked by key index against 120 and the causal diagonal), the output divided by
// the row sum and stored in bf16. Launched with 4 warps and 3 stages.
// CHECK:       def [[K:attention]](in0_ptr, in1_ptr, in2_ptr, out0_ptr):
// CHECK-NEXT:      """Schedule attention; block sizes [1, 1, 128, 64]."""
// CHECK-NEXT:      pid = tl.program_id(0)
// CHECK:           [[Q:x]] = tl.load(in0_ptr + {{.*}}, mask=(offs[:, None] < 100), other=0.0)
// CHECK:           for [[N:k]] in range(0, {{.*}}, 64):
// CHECK-NEXT:          offs_k = [[N]] + tl.arange(0, 64)
// CHECK-NEXT:          [[KT:x_t]] = tl.load(in1_ptr + {{.*}} + offs_k[None, :] * 64 + offs_1[:, None])
// CHECK:               acc = fuseopt_dot([[Q]], [[KT]], {{.*}})
// CHECK-NEXT:          mul = acc * 0.18033688011112042
// CHECK:               fuseopt_exp2(
// CHECK:               fuseopt_exp2(
// CHECK:               [[P:cast]] = fuseopt_bf16(
// CHECK-NEXT:          fuseopt_dot([[P]], {{.*}})
// CHECK:           for {{.*}} in range({{.*}}, {{.*}}, 64):
// CHECK:               cond{{.*}} = bcast{{.*}} < 120
// CHECK:               cond{{.*}} = bcast{{.*}} <= bcast
// CHECK:           tl.store(out0_ptr + {{.*}}, mask=(offs[:, None] < 100))
// CHECK:       def launch_attention({{.*}}grid=(8,)):
// CHECK:           [[K]][grid]({{.*}}, num_warps=4, num_stages=3)
func.func @main(%q: tensor<2x4x100x64xbf16>, %k: tensor<2x2x120x64xbf16>, %v: tensor<2x2x120x64xbf16>) -> tensor<2x4x100x64xbf16> {
  %o = nn.attention %q, %k, %v causal {scale = 0.125 : f64} : tensor<2x4x100x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x2x120x64xbf16> -> tensor<2x4x100x64xbf16>
  func.return %o : tensor<2x4x100x64xbf16>
}
