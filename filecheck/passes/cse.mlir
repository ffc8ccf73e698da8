// RUN: fuse-opt %s -p cse | filecheck %s

// Pure nn ops with equal operands and attributes are merged; different ones are not.
// CHECK-LABEL: func.func @cse
// CHECK-SAME:  (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:  %[[E:.*]] = nn.exp %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:  %[[S:.*]] = nn.sum %[[E]] [1] : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT:  %[[S2:.*]] = nn.sum %[[E]] [0] : tensor<4x8xf32> -> tensor<8xf32>
// CHECK-NEXT:  %[[C:.*]] = nn.constant 2.000000e+00 : tensor<4xf32>
// CHECK-NEXT:  %[[M:.*]] = nn.mul %[[S]], %[[C]] : tensor<4xf32>
// CHECK-NEXT:  func.return %[[M]], %[[M]], %[[S2]]
func.func @cse(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<8xf32>) {
  %0 = nn.exp %x : tensor<4x8xf32>
  %1 = nn.exp %x : tensor<4x8xf32>
  %2 = nn.sum %0 [1] : tensor<4x8xf32> -> tensor<4xf32>
  %3 = nn.sum %1 [1] : tensor<4x8xf32> -> tensor<4xf32>
  %4 = nn.sum %1 [0] : tensor<4x8xf32> -> tensor<8xf32>
  %c1 = nn.constant 2.0 : tensor<4xf32>
  %c2 = nn.constant 2.0 : tensor<4xf32>
  %5 = nn.mul %2, %c1 : tensor<4xf32>
  %6 = nn.mul %3, %c2 : tensor<4xf32>
  func.return %5, %6, %4 : tensor<4xf32>, tensor<4xf32>, tensor<8xf32>
}
