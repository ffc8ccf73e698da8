// RUN: fuse-opt %s -p 'nn-decompose,canonicalize,cse,nn-fuse{route=kernel}' | fuse-opt --pipeline standard -t triton | filecheck %s
// (route=kernel: at this K=1024 shape the cost model sends the GEMM to the library, as
// measured on the H100; this test is about the generated matmul kernel)

// A linear layer (weight [out, in]) with bias and GELU: grouped program order, a K loop
// of tensor-core dots accumulating in f32 (`fuseopt_dot`), the weight tile read
// transposed by addressing, and the epilogue applied to the f32 accumulator (the bias
// widened to f32: nn-widen-intermediates), rounded to bf16 once before the store.
// CHECK:       def fuseopt_dot(a, b, acc):
// CHECK:       def [[K:fused_0_matmul_add_gelu]](in0_ptr, in1_ptr, in2_ptr, out0_ptr):
// CHECK-NEXT:      """Schedule matmul; block sizes [128, 128]."""
// CHECK-NEXT:      pid = tl.program_id(0)
// CHECK:           tl.minimum({{.*}}, 8)
// CHECK:           [[ACC0:c[_0-9]*]] = tl.full([128, 128], 0.0, tl.float32)
// CHECK-NEXT:      [[ACC:carried[_0-9]*]] = [[ACC0]]
// CHECK-NEXT:      for [[KK:k]] in range(0, 1024, 64):
// CHECK:               [[A:x[_0-9]*]] = tl.load(in0_ptr + {{.*}}[:, None] * 1024 + {{.*}}[None, :])
// CHECK:               [[B:x_t[_0-9]*]] = tl.load(in1_ptr + {{.*}}[None, :] * 1024 + {{.*}}[:, None])
// CHECK-NEXT:          [[D:acc[_0-9]*]] = fuseopt_dot([[A]], [[B]], [[ACC]])
// CHECK-NEXT:          [[ACC]] = [[D]]
// CHECK:           [[BW:cast[_0-9]*]] = fuseopt_widen_bf16(
// CHECK-NEXT:      [[S:add[_0-9]*]] = [[ACC]] + [[BW]]
// CHECK-NEXT:      [[G:gelu[_0-9]*]] = 0.5 * [[S]] * (1.0 + tl.erf(
// CHECK-NEXT:      [[R:cast[_0-9]*]] = fuseopt_bf16([[G]])
// CHECK:           tl.store(out0_ptr + {{.*}}[:, None] * 4096 + {{.*}}[None, :], [[R]])
// CHECK:       def launch_[[K]](buf0, buf1, buf2, buf3, grid=(512,)):
// CHECK-NEXT:      """Launch [[K]] over `grid` programs."""
// CHECK-NEXT:      [[K]][grid](buf0, buf1, buf2, buf3, num_warps=8, num_stages=3)
func.func @linear_gelu(%x: tensor<2048x1024xbf16>, %w: tensor<4096x1024xbf16>, %b: tensor<4096xbf16>) -> tensor<2048x4096xbf16> {
  %y = nn.matmul %x, %w transpose_b : tensor<2048x1024xbf16>, tensor<4096x1024xbf16> -> tensor<2048x4096xbf16>
  %bb = nn.broadcast %b : tensor<4096xbf16> -> tensor<2048x4096xbf16>
  %z = nn.add %y, %bb : tensor<2048x4096xbf16>
  %g = nn.gelu %z : tensor<2048x4096xbf16>
  func.return %g : tensor<2048x4096xbf16>
}
