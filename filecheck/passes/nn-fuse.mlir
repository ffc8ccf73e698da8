// RUN: fuse-opt %s --split-input-file -p nn-fuse | filecheck %s
// RUN: fuse-opt %s --split-input-file -p 'nn-fuse{max_recompute=0}' | filecheck %s --check-prefix=NORECOMPUTE
// RUN: fuse-opt %s --split-input-file -p 'nn-fuse{route=kernel}' | filecheck %s --check-prefix=FORCED
// RUN: fuse-opt %s --split-input-file -p 'nn-fuse{route=unfused}' | filecheck %s --check-prefix=BYPASS
// RUN: fuse-opt %s --split-input-file -p 'nn-fuse{report=true}' -o %t.mlir 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: fuse-opt %s --split-input-file -p 'nn-fuse{dot="%t.dot"}' -o %t.mlir && filecheck %s --check-prefix=DOT < %t.dot
// RUN: not fuse-opt %s --split-input-file -p 'nn-fuse{route=bogus}' 2>&1 | filecheck %s --check-prefix=BADROUTE
// BADROUTE: error: nn-fuse: unknown route 'bogus'
// REPORT-NOT: Traceback

// Rule: an elementwise chain with a broadcast, a cast and views the tiler indexes
// (slice and concat of whole parts, squeeze reshapes) becomes one pointwise group.
// CHECK-LABEL: func.func @pointwise_chain
// CHECK-NEXT:  %[[F:.*]] = nn.fusion ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x16xbf16> attributes {kernel_name = "fused_0_exp_add_neg_cast", kind = "pointwise", route = "kernel"} {
// CHECK:         nn.broadcast
// CHECK:         nn.slice
// CHECK:         nn.concat
// CHECK:         nn.reshape
// CHECK:         nn.cast
// CHECK:         nn.reshape
// CHECK:         nn.concat
// CHECK:         nn.yield %{{.*}} : tensor<4x16xbf16>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %[[F]]
// REPORT-LABEL: nn-fuse report for @pointwise_chain
// REPORT-NEXT:  group kind route ops read before written before read after written after kernels est. us
// REPORT-NEXT:  fused_0_exp_add_neg_cast pointwise kernel 10 736 640 160 128 6 -> 1 24.0 -> 6.0
// REPORT-NEXT:  total 10 736 640 160 128 6 -> 1 24.0 -> 6.0
// REPORT-NEXT:  HBM traffic saved: 79.1% (1376 -> 288 bytes); kernels: 6 -> 1
// REPORT-NEXT:  fused_0_exp_add_neg_cast: nn.exp, nn.broadcast, nn.add, nn.slice, nn.neg, nn.concat, nn.reshape, nn.cast, nn.reshape, nn.concat
func.func @pointwise_chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x16xbf16> {
  %e = nn.exp %x : tensor<4x8xf32>
  %bb = nn.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  %s = nn.add %e, %bb : tensor<4x8xf32>
  %h = nn.slice %s [0:4, 0:4] : tensor<4x8xf32> -> tensor<4x4xf32>
  %n = nn.neg %h : tensor<4x4xf32>
  %c = nn.concat %n, %h axis 1 : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x8xf32>
  %r = nn.reshape %c : tensor<4x8xf32> -> tensor<1x4x8xf32>
  %o = nn.cast %r : tensor<1x4x8xf32> -> tensor<1x4x8xbf16>
  %o2 = nn.reshape %o : tensor<1x4x8xbf16> -> tensor<4x8xbf16>
  %o3 = nn.concat %o2, %o2 axis 1 : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x16xbf16>
  func.return %o3 : tensor<4x16xbf16>
}

// -----

