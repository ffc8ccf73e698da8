// RUN: fuse-opt %s -p "nn-decompose,canonicalize,cse,nn-fuse{route=library_gemm},convert-nn-to-tile,tile-promote" -t triton | filecheck %s

// The library route: the host calls cuBLAS through torch.addmm (the weight [out, in]
// read transposed, no copy; the bias added in cuBLAS's epilogue) into a temporary, then
// one pointwise kernel applies the GELU.
// CHECK:       def [[K:fused_0_matmul_add_gelu]](in0_ptr, out0_ptr):
// CHECK-NEXT:      """Schedule pointwise; block sizes [{{[0-9, ]+}}]."""
// CHECK:           tl.erf(
// CHECK:       def linear_gelu(in0, in1, in2, *, device):
// CHECK-NEXT:      """Run the host code: 2 launch(es); returns the outputs."""
// CHECK-NEXT:      empty = fuseopt_empty[device.type]
// CHECK-NEXT:      out0 = empty((2048, 4096), (4096, 1), torch.bfloat16)
// CHECK-NEXT:      workspace = empty((16777216,), (1,), torch.uint8)
// CHECK-NEXT:      workspace_bfloat16 = workspace.view(torch.bfloat16)
// CHECK-NEXT:      [[T:tmp[_0-9]*]] = fuseopt_reinterpret(workspace_bfloat16, (2048, 4096), (4096, 1), 0)
// CHECK-NEXT:      torch.addmm(in2, in0, in1.mT, out=[[T]])
// CHECK-NEXT:      launch_[[K]]([[T]], out0)
// CHECK-NEXT:      return (out0, )
func.func @linear_gelu(%x: tensor<2048x1024xbf16>, %w: tensor<4096x1024xbf16>, %b: tensor<4096xbf16>) -> tensor<2048x4096xbf16> {
  %y = nn.matmul %x, %w transpose_b : tensor<2048x1024xbf16>, tensor<4096x1024xbf16> -> tensor<2048x4096xbf16>
  %bb = nn.broadcast %b : tensor<4096xbf16> -> tensor<2048x4096xbf16>
  %z = nn.add %y, %bb : tensor<2048x4096xbf16>
  %g = nn.gelu %z : tensor<2048x4096xbf16>
  func.return %g : tensor<2048x4096xbf16>
}
