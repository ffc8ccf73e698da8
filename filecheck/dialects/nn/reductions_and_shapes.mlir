// RUN: fuse-opt %s | fuse-opt | filecheck %s
// RUN: fuse-opt %s --print-op-generic | fuse-opt | filecheck %s

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<4x8xf32>, %i: tensor<4x8xi64>) -> tensor<4x1xf32> {
  // CHECK: nn.sum %{{.*}} [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %0 = nn.sum %x [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  // CHECK-NEXT: nn.reduce_max %{{.*}} [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %1 = nn.reduce_max %x [0, 1] : tensor<4x8xf32> -> tensor<f32>
  // CHECK-NEXT: nn.reduce_min %{{.*}} [0] : tensor<4x8xi64> -> tensor<8xi64>
  %2 = nn.reduce_min %i [0] : tensor<4x8xi64> -> tensor<8xi64>
  // CHECK-NEXT: nn.mean %{{.*}} [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %3 = nn.mean %x [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  // CHECK-NEXT: nn.sum %{{.*}} [] : tensor<4x8xf32> -> tensor<4x8xf32>
  %4 = nn.sum %x [] : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %3 : tensor<4x1xf32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %y: tensor<4x2xf32>) -> tensor<4x10xf32> {
  // CHECK: nn.reshape %{{.*}} : tensor<4x8xf32> -> tensor<2x16xf32>
  %0 = nn.reshape %x : tensor<4x8xf32> -> tensor<2x16xf32>
  // CHECK-NEXT: nn.transpose %{{.*}} [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %1 = nn.transpose %x [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  // CHECK-NEXT: nn.slice %{{.*}} [0:4, 2:8:2] : tensor<4x8xf32> -> tensor<4x3xf32>
  %2 = nn.slice %x [0:4:1, 2:8:2] : tensor<4x8xf32> -> tensor<4x3xf32>
  // CHECK-NEXT: nn.broadcast %{{.*}} : tensor<8xf32> -> tensor<4x8xf32>
  %3 = nn.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  // CHECK-NEXT: nn.concat %{{.*}}, %{{.*}} axis 1 : tensor<4x8xf32>, tensor<4x2xf32> -> tensor<4x10xf32>
  %4 = nn.concat %x, %y axis 1 : tensor<4x8xf32>, tensor<4x2xf32> -> tensor<4x10xf32>
  func.return %4 : tensor<4x10xf32>
}

// CHECK-LABEL: func.func @constants
func.func @constants() -> tensor<2xbf16> {
  // CHECK: nn.constant 1.500000e+00 : tensor<4x8xf32>
  %0 = nn.constant 1.5 : tensor<4x8xf32>
  // CHECK-NEXT: nn.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xbf16>
  %1 = nn.constant dense<[1.0, 2.0]> : tensor<2xbf16>
  // CHECK-NEXT: nn.constant -3 : tensor<2xi64>
  %2 = nn.constant -3 : tensor<2xi64>
  // CHECK-NEXT: nn.constant true : tensor<2xi1>
  %3 = nn.constant true : tensor<2xi1>
  // CHECK-NEXT: nn.constant 2.000000e+00 : tensor<f32>
  %4 = nn.constant 2.0 : tensor<f32>
  // CHECK-NEXT: nn.constant 0xfff0000000000000 : tensor<4xf32>
  %5 = nn.constant 0xFFF0000000000000 : tensor<4xf32>
  // CHECK-NEXT: nn.constant 0x7ff8000000000000 : tensor<4xbf16>
  %6 = nn.constant 0x7ff8000000000000 : tensor<4xbf16>
  func.return %1 : tensor<2xbf16>
}
