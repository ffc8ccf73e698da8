// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s

// A pointwise chain with a broadcast bias: one 2-D kernel; the bf16 inputs are widened
// to f32 (nn-widen-intermediates), the math runs in f32 and the result is rounded once,
// to nearest even; sizes divide the blocks, so no load or store is masked.
// CHECK:       import triton.language as tl
// CHECK:       INTERPRETED = tl.constexpr(
// CHECK:       def fuseopt_bf16(x):
// CHECK:       def fuseopt_widen_bf16(x):
// CHECK:       @triton.jit
// CHECK-NEXT:  def [[K:fused_0_add_gelu]](in0_ptr, in1_ptr, out0_ptr):
// CHECK-NEXT:      """Schedule pointwise; block sizes [{{[0-9]+}}, {{[0-9]+}}]."""
// CHECK-NEXT:      pid = tl.program_id(0)
// CHECK:           [[X:x[_0-9]*]] = tl.load(in1_ptr + {{.*}}[:, None] * 256 + {{.*}}[None, :])
// CHECK-NEXT:      [[XW:cast[_0-9]*]] = fuseopt_widen_bf16([[X]])
// CHECK-NEXT:      [[B:x[_0-9]*]] = tl.load(in0_ptr + {{[a-z_0-9]+}})
// CHECK-NEXT:      [[BB:bcast[_0-9]*]] = tl.broadcast_to([[B]][None, :], [{{[0-9]+}}, {{[0-9]+}}])
// CHECK-NEXT:      [[BW:cast[_0-9]*]] = fuseopt_widen_bf16([[BB]])
// CHECK-NEXT:      [[A:add[_0-9]*]] = [[XW]] + [[BW]]
// CHECK-NEXT:      [[G:gelu[_0-9]*]] = 0.5 * [[A]] * (1.0 + tl.erf([[A]] * 0.7071067811865476))
// CHECK-NEXT:      [[R:cast[_0-9]*]] = fuseopt_bf16([[G]])
// CHECK-NEXT:      tl.store(out0_ptr + {{.*}}, [[R]])
// CHECK:       def launch_[[K]](buf0, buf1, buf2, grid=({{[0-9]+}},)):
// CHECK:           [[K]][grid](buf0, buf1, buf2, num_warps={{[0-9]+}}, num_stages=1)
// CHECK:       def gelu_bias(in0, in1, *, device):
// CHECK-NEXT:      """Run the host code: 1 launch(es); returns the outputs."""
// CHECK-NEXT:      empty = fuseopt_empty[device.type]
// CHECK-NEXT:      out0 = empty((64, 256), (256, 1), torch.bfloat16)
// CHECK-NEXT:      launch_[[K]](in1, in0, out0)
// CHECK-NEXT:      return (out0, )
func.func @gelu_bias(%x: tensor<64x256xbf16>, %b: tensor<256xbf16>) -> tensor<64x256xbf16> {
  %bb = nn.broadcast %b : tensor<256xbf16> -> tensor<64x256xbf16>
  %s = nn.add %x, %bb : tensor<64x256xbf16>
  %g = nn.gelu %s : tensor<64x256xbf16>
  func.return %g : tensor<64x256xbf16>
}
