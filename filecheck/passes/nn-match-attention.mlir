// RUN: fuse-opt %s --split-input-file -p nn-match-attention | filecheck %s

// Attention written out as the frontend imports `softmax(q @ k^T / sqrt(d) + mask) @ v`
// (4-d operands reshaped to [B*H, N, D] for the batched matmuls, the key transposed):
// one nn.attention reading the mask at its own shape; the chain is gone.
// CHECK-LABEL: func.func @additive
// CHECK-SAME:  (%[[K:.*]]: tensor<2x4x8x16xf32>, %[[Q:.*]]: tensor<2x4x8x16xf32>, %[[M:.*]]: tensor<2x1x1x8xf32>, %[[V:.*]]: tensor<2x4x8x16xf32>)
// CHECK-NEXT:  %[[O:.*]] = nn.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] {scale = 2.500000e-01 : f64}
// CHECK-NEXT:  func.return %[[O]]
func.func @additive(%k: tensor<2x4x8x16xf32>, %q: tensor<2x4x8x16xf32>, %m: tensor<2x1x1x8xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %0 = nn.transpose %k [0, 1, 3, 2] : tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
  %1 = nn.reshape %q : tensor<2x4x8x16xf32> -> tensor<8x8x16xf32>
  %2 = nn.reshape %0 : tensor<2x4x16x8xf32> -> tensor<8x16x8xf32>
  %3 = nn.matmul %1, %2 : tensor<8x8x16xf32>, tensor<8x16x8xf32> -> tensor<8x8x8xf32>
  %4 = nn.reshape %3 : tensor<8x8x8xf32> -> tensor<2x4x8x8xf32>
  %5 = nn.constant 4.000000e+00 : tensor<2x4x8x8xf32>
  %6 = nn.div %4, %5 : tensor<2x4x8x8xf32>
  %7 = nn.broadcast %m : tensor<2x1x1x8xf32> -> tensor<2x4x8x8xf32>
  %8 = nn.add %6, %7 : tensor<2x4x8x8xf32>
  %9 = nn.softmax %8 axis 3 : tensor<2x4x8x8xf32>
  %10 = nn.reshape %9 : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
  %11 = nn.reshape %v : tensor<2x4x8x16xf32> -> tensor<8x8x16xf32>
  %12 = nn.matmul %10, %11 : tensor<8x8x8xf32>, tensor<8x8x16xf32> -> tensor<8x8x16xf32>
  %13 = nn.reshape %12 : tensor<8x8x16xf32> -> tensor<2x4x8x16xf32>
  func.return %13 : tensor<2x4x8x16xf32>
}

// -----

