// RUN: fuse-opt %s --split-input-file -p nn-decompose | filecheck %s

// CHECK-LABEL: func.func @softmax
// CHECK-SAME:  (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:  %[[M:.*]] = nn.reduce_max %[[X]] [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT:  %[[MB:.*]] = nn.broadcast %[[M]] : tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT:  %[[D:.*]] = nn.sub %[[X]], %[[MB]] : tensor<4x8xf32>
// CHECK-NEXT:  %[[E:.*]] = nn.exp %[[D]] : tensor<4x8xf32>
// CHECK-NEXT:  %[[S:.*]] = nn.sum %[[E]] [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT:  %[[SB:.*]] = nn.broadcast %[[S]] : tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT:  %[[Y:.*]] = nn.div %[[E]], %[[SB]] : tensor<4x8xf32>
// CHECK-NEXT:  func.return %[[Y]]
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.softmax %x axis 1 : tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

// bf16 softmax is computed in f32 and narrowed once.
// CHECK-LABEL: func.func @softmax_bf16
// CHECK-NEXT:  nn.cast %{{.*}} : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK:       nn.reduce_max %{{.*}} [0] keepdim : tensor<4x8xf32> -> tensor<1x8xf32>
// CHECK:       nn.div
// CHECK-NEXT:  nn.cast %{{.*}} : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:  func.return
func.func @softmax_bf16(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %0 = nn.softmax %x axis 0 : tensor<4x8xbf16>
  func.return %0 : tensor<4x8xbf16>
}

// -----

// CHECK-LABEL: func.func @log_softmax
// CHECK:       nn.reduce_max
// CHECK:       %[[D:.*]] = nn.sub
// CHECK:       nn.exp %[[D]]
// CHECK:       nn.sum
// CHECK:       %[[L:.*]] = nn.log
// CHECK:       %[[LB:.*]] = nn.broadcast %[[L]]
// CHECK:       nn.sub %[[D]], %[[LB]]
func.func @log_softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.log_softmax %x axis 1 : tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

// rms_norm on bf16 accumulates in f32 and applies the weight in f32.
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME:  (%[[X:.*]]: tensor<2x8xbf16>, %[[W:.*]]: tensor<8xbf16>)
// CHECK-NEXT:  %[[XF:.*]] = nn.cast %[[X]] : tensor<2x8xbf16> -> tensor<2x8xf32>
// CHECK-NEXT:  %[[SQ:.*]] = nn.mul %[[XF]], %[[XF]] : tensor<2x8xf32>
// CHECK-NEXT:  %[[MS:.*]] = nn.mean %[[SQ]] [1] keepdim : tensor<2x8xf32> -> tensor<2x1xf32>
// CHECK-NEXT:  %[[EPS:.*]] = nn.constant 1.000000e-06 : tensor<2x1xf32>
// CHECK-NEXT:  %[[A:.*]] = nn.add %[[MS]], %[[EPS]] : tensor<2x1xf32>
// CHECK-NEXT:  %[[R:.*]] = nn.rsqrt %[[A]] : tensor<2x1xf32>
// CHECK-NEXT:  %[[RB:.*]] = nn.broadcast %[[R]] : tensor<2x1xf32> -> tensor<2x8xf32>
// CHECK-NEXT:  %[[Y:.*]] = nn.mul %[[XF]], %[[RB]] : tensor<2x8xf32>
// CHECK-NEXT:  %[[WF:.*]] = nn.cast %[[W]] : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NEXT:  %[[WB:.*]] = nn.broadcast %[[WF]] : tensor<8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:  %[[YW:.*]] = nn.mul %[[Y]], %[[WB]] : tensor<2x8xf32>
// CHECK-NEXT:  %[[O:.*]] = nn.cast %[[YW]] : tensor<2x8xf32> -> tensor<2x8xbf16>
// CHECK-NEXT:  func.return %[[O]]
func.func @rms_norm(%x: tensor<2x8xbf16>, %w: tensor<8xbf16>) -> tensor<2x8xbf16> {
  %0 = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<2x8xbf16>, tensor<8xbf16> -> tensor<2x8xbf16>
  func.return %0 : tensor<2x8xbf16>
}

// -----

