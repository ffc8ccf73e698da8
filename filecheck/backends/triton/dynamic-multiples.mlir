// A kernel over buffers of dynamic size takes its sizes as unspecialized arguments; what
// generalize-sizes knows of them (`size_multiples`: here every size is 320 * n) is told
// to Triton with `tl.multiple_of`, up to 16 (what Triton assumes of a size it
// specializes), so masked accesses stay vectorized.
// RUN: fuse-opt %s --split-input-file --pipeline standard -t triton | filecheck %s

// CHECK:      @triton.jit(do_not_specialize=['in0_n0', 'in1_n0', 'out0_n0'])
// CHECK-NEXT: def fused_0_silu_mul(in0_ptr, in1_ptr, out0_ptr, in0_n0, in1_n0, out0_n0):
// CHECK-NEXT:     """Schedule pointwise; block sizes [1024]."""
// CHECK-NEXT:     in0_n0 = tl.multiple_of(in0_n0, 16)
// CHECK-NEXT:     in1_n0 = tl.multiple_of(in1_n0, 16)
// CHECK-NEXT:     out0_n0 = tl.multiple_of(out0_n0, 16)
func.func @pointwise(%x: tensor<?x320xbf16>, %y: tensor<?x320xbf16>) -> tensor<?x320xbf16> {
  %s = nn.silu %x : tensor<?x320xbf16>
  %m = nn.mul %s, %y : tensor<?x320xbf16>
  func.return %m : tensor<?x320xbf16>
}

// -----

// A size that is the size itself (rows of a row kernel) is a multiple of nothing: no hint.
// RUN: fuse-opt %s --split-input-file --pipeline standard -t triton | filecheck %s --check-prefix=ROWS
// ROWS-LABEL: def fused_0_cast_mul_mean_add(
// ROWS-NOT:   tl.multiple_of
// ROWS:       tl.store
func.func @rows(%x: tensor<?x320xbf16>, %w: tensor<320xbf16>) -> tensor<?x320xbf16> {
  %n = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<?x320xbf16>, tensor<320xbf16> -> tensor<?x320xbf16>
  func.return %n : tensor<?x320xbf16>
}