// Rule: a transpose inside a pointwise group is indexed by the tiler (a permuted load,
// tiles in the iteration order), so the chain stays one group.
// CHECK-LABEL: func.func @transpose_in_chain
// CHECK-NEXT:  nn.fusion ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) -> tensor<8x4xf32> attributes {kernel_name = "fused_0_exp_add_neg", kind = "pointwise"
// CHECK:         nn.transpose
// CHECK:         nn.yield
func.func @transpose_in_chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<8x4xf32> {
  %e = nn.exp %x : tensor<4x8xf32>
  %bb = nn.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  %s = nn.add %e, %bb : tensor<4x8xf32>
  %t = nn.transpose %s [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %n = nn.neg %t : tensor<8x4xf32>
  func.return %n : tensor<8x4xf32>
}

// -----

// Transposes join groups last: RoPE on a transposed q is one group, transpose included
// (merging the transpose first would have split the rotate-half slices off; the slices
// of the in-group transposed q are indexed as parts of the split dim, not recomputed
// side ops).
// CHECK-LABEL: func.func @rope_after_transpose
// CHECK-NEXT:  nn.fusion ins(%q, %cos, %sin : {{.*}}) -> tensor<1x4x6x8xf32> attributes {kernel_name = "fused_0_mul_neg_add", kind = "pointwise"
// CHECK-NEXT:  ^{{.*}}
// CHECK-NEXT:    nn.transpose
// CHECK:         nn.slice
// CHECK:         nn.concat
// CHECK:         nn.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return
func.func @rope_after_transpose(%q: tensor<1x6x4x8xf32>, %cos: tensor<1x1x6x8xf32>, %sin: tensor<1x1x6x8xf32>) -> tensor<1x4x6x8xf32> {
  %t = nn.transpose %q [0, 2, 1, 3] : tensor<1x6x4x8xf32> -> tensor<1x4x6x8xf32>
  %c = nn.broadcast %cos : tensor<1x1x6x8xf32> -> tensor<1x4x6x8xf32>
  %a = nn.mul %t, %c : tensor<1x4x6x8xf32>
  %x1 = nn.slice %t [0:1, 0:4, 0:6, 0:4] : tensor<1x4x6x8xf32> -> tensor<1x4x6x4xf32>
  %x2 = nn.slice %t [0:1, 0:4, 0:6, 4:8] : tensor<1x4x6x8xf32> -> tensor<1x4x6x4xf32>
  %n = nn.neg %x2 : tensor<1x4x6x4xf32>
  %r = nn.concat %n, %x1 axis 3 : tensor<1x4x6x4xf32>, tensor<1x4x6x4xf32> -> tensor<1x4x6x8xf32>
  %s = nn.broadcast %sin : tensor<1x1x6x8xf32> -> tensor<1x4x6x8xf32>
  %b = nn.mul %r, %s : tensor<1x4x6x8xf32>
  %o = nn.add %a, %b : tensor<1x4x6x8xf32>
  func.return %o : tensor<1x4x6x8xf32>
}

// -----

// Negative: a group must be one iteration space for the tiler, so that each fusion is
// one kernel. A strided slice is not indexed there: it stays outside, between two groups
// (cuts on two axes, or a regrouping reshape next to a broadcast, too).
// CHECK-LABEL: func.func @strided_slice_splits_chain
// CHECK-NEXT:  %[[A:.*]] = nn.fusion ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> attributes {kernel_name = "fused_0_exp_add", kind = "pointwise"
// CHECK:         nn.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  %[[T:.*]] = nn.slice %[[A]] [0:4, 0:8:2]
// CHECK-NEXT:  nn.fusion ins(%[[T]] : tensor<4x4xf32>) -> tensor<4x4xf32> attributes {kernel_name = "fused_1_neg", kind = "pointwise"
func.func @strided_slice_splits_chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x4xf32> {
  %e = nn.exp %x : tensor<4x8xf32>
  %bb = nn.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  %s = nn.add %e, %bb : tensor<4x8xf32>
  %t = nn.slice %s [0:4, 0:8:2] : tensor<4x8xf32> -> tensor<4x4xf32>
  %n = nn.neg %t : tensor<4x4xf32>
  func.return %n : tensor<4x4xf32>
}

// -----

// Rule: a reduction with its prologue and epilogue; two reductions over the same rows
// (softmax: max and sum) share one reduction group.
// CHECK-LABEL: func.func @softmax_rows
// CHECK-NEXT:  nn.fusion ins(%x : tensor<4x8xbf16>) -> tensor<4x8xbf16> attributes {kernel_name = "fused_0_cast_reduce_max_sub_exp", kind = "reduction", route = "kernel"}
// CHECK:         nn.reduce_max
// CHECK:         nn.sum
// CHECK:         nn.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return
// REPORT-LABEL: nn-fuse report for @softmax_rows
// REPORT-NEXT:  group
// REPORT-NEXT:  fused_0_cast_reduce_max_sub_exp reduction kernel 9 {{[0-9]+}} {{[0-9]+}} 64 64 7 -> 1
func.func @softmax_rows(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %xf = nn.cast %x : tensor<4x8xbf16> -> tensor<4x8xf32>
  %m = nn.reduce_max %xf [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %mb = nn.broadcast %m : tensor<4x1xf32> -> tensor<4x8xf32>
  %d = nn.sub %xf, %mb : tensor<4x8xf32>
  %e = nn.exp %d : tensor<4x8xf32>
  %s = nn.sum %e [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %sb = nn.broadcast %s : tensor<4x1xf32> -> tensor<4x8xf32>
  %y = nn.div %e, %sb : tensor<4x8xf32>
  %o = nn.cast %y : tensor<4x8xf32> -> tensor<4x8xbf16>
  func.return %o : tensor<4x8xbf16>
}

// -----

// Rule: fused residual add + rms_norm with both outputs (multi-output group); the
// weight cast before its broadcast is recomputed per row (bounded by max_recompute:
// with max_recompute=0 it stays out, in a group of its own).
// CHECK-LABEL: func.func @residual_rmsnorm
// CHECK-NEXT:  %[[H:[^,]*]], %[[O:[^ ]*]] = nn.fusion ins(%x, %r, %w : tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<8xbf16>) -> (tensor<2x8xbf16>, tensor<2x8xbf16>) attributes {kernel_name = "fused_0_add_cast_mul_mean", kind = "reduction", route = "kernel"}
// CHECK:         nn.yield %{{.*}}, %{{.*}} : tensor<2x8xbf16>, tensor<2x8xbf16>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %[[O]], %[[H]]
// NORECOMPUTE-LABEL: func.func @residual_rmsnorm
// NORECOMPUTE-NEXT:  %[[WF:.*]] = nn.fusion ins(%w : tensor<8xbf16>) -> tensor<8xf32> attributes {kernel_name = "fused_0_cast", kind = "pointwise"
// NORECOMPUTE:       nn.fusion ins(%x, %r, %[[WF]] : tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<8xf32>) -> (tensor<2x8xbf16>, tensor<2x8xbf16>) attributes {kernel_name = "fused_1_add_cast_mul_mean", kind = "reduction"
func.func @residual_rmsnorm(%x: tensor<2x8xbf16>, %r: tensor<2x8xbf16>, %w: tensor<8xbf16>) -> (tensor<2x8xbf16>, tensor<2x8xbf16>) {
  %h = nn.add %x, %r : tensor<2x8xbf16>
  %hf = nn.cast %h : tensor<2x8xbf16> -> tensor<2x8xf32>
  %sq = nn.mul %hf, %hf : tensor<2x8xf32>
  %ms = nn.mean %sq [1] keepdim : tensor<2x8xf32> -> tensor<2x1xf32>
  %eps = nn.constant 1.0e-06 : tensor<2x1xf32>
  %v = nn.add %ms, %eps : tensor<2x1xf32>
  %rs = nn.rsqrt %v : tensor<2x1xf32>
  %rb = nn.broadcast %rs : tensor<2x1xf32> -> tensor<2x8xf32>
  %n = nn.mul %hf, %rb : tensor<2x8xf32>
  %wf = nn.cast %w : tensor<8xbf16> -> tensor<8xf32>
  %wb = nn.broadcast %wf : tensor<8xf32> -> tensor<2x8xf32>
  %y = nn.mul %n, %wb : tensor<2x8xf32>
  %o = nn.cast %y : tensor<2x8xf32> -> tensor<2x8xbf16>
  func.return %o, %h : tensor<2x8xbf16>, tensor<2x8xbf16>
}

// -----

// Rule: a reduction claims its cheap prologue (cast, x * x) before a matmul epilogue can:
// the o-projection's group ends at the residual add and writes h once; the rms_norm
// group reads h (not h, f32(h) and h * h).
// CHECK-LABEL: func.func @matmul_residual_rmsnorm
// CHECK-NEXT:  %[[H:.*]] = nn.fusion ins(%a, %wo, %x : tensor<4x16xbf16>, tensor<8x16xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16> attributes {kernel_name = "fused_0_matmul_add", kind = "matmul", route = "kernel"}
// CHECK:       %[[O:.*]] = nn.fusion ins(%[[H]], %w : tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16> attributes {kernel_name = "fused_1_cast_mul_mean_add", kind = "reduction", route = "kernel"}
// CHECK:       func.return %[[O]], %[[H]]
// When the GEMM is left to the library (bypassed), its epilogue is free again: the
// residual add joins the rms_norm group, which then has both outputs.
// BYPASS-LABEL: func.func @matmul_residual_rmsnorm
// BYPASS-NEXT:  %[[MM:.*]] = nn.matmul %a, %wo transpose_b
// BYPASS-NEXT:  %[[H:[^,]*]], %[[O:[^ ]*]] = nn.fusion ins(%x, %[[MM]], %w : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) attributes {kernel_name = "fused_0_add_cast_mul_mean", kind = "reduction", route = "kernel"}
// BYPASS:       func.return %[[O]], %[[H]]
func.func @matmul_residual_rmsnorm(%a: tensor<4x16xbf16>, %wo: tensor<8x16xbf16>, %x: tensor<4x8xbf16>, %w: tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %o = nn.matmul %a, %wo transpose_b : tensor<4x16xbf16>, tensor<8x16xbf16> -> tensor<4x8xbf16>
  %h = nn.add %x, %o : tensor<4x8xbf16>
  %hf = nn.cast %h : tensor<4x8xbf16> -> tensor<4x8xf32>
  %sq = nn.mul %hf, %hf : tensor<4x8xf32>
  %ms = nn.mean %sq [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %eps = nn.constant 1.0e-06 : tensor<4x1xf32>
  %v = nn.add %ms, %eps : tensor<4x1xf32>
  %rs = nn.rsqrt %v : tensor<4x1xf32>
  %rb = nn.broadcast %rs : tensor<4x1xf32> -> tensor<4x8xf32>
  %n = nn.mul %hf, %rb : tensor<4x8xf32>
  %wf = nn.cast %w : tensor<8xbf16> -> tensor<8xf32>
  %wb = nn.broadcast %wf : tensor<8xf32> -> tensor<4x8xf32>
  %y = nn.mul %n, %wb : tensor<4x8xf32>
  %out = nn.cast %y : tensor<4x8xf32> -> tensor<4x8xbf16>
  func.return %out, %h : tensor<4x8xbf16>, tensor<4x8xbf16>
}

// -----

// Rule: layer_norm's mean and variance (two reductions over the same rows), one group.
// CHECK-LABEL: func.func @layernorm_rows
// CHECK-NEXT:  nn.fusion ins(%x, %w, %b : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32> attributes {kernel_name = "fused_0_mean_sub_mul_add", kind = "reduction", route = "kernel"}
// CHECK:         nn.constant 1.000000e-05 : tensor<4x1xf32>
// CHECK:         nn.mean
// CHECK:         nn.mean
// CHECK:         nn.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return
func.func @layernorm_rows(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %m = nn.mean %x [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %mb = nn.broadcast %m : tensor<4x1xf32> -> tensor<4x8xf32>
  %c = nn.sub %x, %mb : tensor<4x8xf32>
  %sq = nn.mul %c, %c : tensor<4x8xf32>
  %var = nn.mean %sq [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %eps = nn.constant 1.0e-05 : tensor<4x1xf32>
  %ve = nn.add %var, %eps : tensor<4x1xf32>
  %rs = nn.rsqrt %ve : tensor<4x1xf32>
  %rb = nn.broadcast %rs : tensor<4x1xf32> -> tensor<4x8xf32>
  %n = nn.mul %c, %rb : tensor<4x8xf32>
  %wb = nn.broadcast %w : tensor<8xf32> -> tensor<4x8xf32>
  %y = nn.mul %n, %wb : tensor<4x8xf32>
  %bb = nn.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  %z = nn.add %y, %bb : tensor<4x8xf32>
  func.return %z : tensor<4x8xf32>
}

// -----

// Rule: matmul + elementwise epilogue (bias, activation, scale, residual add) that
// reads other tensors: one matmul group with a generated kernel (tiny GEMM, several
// epilogue ops: one launch beats three).
// CHECK-LABEL: func.func @matmul_epilogue
// CHECK-NEXT:  nn.fusion ins(%x, %w, %b, %res : tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32> attributes {kernel_name = "fused_0_matmul_add_gelu_mul", kind = "matmul", route = "kernel"}
// CHECK:         nn.matmul
// CHECK:         nn.gelu
// CHECK:         nn.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return
func.func @matmul_epilogue(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>, %res: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %mm = nn.matmul %x, %w transpose_b : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %bb = nn.broadcast %b : tensor<16xf32> -> tensor<4x16xf32>
  %a = nn.add %mm, %bb : tensor<4x16xf32>
  %g = nn.gelu %a : tensor<4x16xf32>
  %half = nn.constant 0.5 : tensor<4x16xf32>
  %s = nn.mul %g, %half : tensor<4x16xf32>
  %o = nn.add %s, %res : tensor<4x16xf32>
  func.return %o : tensor<4x16xf32>
}

// -----

// Rule: two matmuls sharing their A operand and meeting in an elementwise op (the gated
// MLP's silu(x @ Wg) * (x @ Wu)) are one group; the down projection (matmul into matmul)
// is not, and alone it has nothing to fuse, so it stays an eager library call.
// CHECK-LABEL: func.func @gated_mlp
// CHECK-NEXT:  %[[P:.*]] = nn.fusion ins(%x, %wg, %wu : tensor<4x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>) -> tensor<4x12xf32> attributes {kernel_name = "fused_0_matmul_silu_mul", kind = "matmul", route = "kernel"}
// CHECK:         nn.matmul
// CHECK:         nn.matmul
// CHECK:         nn.silu
// CHECK:         nn.mul
// CHECK:         nn.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  %[[D:.*]] = nn.matmul %[[P]], %wd transpose_b
// CHECK-NEXT:  func.return %[[D]]
// FORCED-LABEL: func.func @gated_mlp
// FORCED:       kernel_name = "fused_0_matmul_silu_mul", kind = "matmul", route = "kernel"
// FORCED:       kernel_name = "fused_1_matmul", kind = "matmul", route = "kernel"
func.func @gated_mlp(%x: tensor<4x8xf32>, %wg: tensor<12x8xf32>, %wu: tensor<12x8xf32>, %wd: tensor<8x12xf32>) -> tensor<4x8xf32> {
  %g = nn.matmul %x, %wg transpose_b : tensor<4x8xf32>, tensor<12x8xf32> -> tensor<4x12xf32>
  %u = nn.matmul %x, %wu transpose_b : tensor<4x8xf32>, tensor<12x8xf32> -> tensor<4x12xf32>
  %s = nn.silu %g : tensor<4x12xf32>
  %p = nn.mul %s, %u : tensor<4x12xf32>
  %d = nn.matmul %p, %wd transpose_b : tensor<4x12xf32>, tensor<8x12xf32> -> tensor<4x8xf32>
  func.return %d : tensor<4x8xf32>
}

// -----

// Rule: a value needed inside and outside a group is produced once, as a second result
// of the group (multi-output), not recomputed.
// CHECK-LABEL: func.func @multi_output
// CHECK-NEXT:  %[[E:[^,]*]], %[[T:[^ ]*]] = nn.fusion ins(%x : tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-COUNT-1: nn.exp
// CHECK:         nn.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  %[[S:.*]] = nn.softmax %[[E]] axis 1
// CHECK-NEXT:  func.return %[[T]], %[[S]]
func.func @multi_output(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = nn.exp %x : tensor<4x8xf32>
  %t = nn.tanh %e : tensor<4x8xf32>
  %s = nn.softmax %e axis 1 : tensor<4x8xf32>
  func.return %t, %s : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Negative: two reductions over different axes do not share a group.
// CHECK-LABEL: func.func @different_axes
// CHECK-NEXT:  nn.fusion {{.*}} kind = "reduction"
// CHECK:         nn.sum %{{.*}} [1] keepdim
// CHECK-NOT:     nn.sum
// CHECK:       nn.fusion {{.*}} kind = "reduction"
// CHECK:         nn.sum %{{.*}} [0] keepdim
func.func @different_axes(%x: tensor<4x8xf32>) -> tensor<1x4xf32> {
  %r = nn.sum %x [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %t = nn.reshape %r : tensor<4x1xf32> -> tensor<1x4xf32>
  %e = nn.exp %t : tensor<1x4xf32>
  %s = nn.sum %e [0] keepdim : tensor<1x4xf32> -> tensor<1x4xf32>
  func.return %s : tensor<1x4xf32>
}

// -----

// Negative: a transpose of a reduction's rows is not row-local, so it does not join the
// reduction group; it joins the pointwise consumer after it.
// CHECK-LABEL: func.func @transpose_after_reduction
// CHECK-NEXT:  %[[R:.*]] = nn.fusion ins(%x : tensor<4x8xf32>) -> tensor<4x8xf32> attributes {kernel_name = "fused_0_reduce_max_sub", kind = "reduction"
// CHECK:       nn.fusion ins(%[[R]] : tensor<4x8xf32>) -> tensor<8x4xf32> attributes {kernel_name = "fused_1_exp", kind = "pointwise"
// CHECK:         nn.transpose
func.func @transpose_after_reduction(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %m = nn.reduce_max %x [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %mb = nn.broadcast %m : tensor<4x1xf32> -> tensor<4x8xf32>
  %d = nn.sub %x, %mb : tensor<4x8xf32>
  %t = nn.transpose %d [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %e = nn.exp %t : tensor<8x4xf32>
  func.return %e : tensor<8x4xf32>
}

// -----

// Negative (cycle): %a and %b would fuse, but %b also needs the opaque softmax of %a;
// one group {a, b} would both feed and consume the softmax.
// CHECK-LABEL: func.func @no_cycle
// CHECK-NEXT:  %[[A:.*]] = nn.fusion ins(%x : tensor<4x8xf32>) -> tensor<4x8xf32> attributes {kernel_name = "fused_0_exp"
// CHECK:       %[[S:.*]] = nn.softmax %[[A]] axis 1
// CHECK-NEXT:  nn.fusion ins(%[[A]], %[[S]] : tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> attributes {kernel_name = "fused_1_add"
func.func @no_cycle(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = nn.exp %x : tensor<4x8xf32>
  %s = nn.softmax %a axis 1 : tensor<4x8xf32>
  %b = nn.add %a, %s : tensor<4x8xf32>
  func.return %b : tensor<4x8xf32>
}

// -----

// Negative: a pointwise group has one domain, so a value of another size that is also
// needed outside is not fused into its broadcast consumer (it is its own kernel).
// CHECK-LABEL: func.func @outputs_of_two_sizes
// CHECK-NEXT:  %[[E:.*]] = nn.fusion ins(%b : tensor<8xf32>) -> tensor<8xf32> attributes {kernel_name = "fused_0_exp"
// CHECK:       nn.fusion ins(%[[E]], %x : tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> attributes {kernel_name = "fused_1_add"
func.func @outputs_of_two_sizes(%b: tensor<8xf32>, %x: tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4x8xf32>) {
  %e = nn.exp %b : tensor<8xf32>
  %eb = nn.broadcast %e : tensor<8xf32> -> tensor<4x8xf32>
  %s = nn.add %eb, %x : tensor<4x8xf32>
  func.return %e, %s : tensor<8xf32>, tensor<4x8xf32>
}

// -----

// Routes. A tiny GEMM (M=128, 2 output tiles for 132 SMs) with a one-op epilogue is
// bypassed (left to eager: a generated kernel would run on 2 SMs, and an epilogue
// kernel after a library GEMM saves nothing over one eager op); a memory-bound GEMM is
// one generated kernel; a large, compute-bound GEMM is a library GEMM with its
// two-op epilogue fused into one kernel after it.
// CHECK-LABEL: func.func @routes
// CHECK-NEXT:  %[[T:.*]] = nn.matmul %x, %w
// CHECK-NEXT:  nn.add %[[T]], %r
// CHECK-NEXT:  nn.fusion {{.*}} attributes {kernel_name = "fused_0_matmul_relu", kind = "matmul", route = "kernel"}
// CHECK:       nn.fusion {{.*}} attributes {kernel_name = "fused_1_matmul_add_relu", kind = "matmul", route = "library_gemm"}
// CHECK:       func.return
// REPORT:       cost model: H100 SXM 80GB (nn-fuse's model, set by its options hbm_gbps, gemm_tflops, sm_count): 3000 GB/s HBM, 686 TFLOP/s 16-bit GEMM, 132 SMs
// REPORT-LABEL: nn-fuse report for @routes
// REPORT-NEXT:  group
// REPORT-NEXT:  fused_0_matmul_relu      matmul  kernel        2  42467328 67108864 8912896 33554432  2 -> 1
// REPORT-NEXT:  fused_1_matmul_add_relu  matmul  library_gemm  3  671088640 402653184 536870912 268435456  3 -> 2
// REPORT-NEXT:  library GEMMs            matmul  library       1  786432 65536 786432 65536  1 -> 1
// REPORT-NEXT:  unfused ops              -       per_op        1  131072 65536 131072 65536  1 -> 1
// REPORT-NEXT:  total                                          7  714473472 469893120 546701312 302120960  7 -> 5
// REPORT-NEXT:  HBM traffic saved: 28.3% (1184366592 -> 848822272 bytes); kernels: 7 -> 5
// REPORT:       routes:
// REPORT-NEXT:    kernel        one generated kernel per group, a GEMM in the group included
// REPORT-NEXT:    library_gemm  GEMM by a GEMM library, then one generated kernel for the epilogue
// REPORT-NEXT:    library       GEMM alone by a GEMM library; nn-fuse left it unfused (fusing would not pay)
// REPORT-NEXT:    per_op        an op outside every group, one generated kernel each
func.func @routes(%x: tensor<128x1024xbf16>, %w: tensor<1024x256xbf16>, %r: tensor<128x256xbf16>, %y: tensor<16384x256xbf16>, %w2: tensor<256x1024xbf16>, %z: tensor<8192x8192xbf16>, %w3: tensor<8192x8192xbf16>) -> (tensor<128x256xbf16>, tensor<16384x1024xbf16>, tensor<8192x8192xbf16>) {
  %t = nn.matmul %x, %w : tensor<128x1024xbf16>, tensor<1024x256xbf16> -> tensor<128x256xbf16>
  %o = nn.add %t, %r : tensor<128x256xbf16>
  %m = nn.matmul %y, %w2 : tensor<16384x256xbf16>, tensor<256x1024xbf16> -> tensor<16384x1024xbf16>
  %mr = nn.relu %m : tensor<16384x1024xbf16>
  %l = nn.matmul %z, %w3 : tensor<8192x8192xbf16>, tensor<8192x8192xbf16> -> tensor<8192x8192xbf16>
  %la = nn.add %l, %z : tensor<8192x8192xbf16>
  %lr = nn.relu %la : tensor<8192x8192xbf16>
  func.return %o, %mr, %lr : tensor<128x256xbf16>, tensor<16384x1024xbf16>, tensor<8192x8192xbf16>
}

// -----

// Negative: growth may pass through a group whose axes do not meet yet (the broadcast
// of RMSNorm's statistic before the multiply), but a final group must be complete:
// here the broadcast to a new axis of 3 never meets the 4x8 reduced rows, so the ops
// of that group are grouped again with full checks (mean alone; broadcast + cos).
// CHECK-LABEL: func.func @incomplete_group
// CHECK:       %[[M:.*]] = nn.fusion ins(%x : tensor<4x8xf32>) -> tensor<1x1xf32> attributes {kernel_name = "fused_1_mean", kind = "reduction"
// CHECK:       nn.fusion ins(%[[M]] : tensor<1x1xf32>) -> tensor<3x1xf32> attributes {kernel_name = "fused_2_cos", kind = "pointwise"
// CHECK-NEXT:  ^{{.*}}(%{{.*}}: tensor<1x1xf32>):
// CHECK-NEXT:    nn.broadcast
// CHECK-NEXT:    nn.cos
func.func @incomplete_group(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<3x1xf32>) {
  %e = nn.exp %y : tensor<4x8xf32>
  %m = nn.mean %x [0, 1] keepdim : tensor<4x8xf32> -> tensor<1x1xf32>
  %b = nn.broadcast %m : tensor<1x1xf32> -> tensor<3x1xf32>
  %c = nn.cos %b : tensor<3x1xf32>
  func.return %e, %c : tensor<4x8xf32>, tensor<3x1xf32>
}

// -----

// A dense constant is data: it is not cloned into the group but read as an operand
// (convert-nn-to-tile stores it into a buffer once); a splat is cloned in, and so is an
// index vector (start + step * i along one axis), which kernels compute (tile.iota).
// CHECK-LABEL: func.func @dense_constant
// CHECK-NEXT:  %[[C:.*]] = nn.constant dense<[1.000000e+00, 5.000000e+00, 2.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK-NEXT:  nn.fusion ins(%x, %[[C]] : tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> attributes {kernel_name = "fused_0_add_mul", kind = "pointwise"
// CHECK-NEXT:  ^{{.*}}(%{{.*}}: tensor<4xf32>, %{{.*}}: tensor<4xf32>):
// CHECK-NEXT:    nn.constant 3.000000e+00 : tensor<4xf32>
func.func @dense_constant(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = nn.constant dense<[1.0, 5.0, 2.0, 4.0]> : tensor<4xf32>
  %three = nn.constant 3.0 : tensor<4xf32>
  %y = nn.add %x, %c : tensor<4xf32>
  %z = nn.mul %y, %three : tensor<4xf32>
  func.return %z : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @index_vector
// CHECK-NEXT:  nn.fusion ins(%x : tensor<4x3xi64>) -> tensor<4x3xi1>
// CHECK-NEXT:  ^{{.*}}(%{{.*}}: tensor<4x3xi64>):
// CHECK-NEXT:    nn.constant dense<[10, 7, 4]> : tensor<3xi64>
func.func @index_vector(%x: tensor<4x3xi64>) -> tensor<4x3xi1> {
  %c = nn.constant dense<[10, 7, 4]> : tensor<3xi64>
  %r = nn.reshape %c : tensor<3xi64> -> tensor<1x3xi64>
  %b = nn.broadcast %r : tensor<1x3xi64> -> tensor<4x3xi64>
  %m = nn.compare lt, %x, %b : tensor<4x3xi64>
  func.return %m : tensor<4x3xi1>
}

// -----

// A reshape of a function argument is a view of its buffer: it stays outside every
// group (convert-nn-to-tile makes it a host tile.view), so the loss's elementwise
// prologue, split into rows by nn-split-reductions, fuses into the row reduction (inside
// the group, the regrouping reshape was indexing the tiler could not tile there, and the
// prologue ran as a kernel of its own writing an f32 temporary).
// CHECK-LABEL: func.func @split_loss
// CHECK-NEXT:  %[[A:.*]] = nn.reshape %a : tensor<65536xbf16> -> tensor<64x1024xbf16>
// CHECK-NEXT:  %[[B:.*]] = nn.reshape %b : tensor<65536xbf16> -> tensor<64x1024xbf16>
// CHECK-NEXT:  nn.fusion ins(%[[A]], %[[B]] : tensor<64x1024xbf16>, tensor<64x1024xbf16>) -> tensor<64xf32> attributes {kernel_name = "fused_{{[0-9]+}}_cast_sub_mul_sum", kind = "reduction"
// CHECK-NOT:   nn.reshape
// CHECK:       nn.yield
func.func @split_loss(%a: tensor<65536xbf16>, %b: tensor<65536xbf16>) -> tensor<64xf32> {
  %ra = nn.reshape %a : tensor<65536xbf16> -> tensor<64x1024xbf16>
  %ca = nn.cast %ra : tensor<64x1024xbf16> -> tensor<64x1024xf32>
  %rb = nn.reshape %b : tensor<65536xbf16> -> tensor<64x1024xbf16>
  %cb = nn.cast %rb : tensor<64x1024xbf16> -> tensor<64x1024xf32>
  %d = nn.sub %ca, %cb : tensor<64x1024xf32>
  %s = nn.mul %d, %d : tensor<64x1024xf32>
  %r = nn.sum %s [1] : tensor<64x1024xf32> -> tensor<64xf32>
  func.return %r : tensor<64xf32>
}

// -----

// A returned reshape of an argument is copied into its output anyway: it may join the
// group that reads it, one kernel writing both outputs.
// CHECK-LABEL: func.func @returned_reshape
// CHECK-NEXT:  %{{.*}}, %{{.*}} = nn.fusion ins(%x : tensor<4x8xf32>) -> (tensor<32xf32>, tensor<32xf32>)
func.func @returned_reshape(%x: tensor<4x8xf32>) -> (tensor<32xf32>, tensor<32xf32>) {
  %y = nn.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
  %c = nn.constant 2.0 : tensor<32xf32>
  %z = nn.mul %y, %c : tensor<32xf32>
  func.return %y, %z : tensor<32xf32>, tensor<32xf32>
}

// -----

// A widening cast of an argument read by two groups of different shapes (GroupNorm's
// statistics through a reshape, its epilogue in the input's shape) is copied per user
// (nn_fuse/rematerialize.py): each group widens the bf16 argument itself, and no
// kernel writes the f32 copy. The copy under the reshape moves below it: the reshape of
// the argument is a host view, and the cast joins the reduction.
// CHECK-LABEL: func.func @argument_cast_per_user
// CHECK-NOT:   kernel_name = "fused_{{[0-9]+}}_cast"
// CHECK:       nn.fusion ins(%x, %s : tensor<2x8x16xbf16>, tensor<2x8x1xf32>) -> tensor<2x8x16xf32> attributes {kernel_name = "fused_0_cast_mul"
// CHECK:         nn.cast %{{.*}} : tensor<2x8x16xbf16> -> tensor<2x8x16xf32>
// CHECK:       %[[V:.*]] = nn.reshape %x : tensor<2x8x16xbf16> -> tensor<2x2x64xbf16>
// CHECK-NEXT:  nn.fusion ins(%[[V]] : tensor<2x2x64xbf16>) -> tensor<2x2xf32> attributes {kernel_name = "fused_1_cast_sum"
// CHECK:         nn.cast %{{.*}} : tensor<2x2x64xbf16> -> tensor<2x2x64xf32>
// CHECK-NEXT:    nn.sum
func.func @argument_cast_per_user(%x: tensor<2x8x16xbf16>, %s: tensor<2x8x1xf32>) -> (tensor<2x2xf32>, tensor<2x8x16xf32>) {
  %c = nn.cast %x : tensor<2x8x16xbf16> -> tensor<2x8x16xf32>
  %g = nn.reshape %c : tensor<2x8x16xf32> -> tensor<2x2x64xf32>
  %m = nn.sum %g [2] : tensor<2x2x64xf32> -> tensor<2x2xf32>
  %sb = nn.broadcast %s : tensor<2x8x1xf32> -> tensor<2x8x16xf32>
  %y = nn.mul %c, %sb : tensor<2x8x16xf32>
  func.return %m, %y : tensor<2x2xf32>, tensor<2x8x16xf32>
}

// -----

// BERT's output block (widths cut): a GEMM with its bias, reshaped from [B*S, H] to
// [B, S, H], a residual add, then a layer norm over H. Inside a group the reshape
// regroups dims, which the tiler cannot tie to the norm's rows, so grouped with the
// add it kept the add out of the norm (a kernel of its own). It reads a value computed
// outside its consumers' group (the GEMM's), so it stays a host view of that buffer
// and the add joins the norm: two kernels, not three.
// CHECK-LABEL: func.func @output_block
// CHECK:       nn.fusion
// CHECK:         nn.matmul
// CHECK:       nn.reshape %{{.*}} : tensor<32x64xf32> -> tensor<2x16x64xf32>
// CHECK:       nn.fusion
// CHECK:         nn.add
// CHECK:         nn.mean
// CHECK-NOT:   nn.fusion
// CHECK:       func.return
func.func @output_block(%x: tensor<32x64xf32>, %w: tensor<64x64xf32>, %b: tensor<64xf32>, %res: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  %0 = nn.matmul %x, %w transpose_b : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %1 = nn.broadcast %b : tensor<64xf32> -> tensor<32x64xf32>
  %2 = nn.add %0, %1 : tensor<32x64xf32>
  %3 = nn.reshape %2 : tensor<32x64xf32> -> tensor<2x16x64xf32>
  %4 = nn.add %3, %res : tensor<2x16x64xf32>
  %5 = nn.mean %4 [2] keepdim : tensor<2x16x64xf32> -> tensor<2x16x1xf32>
  %6 = nn.broadcast %5 : tensor<2x16x1xf32> -> tensor<2x16x64xf32>
  %7 = nn.sub %4, %6 : tensor<2x16x64xf32>
  %8 = nn.mul %7, %7 : tensor<2x16x64xf32>
  %9 = nn.mean %8 [2] keepdim : tensor<2x16x64xf32> -> tensor<2x16x1xf32>
  %10 = nn.rsqrt %9 : tensor<2x16x1xf32>
  %11 = nn.broadcast %10 : tensor<2x16x1xf32> -> tensor<2x16x64xf32>
  %12 = nn.mul %7, %11 : tensor<2x16x64xf32>
  func.return %12 : tensor<2x16x64xf32>
}

// Reductions of two different inputs over the same rows (nothing inside the group ties
// their reduced axes) are one kernel: the second stage of two split sums, or of a split
// variance's chunk means and M2s, read together. A horizontal fusion.
// CHECK-LABEL: func.func @sibling_reductions
// CHECK:         nn.fusion ins(%a, %b : tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64xf32> attributes {kernel_name = "fused_{{[0-9]+}}_sum_div", kind = "reduction"
// CHECK:           nn.sum
// CHECK:           nn.sum
// CHECK:           nn.div
// CHECK-NOT:     nn.fusion
func.func @sibling_reductions(%a: tensor<64x16xf32>, %b: tensor<64x16xf32>) -> tensor<64xf32> {
  %sa = nn.sum %a [1] : tensor<64x16xf32> -> tensor<64xf32>
  %sb = nn.sum %b [1] : tensor<64x16xf32> -> tensor<64xf32>
  %r = nn.div %sa, %sb : tensor<64xf32>
  func.return %r : tensor<64xf32>
}

// Sibling reductions whose union nn-fuse's incremental summary cannot judge (it does
// not model the tie of their reduced axes) are decided on the whole union: with a
// broadcast after them that no group can hold (strict retry), and with a transposed
// input that stays outside (nn-fuse's verify mode once disagreed on both).
// CHECK-LABEL: func.func @sibling_reductions_then_broadcast
// CHECK:         nn.fusion ins(%a, %b : tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x1xf32>
// CHECK:           nn.sum
// CHECK:           nn.sum
// CHECK:           nn.div
// CHECK:         nn.broadcast
func.func @sibling_reductions_then_broadcast(%a: tensor<64x16xf32>, %b: tensor<64x16xf32>) -> tensor<64x16xf32> {
  %sa = nn.sum %a [1] keepdim : tensor<64x16xf32> -> tensor<64x1xf32>
  %sb = nn.sum %b [1] keepdim : tensor<64x16xf32> -> tensor<64x1xf32>
  %r = nn.div %sa, %sb : tensor<64x1xf32>
  %o = nn.broadcast %r : tensor<64x1xf32> -> tensor<64x16xf32>
  func.return %o : tensor<64x16xf32>
}

// -----

// CHECK-LABEL: func.func @sibling_reductions_of_a_transpose
// CHECK:         %[[Y:.*]] = nn.transpose %w [1, 0]
// CHECK:         nn.fusion ins(%x, %[[Y]] : tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16xf32>
func.func @sibling_reductions_of_a_transpose(%x: tensor<16x16xf32>, %w: tensor<16x16xf32>) -> tensor<16xf32> {
  %y = nn.transpose %w [1, 0] : tensor<16x16xf32> -> tensor<16x16xf32>
  %s1 = nn.sum %x [1] : tensor<16x16xf32> -> tensor<16xf32>
  %s2 = nn.sum %y [1] : tensor<16x16xf32> -> tensor<16xf32>
  %r = nn.add %s1, %s2 : tensor<16xf32>
  func.return %r : tensor<16xf32>
}

// -----

// Rule: a reduction's per-row values keep their rows through reshapes that drop unit
// dims, whatever the rank: [1, 1, 8] -> [1, 8] -> [8] after a reduction over the first
// axis of [16, 1, 8] (stage two of a split column reduction) are all in its domain, so
// the epilogue (a scale, a cast) fuses in.
// CHECK-LABEL: func.func @row_values_of_any_rank
// CHECK-NEXT:  %[[F:.*]] = nn.fusion ins(%x : tensor<16x1x8xf32>) -> tensor<8xbf16> attributes {kernel_name = "fused_0_sum_mul_cast", kind = "reduction", route = "kernel"} {
// CHECK:         nn.sum
// CHECK:         nn.reshape {{.*}} -> tensor<1x8xf32>
// CHECK:         nn.reshape {{.*}} -> tensor<8xf32>
// CHECK:         nn.cast
// CHECK:         nn.yield %{{.*}} : tensor<8xbf16>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %[[F]]
func.func @row_values_of_any_rank(%x: tensor<16x1x8xf32>) -> tensor<8xbf16> {
  %s = nn.sum %x [0] keepdim : tensor<16x1x8xf32> -> tensor<1x1x8xf32>
  %r = nn.reshape %s : tensor<1x1x8xf32> -> tensor<1x8xf32>
  %c = nn.constant 2.0 : tensor<1x8xf32>
  %m = nn.mul %r, %c : tensor<1x8xf32>
  %q = nn.reshape %m : tensor<1x8xf32> -> tensor<8xf32>
  %o = nn.cast %q : tensor<8xf32> -> tensor<8xbf16>
  func.return %o : tensor<8xbf16>
}

// -----

// Rule: a group of views alone is left to convert-nn-to-tile op by op (a reshape is a
// view, a lone transpose one copy kernel), but two copying views in a chain are one
// kernel: Llama's value heads transposed, then repeated for grouped-query attention,
// become `fused_0_transpose_broadcast` (one read of the source, one write) instead of
// a transpose kernel and a broadcast kernel.
// CHECK-LABEL: func.func @value_heads_repeated
// CHECK-NEXT:  %[[F:.*]] = nn.fusion ins(%v : tensor<1x16x2x8xbf16>) -> tensor<1x2x2x16x8xbf16> attributes {kernel_name = "fused_0_transpose_broadcast", kind = "pointwise", route = "kernel"} {
// CHECK:         nn.transpose
// CHECK:         nn.broadcast
// CHECK:         nn.yield
// CHECK:       %[[O:.*]] = nn.reshape %[[F]]
// CHECK-NEXT:  %[[T:.*]] = nn.transpose %v
// CHECK-NEXT:  func.return %[[O]], %[[T]] :
func.func @value_heads_repeated(%v: tensor<1x16x2x8xbf16>) -> (tensor<1x4x16x8xbf16>, tensor<1x2x16x8xbf16>) {
  %t = nn.transpose %v [0, 2, 1, 3] : tensor<1x16x2x8xbf16> -> tensor<1x2x16x8xbf16>
  %r = nn.reshape %t : tensor<1x2x16x8xbf16> -> tensor<1x2x1x16x8xbf16>
  %b = nn.broadcast %r : tensor<1x2x1x16x8xbf16> -> tensor<1x2x2x16x8xbf16>
  %o = nn.reshape %b : tensor<1x2x2x16x8xbf16> -> tensor<1x4x16x8xbf16>
  %k = nn.transpose %v [0, 2, 1, 3] : tensor<1x16x2x8xbf16> -> tensor<1x2x16x8xbf16>
  func.return %o, %k : tensor<1x4x16x8xbf16>, tensor<1x2x16x8xbf16>
}


// -----

// A lone view is left to eager (a strided view there); constants are cloned into the
// groups that use them. (The DOT file of --split-input-file holds this last case.)
// DOT:         digraph fusion {
// DOT:         subgraph cluster_func0 {
// DOT-NEXT:      label="@views_and_constants";
// DOT-NEXT:      [[X:n[0-9]+]] [label="%x", shape=ellipse];
// DOT-NEXT:      [[T:n[0-9]+]] [label="nn.transpose", shape=box];
// DOT-NEXT:      subgraph cluster_0_1 {
// DOT-NEXT:        label="fused_0_mul (pointwise, kernel)"; style=filled; fillcolor=lightblue;
// DOT-NEXT:        [[C:n[0-9]+]] [label="nn.constant", shape=box];
// DOT-NEXT:        [[M:n[0-9]+]] [label="nn.mul", shape=box];
// DOT-NEXT:      }
// DOT-NEXT:      [[R:n[0-9]+]] [label="func.return", shape=box];
// DOT-NEXT:    }
// DOT-NEXT:    [[X]] -> [[T]] [label="tensor<4x8xf32>"];
// DOT-NEXT:    [[X]] -> [[M]] [label="tensor<4x8xf32>"];
// DOT-NEXT:    [[C]] -> [[M]] [label="tensor<4x8xf32>"];
// DOT-NEXT:    [[T]] -> [[R]] [label="tensor<8x4xf32>"];
// DOT-NEXT:    [[M]] -> [[R]] [label="tensor<4x8xf32>"];
// DOT-NEXT:  }
// CHECK-LABEL: func.func @views_and_constants
// CHECK-NEXT:  %[[V:.*]] = nn.transpose %x [1, 0]
// CHECK-NEXT:  nn.fusion ins(%x : tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:  ^{{.*}}(%{{.*}}: tensor<4x8xf32>):
// CHECK-NEXT:    nn.constant 2.000000e+00 : tensor<4x8xf32>
// CHECK-NEXT:    nn.mul
// CHECK-NEXT:    nn.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %[[V]]
func.func @views_and_constants(%x: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<4x8xf32>) {
  %t = nn.transpose %x [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %c = nn.constant 2.0 : tensor<4x8xf32>
  %m = nn.mul %x, %c : tensor<4x8xf32>
  func.return %t, %m : tensor<8x4xf32>, tensor<4x8xf32>
}

