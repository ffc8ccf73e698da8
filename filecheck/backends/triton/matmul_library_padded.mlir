// RUN: fuse-opt %s -p "nn-decompose,canonicalize,cse,nn-fuse{route=library_gemm},convert-nn-to-tile,tile-promote" -t triton | filecheck %s

// A language-model head whose vocabulary (50257) is not whole 16-byte vectors: the
// library GEMM runs at N = 50264 (`fuseopt_mm_padded`: the weight padded with zero
// rows), where cuBLAS's aligned kernels apply. The output is allocated with that row
// pitch, so the product is written in place and returned as the first 50257 columns
// (what torch.compile returns), not copied out. The module defines its copy of
// library_gemm.mm_padded; an aligned N keeps the
// plain torch.mm. A bias add after the GEMM joins it: `torch.addmm` (cuBLAS's bias
// epilogue), or the padded GEMM given the bias (padded with zeros too).
// CHECK:       def fuseopt_mm_padded(
// CHECK-LABEL: def lm_head(in0, in1, *, device):
// CHECK:           out0 = empty((64, 50264), (50264, 1), torch.bfloat16)[:, :50257].view((64, 50257))
// CHECK:           fuseopt_mm_padded(in0, in1.mT, out0, 50264)
// CHECK-LABEL: def aligned(in0, in1, *, device):
// CHECK:           torch.mm(in0, in1.mT, out=out0)
// CHECK-LABEL: def lm_head_bias(in0, in1, in2, *, device):
// CHECK:           fuseopt_mm_padded(in0, in1.mT, out0, 50264, in2)
// CHECK-LABEL: def linear_bias(in0, in1, in2, *, device):
// CHECK-NEXT:      """Run the host code: 1 launch(es); returns the outputs."""
// CHECK:           torch.addmm(in2, in0.view(128, 1024), in1.mT, out=out0.view(128, 4096))
// CHECK-NEXT:      return (out0, )
func.func @lm_head(%x: tensor<64x1024xbf16>, %w: tensor<50257x1024xbf16>) -> tensor<64x50257xbf16> {
  %y = nn.matmul %x, %w transpose_b : tensor<64x1024xbf16>, tensor<50257x1024xbf16> -> tensor<64x50257xbf16>
  func.return %y : tensor<64x50257xbf16>
}
func.func @aligned(%x: tensor<64x1024xbf16>, %w: tensor<50264x1024xbf16>) -> tensor<64x50264xbf16> {
  %y = nn.matmul %x, %w transpose_b : tensor<64x1024xbf16>, tensor<50264x1024xbf16> -> tensor<64x50264xbf16>
  func.return %y : tensor<64x50264xbf16>
}
func.func @lm_head_bias(%x: tensor<64x1024xbf16>, %w: tensor<50257x1024xbf16>, %b: tensor<50257xbf16>) -> tensor<64x50257xbf16> {
  %y = nn.matmul %x, %w transpose_b : tensor<64x1024xbf16>, tensor<50257x1024xbf16> -> tensor<64x50257xbf16>
  %bb = nn.broadcast %b : tensor<50257xbf16> -> tensor<64x50257xbf16>
  %z = nn.add %y, %bb : tensor<64x50257xbf16>
  func.return %z : tensor<64x50257xbf16>
}
func.func @linear_bias(%x: tensor<2x64x1024xbf16>, %w: tensor<4096x1024xbf16>, %b: tensor<4096xbf16>) -> tensor<2x64x4096xbf16> {
  %y = nn.matmul %x, %w transpose_b : tensor<2x64x1024xbf16>, tensor<4096x1024xbf16> -> tensor<2x64x4096xbf16>
  %bb = nn.broadcast %b : tensor<4096xbf16> -> tensor<2x64x4096xbf16>
  %z = nn.add %bb, %y : tensor<2x64x4096xbf16>
  func.return %z : tensor<2x64x4096xbf16>
}