// A 16-bit model: the scores widened to f32 for the softmax and the probabilities
// rounded back; the key/value heads repeated over their query group (Hugging Face's
// repeat_kv: reshape, broadcast, reshape) are read unrepeated (grouped-query attention);
// the scale multiplies; a -inf select is a boolean mask.
// CHECK-LABEL: func.func @grouped_bf16
// CHECK-SAME:  (%[[Q:.*]]: tensor<1x4x8x16xbf16>, %[[K:.*]]: tensor<1x2x8x16xbf16>, %[[V:.*]]: tensor<1x2x8x16xbf16>, %[[KEEP:.*]]: tensor<1x1x8x8xi1>)
// CHECK-NEXT:  %[[O:.*]] = nn.attention %[[Q]], %[[K]], %[[V]] mask %[[KEEP]] {scale = 2.500000e-01 : f64} : tensor<1x4x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x1x8x8xi1> -> tensor<1x4x8x16xbf16>
// CHECK-NEXT:  func.return %[[O]]
func.func @grouped_bf16(%q: tensor<1x4x8x16xbf16>, %k: tensor<1x2x8x16xbf16>, %v: tensor<1x2x8x16xbf16>, %keep: tensor<1x1x8x8xi1>) -> tensor<1x4x8x16xbf16> {
  %kg = nn.reshape %k : tensor<1x2x8x16xbf16> -> tensor<1x2x1x8x16xbf16>
  %kw = nn.broadcast %kg : tensor<1x2x1x8x16xbf16> -> tensor<1x2x2x8x16xbf16>
  %kr = nn.reshape %kw : tensor<1x2x2x8x16xbf16> -> tensor<1x4x8x16xbf16>
  %vg = nn.reshape %v : tensor<1x2x8x16xbf16> -> tensor<1x2x1x8x16xbf16>
  %vw = nn.broadcast %vg : tensor<1x2x1x8x16xbf16> -> tensor<1x2x2x8x16xbf16>
  %vr = nn.reshape %vw : tensor<1x2x2x8x16xbf16> -> tensor<1x4x8x16xbf16>
  %s = nn.matmul %q, %kr transpose_b : tensor<1x4x8x16xbf16>, tensor<1x4x8x16xbf16> -> tensor<1x4x8x8xbf16>
  %c = nn.constant 2.500000e-01 : tensor<1x4x8x8xbf16>
  %ss = nn.mul %s, %c : tensor<1x4x8x8xbf16>
  %ninf = nn.constant 0xFFF0000000000000 : tensor<1x4x8x8xbf16>
  %kb = nn.broadcast %keep : tensor<1x1x8x8xi1> -> tensor<1x4x8x8xi1>
  %sm = nn.select %kb, %ss, %ninf : tensor<1x4x8x8xbf16>
  %w = nn.cast %sm : tensor<1x4x8x8xbf16> -> tensor<1x4x8x8xf32>
  %p = nn.softmax %w axis 3 : tensor<1x4x8x8xf32>
  %pn = nn.cast %p : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xbf16>
  %o = nn.matmul %pn, %vr : tensor<1x4x8x8xbf16>, tensor<1x4x8x16xbf16> -> tensor<1x4x8x16xbf16>
  func.return %o : tensor<1x4x8x16xbf16>
}

// -----

// Not attention, left alone: the attention weights are returned too (the chain's
// values have other users), and a select with a finite fill (finfo.min: a row masked
// whole would average v, where nn.attention gives zeros).
// CHECK-LABEL: func.func @weights_returned
// CHECK-NOT:   nn.attention
// CHECK:       nn.softmax
func.func @weights_returned(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> (tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32>) {
  %s = nn.matmul %q, %k transpose_b : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x8xf32>
  %p = nn.softmax %s axis 3 : tensor<1x2x8x8xf32>
  %o = nn.matmul %p, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  func.return %o, %p : tensor<1x2x8x16xf32>, tensor<1x2x8x8xf32>
}

// -----

// CHECK-LABEL: func.func @finite_fill
// CHECK-NOT:   nn.attention
// CHECK:       nn.select
func.func @finite_fill(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %keep: tensor<1x2x8x8xi1>) -> tensor<1x2x8x16xf32> {
  %s = nn.matmul %q, %k transpose_b : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x8xf32>
  %low = nn.constant -3.4028234663852886e+38 : tensor<1x2x8x8xf32>
  %sm = nn.select %keep, %s, %low : tensor<1x2x8x8xf32>
  %p = nn.softmax %sm axis 3 : tensor<1x2x8x8xf32>
  %o = nn.matmul %p, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  func.return %o : tensor<1x2x8x16xf32>
}

// -----

// Casts other than f16/bf16 <-> f32 change the scores (here truncated to integers):
// not attention's chain.
// CHECK-LABEL: func.func @integer_scores
// CHECK-NOT:   nn.attention
// CHECK:       nn.cast {{.*}} -> tensor<1x2x8x8xi64>
func.func @integer_scores(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %s = nn.matmul %q, %k transpose_b : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x8xf32>
  %i = nn.cast %s : tensor<1x2x8x8xf32> -> tensor<1x2x8x8xi64>
  %f = nn.cast %i : tensor<1x2x8x8xi64> -> tensor<1x2x8x8xf32>
  %p = nn.softmax %f axis 3 : tensor<1x2x8x8xf32>
  %o = nn.matmul %p, %v : tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
  func.return %o : tensor<1x2x8x16xf32>
}
