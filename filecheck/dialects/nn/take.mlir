// RUN: fuse-opt %s | filecheck %s
// RUN: fuse-opt %s | fuse-opt | filecheck %s
// RUN: fuse-opt %s --print-op-generic | fuse-opt | filecheck %s

// nn.take round-trips: any input shape and element type, a result of the index's shape.
// CHECK-LABEL: func.func @forms
// CHECK:       nn.take %w, %p : tensor<64x32xbf16>, tensor<8x32xi64> -> tensor<8x32xbf16>
// CHECK:       nn.take %m, %q : tensor<5xi1>, tensor<2x3x4xi64> -> tensor<2x3x4xi1>
func.func @forms(%w: tensor<64x32xbf16>, %p: tensor<8x32xi64>, %m: tensor<5xi1>, %q: tensor<2x3x4xi64>) -> (tensor<8x32xbf16>, tensor<2x3x4xi1>) {
  %0 = nn.take %w, %p : tensor<64x32xbf16>, tensor<8x32xi64> -> tensor<8x32xbf16>
  %1 = nn.take %m, %q : tensor<5xi1>, tensor<2x3x4xi64> -> tensor<2x3x4xi1>
  func.return %0, %1 : tensor<8x32xbf16>, tensor<2x3x4xi1>
}
