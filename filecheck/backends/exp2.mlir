// RUN: fuse-opt %s | filecheck %s --check-prefix=IR
// RUN: fuse-opt %s --print-op-generic | fuse-opt | filecheck %s --check-prefix=IR
// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s --check-prefix=TRITON
// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s --check-prefix=CUDA

// nn.exp2 (2**x, the attention kernel's exponential) round-trips and prints as exp2f on
// both backends (libdevice's on the Triton GPU path, tl.exp2 in Triton's CPU interpreter).
// IR:     nn.exp2 %x : tensor<8x64xf32>
// TRITON: def fuseopt_exp2(x):
// TRITON:     return tl.exp2(x)
// TRITON:     return fuseopt_libdevice.exp2(x)
// TRITON: fuseopt_exp2(
// CUDA:   exp2f(
func.func @f(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %0 = nn.exp2 %x : tensor<8x64xf32>
  func.return %0 : tensor<8x64xf32>
}
