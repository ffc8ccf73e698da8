// RUN: fuse-opt %s -p nn-decompose | filecheck %s --check-prefix=KEEP
// RUN: fuse-opt %s -p 'nn-decompose{attention=true}' | filecheck %s

// nn-decompose keeps nn.attention for its fused schedule (KEEP), except where that
// schedule does not apply (a head dim above 256, @wide); with attention=true every one
// is written out: key/value heads broadcast over their query group, q @ k^T * scale,
// the causal mask as an index comparison, the boolean mask as a select, a softmax whose
// rows with no key kept are zeros, then @ v, in f32 for bf16 operands.

// KEEP-LABEL: func.func @main
// KEEP:       nn.attention %q, %k, %v mask %m causal
// CHECK-LABEL: func.func @main
// CHECK-NOT:   nn.attention
// CHECK:       %[[Q:.*]] = nn.cast %q : tensor<2x4x100x64xbf16> -> tensor<2x4x100x64xf32>
// CHECK:       %[[K:.*]] = nn.cast %k
// CHECK:       nn.reshape %[[K]] : tensor<2x2x120x64xf32> -> tensor<2x2x1x120x64xf32>
// CHECK:       nn.broadcast {{.*}} : tensor<2x2x1x120x64xf32> -> tensor<2x2x2x120x64xf32>
// CHECK:       %[[KR:.*]] = nn.reshape {{.*}} : tensor<2x2x2x120x64xf32> -> tensor<2x4x120x64xf32>
// CHECK:       %[[S:.*]] = nn.matmul %[[Q]], %[[KR]] transpose_b : tensor<2x4x100x64xf32>, tensor<2x4x120x64xf32> -> tensor<2x4x100x120xf32>
// CHECK:       nn.mul %[[S]], %{{.*}} : tensor<2x4x100x120xf32>
// CHECK:       %[[CAUSAL:.*]] = nn.compare le, %{{.*}}, %{{.*}} : tensor<2x4x100x120xi64>
// CHECK:       nn.select %[[CAUSAL]],
// CHECK:       %[[MB:.*]] = nn.broadcast %m : tensor<2x1x1x120xi1> -> tensor<2x4x100x120xi1>
// CHECK:       nn.select %[[MB]],
// CHECK:       nn.reduce_max {{.*}} [3] keepdim
// CHECK:       nn.exp
// CHECK:       nn.sum {{.*}} [3] keepdim
// CHECK:       %[[P:.*]] = nn.div
// CHECK:       %[[O:.*]] = nn.matmul %[[P]], %{{.*}} : tensor<2x4x100x120xf32>, tensor<2x4x120x64xf32> -> tensor<2x4x100x64xf32>
// CHECK:       nn.cast %[[O]] : tensor<2x4x100x64xf32> -> tensor<2x4x100x64xbf16>
func.func @main(%q: tensor<2x4x100x64xbf16>, %k: tensor<2x2x120x64xbf16>, %v: tensor<2x2x120x64xbf16>, %m: tensor<2x1x1x120xi1>) -> tensor<2x4x100x64xbf16> {
  %o = nn.attention %q, %k, %v mask %m causal {scale = 0.125 : f64} : tensor<2x4x100x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x1x1x120xi1> -> tensor<2x4x100x64xbf16>
  func.return %o : tensor<2x4x100x64xbf16>
}

// KEEP-LABEL: func.func @wide
// KEEP-NOT:   nn.attention
// KEEP:       nn.matmul {{.*}} transpose_b : tensor<1x1x4x320xf32>, tensor<1x1x6x320xf32> -> tensor<1x1x4x6xf32>
func.func @wide(%q: tensor<1x1x4x320xf32>, %k: tensor<1x1x6x320xf32>, %v: tensor<1x1x6x16xf32>) -> tensor<1x1x4x16xf32> {
  %o = nn.attention %q, %k, %v {scale = 0.05 : f64} : tensor<1x1x4x320xf32>, tensor<1x1x6x320xf32>, tensor<1x1x6x16xf32> -> tensor<1x1x4x16xf32>
  func.return %o : tensor<1x1x4x16xf32>
}
