// RUN: fuse-opt %s | filecheck %s --check-prefix=IR
// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s --check-prefix=TRITON
// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s --check-prefix=CUDA

// nn.log1p round-trips and prints as eager's log1pf on both backends (libdevice's on
// the Triton GPU path; a rounding-corrected log(1 + x) in Triton's CPU interpreter).
// IR:     nn.log1p %x : tensor<8x64xf32>
// TRITON: def fuseopt_log1p(x):
// TRITON:     return fuseopt_libdevice.log1p(x)
// TRITON: fuseopt_log1p(
// CUDA:   log1pf(
func.func @f(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %0 = nn.log1p %x : tensor<8x64xf32>
  func.return %0 : tensor<8x64xf32>
}
