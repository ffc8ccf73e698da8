// RUN: fuse-opt %s | fuse-opt | filecheck %s
// RUN: fuse-opt %s --print-op-generic | fuse-opt | filecheck %s

// CHECK-LABEL: func.func @matmul
func.func @matmul(%a: tensor<2x4x8xbf16>, %b: tensor<2x8x16xbf16>, %w: tensor<16x8xbf16>) -> tensor<2x4x16xbf16> {
  // CHECK: nn.matmul %{{.*}}, %{{.*}} : tensor<2x4x8xbf16>, tensor<2x8x16xbf16> -> tensor<2x4x16xbf16>
  %0 = nn.matmul %a, %b : tensor<2x4x8xbf16>, tensor<2x8x16xbf16> -> tensor<2x4x16xbf16>
  // CHECK-NEXT: nn.matmul %{{.*}}, %{{.*}} transpose_b : tensor<2x4x8xbf16>, tensor<16x8xbf16> -> tensor<2x4x16xbf16>
  %1 = nn.matmul %a, %w transpose_b : tensor<2x4x8xbf16>, tensor<16x8xbf16> -> tensor<2x4x16xbf16>
  // CHECK-NEXT: nn.transpose
  // CHECK-NEXT: nn.matmul %{{.*}}, %{{.*}} transpose_a transpose_b : tensor<2x8x4xbf16>, tensor<16x8xbf16> -> tensor<2x4x16xbf16>
  %t = nn.transpose %a [0, 2, 1] : tensor<2x4x8xbf16> -> tensor<2x8x4xbf16>
  %2 = nn.matmul %t, %w transpose_a transpose_b : tensor<2x8x4xbf16>, tensor<16x8xbf16> -> tensor<2x4x16xbf16>
  func.return %2 : tensor<2x4x16xbf16>
}

// CHECK-LABEL: func.func @composites
func.func @composites(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %lw: tensor<16x8xf32>, %lb: tensor<16xf32>) -> tensor<4x16xf32> {
  // CHECK: nn.softmax %{{.*}} axis 1 : tensor<4x8xf32>
  %0 = nn.softmax %x axis 1 : tensor<4x8xf32>
  // CHECK-NEXT: nn.log_softmax %{{.*}} axis 0 : tensor<4x8xf32>
  %1 = nn.log_softmax %x axis 0 : tensor<4x8xf32>
  // CHECK-NEXT: nn.rms_norm %{{.*}} weight %{{.*}} {eps = 1.000000e-06 : f64} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %2 = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  // CHECK-NEXT: nn.rms_norm %{{.*}} {eps = 1.000000e-06 : f64, normalized_rank = 2 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %3 = nn.rms_norm %x {eps = 1.0e-06 : f64, normalized_rank = 2 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK-NEXT: nn.layer_norm %{{.*}} weight %{{.*}} bias %{{.*}} {eps = 1.000000e-05 : f64}
  %4 = nn.layer_norm %x weight %w bias %w {eps = 1.0e-05 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  // CHECK-NEXT: nn.layer_norm %{{.*}} bias %{{.*}} {eps = 1.000000e-05 : f64} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %5 = nn.layer_norm %x bias %w {eps = 1.0e-05 : f64} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  // CHECK-NEXT: nn.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %6 = nn.linear %x, %lw, %lb : tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<4x16xf32>
  // CHECK-NEXT: nn.linear %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %7 = nn.linear %x, %lw : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  func.return %7 : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @fusion
func.func @fusion(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK:      %{{.*}}, %{{.*}} = nn.fusion ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) attributes {kernel_name = "fused_0"} {
  // CHECK-NEXT: ^{{.*}}(%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>):
  // CHECK-NEXT:   %[[BB:.*]] = nn.broadcast %[[B]] : tensor<8xf32> -> tensor<4x8xf32>
  // CHECK-NEXT:   %[[S:.*]] = nn.add %[[A]], %[[BB]] : tensor<4x8xf32>
  // CHECK-NEXT:   %[[R:.*]] = nn.sum %[[S]] [1] : tensor<4x8xf32> -> tensor<4xf32>
  // CHECK-NEXT:   nn.yield %[[S]], %[[R]] : tensor<4x8xf32>, tensor<4xf32>
  // CHECK-NEXT: }
  %y, %r = nn.fusion ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) attributes {kernel_name = "fused_0"} {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
    %cb = nn.broadcast %c : tensor<8xf32> -> tensor<4x8xf32>
    %s = nn.add %a, %cb : tensor<4x8xf32>
    %t = nn.sum %s [1] : tensor<4x8xf32> -> tensor<4xf32>
    nn.yield %s, %t : tensor<4x8xf32>, tensor<4xf32>
  }
  // CHECK: nn.fusion ins() -> tensor<2xf32> {
  %k = nn.fusion ins() -> tensor<2xf32> {
    %z = nn.constant 0.0 : tensor<2xf32>
    nn.yield %z : tensor<2xf32>
  }
  func.return %y : tensor<4x8xf32>
}