// layer_norm: two-pass variance around the row mean, which is the row's value where
// its min equals its max (a constant row normalizes to exactly 0).
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME:  (%[[X:.*]]: tensor<2x3x4xf32>,
// CHECK-NEXT:  %[[MEAN:.*]] = nn.mean %[[X]] [1, 2] keepdim : tensor<2x3x4xf32> -> tensor<2x1x1xf32>
// CHECK-NEXT:  %[[LO:.*]] = nn.reduce_min %[[X]] [1, 2] keepdim : tensor<2x3x4xf32> -> tensor<2x1x1xf32>
// CHECK-NEXT:  %[[HI:.*]] = nn.reduce_max %[[X]] [1, 2] keepdim : tensor<2x3x4xf32> -> tensor<2x1x1xf32>
// CHECK-NEXT:  %[[CONST:.*]] = nn.compare eq, %[[LO]], %[[HI]] : tensor<2x1x1xf32>
// CHECK-NEXT:  %[[M:.*]] = nn.select %[[CONST]], %[[LO]], %[[MEAN]] : tensor<2x1x1xf32>
// CHECK-NEXT:  %[[MB:.*]] = nn.broadcast %[[M]] : tensor<2x1x1xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:  %[[C:.*]] = nn.sub %[[X]], %[[MB]]
// CHECK-NEXT:  %[[SQ:.*]] = nn.mul %[[C]], %[[C]]
// CHECK-NEXT:  nn.mean %[[SQ]] [1, 2] keepdim
// CHECK:       nn.rsqrt
// CHECK:       nn.mul
// CHECK:       nn.mul
// CHECK:       nn.add
// CHECK-NEXT:  func.return
func.func @layer_norm(%x: tensor<2x3x4xf32>, %w: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = nn.layer_norm %x weight %w bias %b {eps = 1.0e-05 : f64, normalized_rank = 2 : i64} : tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32> -> tensor<2x3x4xf32>
  func.return %0 : tensor<2x3x4xf32>
}

// -----

// CHECK-LABEL: func.func @linear
// CHECK-SAME:  (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<16x8xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK-NEXT:  %[[M:.*]] = nn.matmul %[[X]], %[[W]] transpose_b : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT:  %[[BB:.*]] = nn.broadcast %[[B]] : tensor<16xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT:  %[[Y:.*]] = nn.add %[[M]], %[[BB]] : tensor<2x4x16xf32>
// CHECK-NEXT:  func.return %[[Y]]
func.func @linear(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %0 = nn.linear %x, %w, %b : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<2x4x16xf32>
  func.return %0 : tensor<2x4x16xf32>
}

// -----

// A vector input is viewed as one row for the matmul.
// CHECK-LABEL: func.func @linear_vector
// CHECK-NEXT:  nn.reshape %{{.*}} : tensor<8xf32> -> tensor<1x8xf32>
// CHECK-NEXT:  nn.matmul %{{.*}}, %{{.*}} transpose_b : tensor<1x8xf32>, tensor<16x8xf32> -> tensor<1x16xf32>
// CHECK-NEXT:  nn.reshape %{{.*}} : tensor<1x16xf32> -> tensor<16xf32>
func.func @linear_vector(%x: tensor<8xf32>, %w: tensor<16x8xf32>) -> tensor<16xf32> {
  %0 = nn.linear %x, %w : tensor<8xf32>, tensor<16x8xf32> -> tensor<16xf32>
  func.return %0 : tensor<16xf32>
}

// -----

// Composites inside a fusion region are decomposed too.
// CHECK-LABEL: func.func @in_fusion
// CHECK:       nn.fusion
// CHECK-NOT:   nn.softmax
// CHECK:       nn.yield
func.func @in_fusion(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.fusion ins(%x : tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %s = nn.softmax %a axis 1 : tensor<4x8xf32>
    nn.yield %s : tensor<4x8xf32>
  }
  func.return %0 : tensor<4x8xf32>
}

// -----

// A composite of an empty input is that input: no max over an axis of size 0.
// CHECK-LABEL: func.func @softmax_empty
// CHECK-SAME:  (%[[X:.*]]: tensor<4x0xbf16>)
// CHECK-NEXT:  func.return %[[X]] : tensor<4x0xbf16>
func.func @softmax_empty(%x: tensor<4x0xbf16>) -> tensor<4x0xbf16> {
  %0 = nn.softmax %x axis 1 : tensor<4x0xbf16>
  func.return %0 : tensor<4x0xbf16>
}
