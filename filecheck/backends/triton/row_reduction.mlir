// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s

// Softmax over rows of 100 (not a power of two): the whole row stays in registers
// (one 128-wide block), masked by the row length; the max and the sum are `tl.reduce`
// with combine helpers; masked-out lanes read -inf for the max.
// CHECK:       def fuseopt_add(a, b):
// CHECK:       def fuseopt_max(a, b):
// CHECK:       @triton.jit
// CHECK-NEXT:  def [[K:fused_0_[a-z_]+]](in0_ptr, out0_ptr):
// CHECK-NEXT:      """Schedule row_reduction; block sizes [{{[0-9]+}}, 128]."""
// CHECK:           offs{{[_a-z0-9]*}} = tl.arange(0, 128)
// CHECK:           tl.load(in0_ptr + {{.*}} * 100 + {{.*}}, mask={{.*}} < 100){{.*}}, other=0.0)
// CHECK:           tl.reduce({{.*}}, 1, fuseopt_max)
// CHECK:           fuseopt_exp(
// CHECK:           tl.reduce({{.*}}, 1, fuseopt_add)
// CHECK:           tl.store(out0_ptr + {{.*}}, mask={{.*}} < 100){{.*}})
// CHECK:       def launch_[[K]](buf0, buf1, grid=({{[0-9]+}},)):
func.func @softmax(%x: tensor<64x100xf32>) -> tensor<64x100xf32> {
  %r = nn.softmax %x axis 1 : tensor<64x100xf32>
  func.return %r : tensor<64x100xf32>
}
