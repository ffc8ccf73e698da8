// RUN: fuse-opt %s | filecheck %s
// RUN: fuse-opt %s | fuse-opt | filecheck %s
// RUN: fuse-opt %s --print-op-generic | fuse-opt | filecheck %s

// nn.cumsum round-trips: integer and float tensors, any axis.
// CHECK-LABEL: func.func @forms
// CHECK:       nn.cumsum %x axis 1 : tensor<4x8xi64> -> tensor<4x8xi64>
// CHECK:       nn.cumsum %y axis 0 : tensor<3x2x5xbf16> -> tensor<3x2x5xbf16>
func.func @forms(%x: tensor<4x8xi64>, %y: tensor<3x2x5xbf16>) -> (tensor<4x8xi64>, tensor<3x2x5xbf16>) {
  %0 = nn.cumsum %x axis 1 : tensor<4x8xi64> -> tensor<4x8xi64>
  %1 = nn.cumsum %y axis 0 : tensor<3x2x5xbf16> -> tensor<3x2x5xbf16>
  func.return %0, %1 : tensor<4x8xi64>, tensor<3x2x5xbf16>
}
