// A kernel over buffers of dynamic size takes its sizes as unspecialized arguments; what
// generalize-sizes knows of them (`size_multiples`: here every size is 320 * n) is told
// to Triton by passing each size in units of 16 (what Triton assumes of a size it
// specializes) and multiplying back, so masked accesses stay vectorized; the host
// passes `shape // 16`.
// RUN: fuse-opt %s --split-input-file --pipeline standard -t triton | filecheck %s

// CHECK:      @triton.jit(do_not_specialize=['in0_n0_div16', 'in1_n0_div16', 'out0_n0_div16'])
// CHECK-NEXT: def fused_0_silu_mul(in0_ptr, in1_ptr, out0_ptr, in0_n0_div16, in1_n0_div16, out0_n0_div16):
// CHECK-NEXT:     """Schedule pointwise; block sizes [1024]."""
// CHECK-NEXT:     in0_n0 = in0_n0_div16.to(tl.int64) * 16
// CHECK-NEXT:     in1_n0 = in1_n0_div16.to(tl.int64) * 16
// CHECK-NEXT:     out0_n0 = out0_n0_div16.to(tl.int64) * 16
// CHECK:      launch_fused_0_silu_mul({{.*}}.shape[0] // 16, {{.*}}.shape[0] // 16, {{.*}}.shape[0] // 16, grid=
func.func @pointwise(%x: tensor<?x320xbf16>, %y: tensor<?x320xbf16>) -> tensor<?x320xbf16> {
  %s = nn.silu %x : tensor<?x320xbf16>
  %m = nn.mul %s, %y : tensor<?x320xbf16>
  func.return %m : tensor<?x320xbf16>
}

// -----

// A size that is the size itself (rows of a row kernel) is a multiple of nothing: passed whole.
// RUN: fuse-opt %s --split-input-file --pipeline standard -t triton | filecheck %s --check-prefix=ROWS
// ROWS-LABEL: def fused_0_cast_mul_mean_add(
// ROWS-NOT:   _div
// ROWS:       tl.store
func.func @rows(%x: tensor<?x320xbf16>, %w: tensor<320xbf16>) -> tensor<?x320xbf16> {
  %n = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<?x320xbf16>, tensor<320xbf16> -> tensor<?x320xbf16>
  func.return %n : tensor<?x320xbf16>
}
