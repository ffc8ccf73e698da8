// RUN: fuse-opt %s | filecheck %s
// RUN: fuse-opt %s | fuse-opt | filecheck %s
// RUN: fuse-opt %s --print-op-generic | fuse-opt | filecheck %s

// nn.attention round-trips in its custom form: the optional mask and the causal flag,
// grouped-query heads (8 query heads over 2 key/value heads), a mask at its own
// broadcastable shape, and value head dims other than the query's.
// CHECK-LABEL: func.func @forms
// CHECK:       nn.attention %q, %k, %v causal {scale = 1.250000e-01 : f64} : tensor<2x8x100x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x2x120x64xbf16> -> tensor<2x8x100x64xbf16>
// CHECK:       nn.attention %q, %k, %v mask %m {scale = 1.250000e-01 : f64} : tensor<2x8x100x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x1x1x120xi1> -> tensor<2x8x100x64xbf16>
// CHECK:       nn.attention %q, %k, %w mask %a causal {scale = 5.000000e-01 : f64} : tensor<2x8x100x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x2x120x32xbf16>, tensor<1x1x100x120xf32> -> tensor<2x8x100x32xbf16>
func.func @forms(%q: tensor<2x8x100x64xbf16>, %k: tensor<2x2x120x64xbf16>, %v: tensor<2x2x120x64xbf16>, %w: tensor<2x2x120x32xbf16>, %m: tensor<2x1x1x120xi1>, %a: tensor<1x1x100x120xf32>) -> (tensor<2x8x100x64xbf16>, tensor<2x8x100x64xbf16>, tensor<2x8x100x32xbf16>) {
  %0 = nn.attention %q, %k, %v causal {scale = 0.125 : f64} : tensor<2x8x100x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x2x120x64xbf16> -> tensor<2x8x100x64xbf16>
  %1 = nn.attention %q, %k, %v mask %m {scale = 0.125 : f64} : tensor<2x8x100x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x1x1x120xi1> -> tensor<2x8x100x64xbf16>
  %2 = nn.attention %q, %k, %w mask %a causal {scale = 0.5 : f64} : tensor<2x8x100x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x2x120x32xbf16>, tensor<1x1x100x120xf32> -> tensor<2x8x100x32xbf16>
  func.return %0, %1, %2 : tensor<2x8x100x64xbf16>, tensor<2x8x100x64xbf16>, tensor<2x8x100x32xbf16>
}
