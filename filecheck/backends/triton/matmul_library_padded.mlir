// RUN: fuse-opt %s -p "nn-decompose,canonicalize,cse,nn-fuse{route=library_gemm},convert-nn-to-tile,tile-promote" -t triton | filecheck %s

// A language-model head whose vocabulary (50257) is not whole 16-byte vectors: the
// library GEMM runs at N = 50264 (`fuseopt_mm_padded`: the weight padded with zero
// rows, the product's first 50257 columns copied out), where cuBLAS's aligned kernels
// apply; the module defines its copy of library_gemm.mm_padded; an aligned N keeps the
// plain torch.mm.
// CHECK:       def fuseopt_mm_padded(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, columns: int) -> None:
// CHECK-LABEL: def lm_head(in0, in1, *, device):
// CHECK:           fuseopt_mm_padded(in0, in1.mT, out0, 50264)
// CHECK-LABEL: def aligned(in0, in1, *, device):
// CHECK:           torch.mm(in0, in1.mT, out=out0)
func.func @lm_head(%x: tensor<64x1024xbf16>, %w: tensor<50257x1024xbf16>) -> tensor<64x50257xbf16> {
  %y = nn.matmul %x, %w transpose_b : tensor<64x1024xbf16>, tensor<50257x1024xbf16> -> tensor<64x50257xbf16>
  func.return %y : tensor<64x50257xbf16>
}
func.func @aligned(%x: tensor<64x1024xbf16>, %w: tensor<50264x1024xbf16>) -> tensor<64x50264xbf16> {
  %y = nn.matmul %x, %w transpose_b : tensor<64x1024xbf16>, tensor<50264x1024xbf16> -> tensor<64x50264xbf16>
  func.return %y : tensor<64x50264xbf16>
}
