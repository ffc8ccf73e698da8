// RUN: fuse-opt %s --split-input-file -p canonicalize | filecheck %s

// CHECK-LABEL: func.func @identities
// CHECK-SAME:  (%[[X:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:  func.return %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identities(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %one = nn.constant 1.0 : tensor<4x8xf32>
  %zero = nn.constant 0.0 : tensor<4x8xf32>
  %0 = nn.mul %x, %one : tensor<4x8xf32>
  %1 = nn.add %zero, %x : tensor<4x8xf32>
  %2 = nn.sub %x, %zero : tensor<4x8xf32>
  %3 = nn.div %x, %one : tensor<4x8xf32>
  func.return %0, %1, %2, %3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// 0 - x is not x: only right identities of sub and div fold.
// CHECK-LABEL: func.func @not_identities
// CHECK: nn.sub
// CHECK: nn.div
// CHECK: nn.mul
func.func @not_identities(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %zero = nn.constant 0.0 : tensor<4xf32>
  %one = nn.constant 1.0 : tensor<4xf32>
  %two = nn.constant 2.0 : tensor<4xf32>
  %0 = nn.sub %zero, %x : tensor<4xf32>
  %1 = nn.div %one, %x : tensor<4xf32>
  %2 = nn.mul %x, %two : tensor<4xf32>
  func.return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @transposes
// CHECK-SAME:  (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT:  %[[T:.*]] = nn.transpose %[[X]] [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT:  func.return %[[X]], %[[T]]
func.func @transposes(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x2x3xf32>) {
  %0 = nn.transpose %x [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %1 = nn.transpose %0 [1, 0, 2] : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
  %2 = nn.transpose %0 [2, 1, 0] : tensor<3x2x4xf32> -> tensor<4x2x3xf32>
  %3 = nn.transpose %x [0, 1, 2] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  func.return %1, %2 : tensor<2x3x4xf32>, tensor<4x2x3xf32>
}

// -----

// A transpose that moves only axes of size 1 keeps the elements in order: a reshape (a
// decode step's [B, 1, H, D] -> [B, H, 1, D], a view instead of a copy kernel). One that
// swaps two axes of size > 1 stays.
// CHECK-LABEL: func.func @unit_axis_transposes
// CHECK-SAME:  (%[[X:.*]]: tensor<2x1x4x16xf32>)
// CHECK-NEXT:  %[[R:.*]] = nn.reshape %[[X]] : tensor<2x1x4x16xf32> -> tensor<2x4x1x16xf32>
// CHECK-NEXT:  %[[T:.*]] = nn.transpose %[[X]] [0, 1, 3, 2] : tensor<2x1x4x16xf32> -> tensor<2x1x16x4xf32>
// CHECK-NEXT:  func.return %[[R]], %[[T]]
func.func @unit_axis_transposes(%x: tensor<2x1x4x16xf32>) -> (tensor<2x4x1x16xf32>, tensor<2x1x16x4xf32>) {
  %0 = nn.transpose %x [0, 2, 1, 3] : tensor<2x1x4x16xf32> -> tensor<2x4x1x16xf32>
  %1 = nn.transpose %x [0, 1, 3, 2] : tensor<2x1x4x16xf32> -> tensor<2x1x16x4xf32>
  func.return %0, %1 : tensor<2x4x1x16xf32>, tensor<2x1x16x4xf32>
}

// -----

// CHECK-LABEL: func.func @shape_chains
// CHECK-SAME:  (%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NEXT:  %[[R:.*]] = nn.reshape %[[X]] : tensor<4x8xf32> -> tensor<32xf32>
// CHECK-NEXT:  %[[BB:.*]] = nn.broadcast %[[B]] : tensor<8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT:  func.return %[[R]], %[[BB]], %[[X]]
func.func @shape_chains(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<32xf32>, tensor<2x4x8xf32>, tensor<4x8xf32>) {
  %0 = nn.reshape %x : tensor<4x8xf32> -> tensor<2x16xf32>
  %1 = nn.reshape %0 : tensor<2x16xf32> -> tensor<32xf32>
  %2 = nn.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
  %3 = nn.broadcast %2 : tensor<4x8xf32> -> tensor<2x4x8xf32>
  %4 = nn.reshape %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %5 = nn.broadcast %4 : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %1, %3, %5 : tensor<32xf32>, tensor<2x4x8xf32>, tensor<4x8xf32>
}

// -----

// A widening cast undone is a no-op; a narrowing one is not (it rounds).
// CHECK-LABEL: func.func @casts
// CHECK-SAME:  (%[[H:.*]]: tensor<4xbf16>, %[[F:.*]]: tensor<4xf32>)
// CHECK-NEXT:  %[[N:.*]] = nn.cast %[[F]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NEXT:  %[[W:.*]] = nn.cast %[[N]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK-NEXT:  func.return %[[H]], %[[W]], %[[F]]
func.func @casts(%h: tensor<4xbf16>, %f: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>) {
  %0 = nn.cast %h : tensor<4xbf16> -> tensor<4xf32>
  %1 = nn.cast %0 : tensor<4xf32> -> tensor<4xbf16>
  %2 = nn.cast %f : tensor<4xf32> -> tensor<4xbf16>
  %3 = nn.cast %2 : tensor<4xbf16> -> tensor<4xf32>
  %4 = nn.cast %f : tensor<4xf32> -> tensor<4xf32>
  func.return %1, %3, %4 : tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Splats fold at any size; other constants fold up to 1024 elements.
// CHECK-LABEL: func.func @constant_folding
// CHECK-DAG:   nn.constant 1.4142135381698608 : tensor<4096x4096xf32>
// CHECK-DAG:   nn.constant dense<[2.71828175, 7.38905621]> : tensor<2xf32>
// CHECK-DAG:   nn.constant 6.000000e+00 : tensor<f32>
// CHECK-DAG:   nn.exp %{{.*}} : tensor<2048xf32>
// CHECK-NOT:   nn.sqrt
func.func @constant_folding() -> (tensor<4096x4096xf32>, tensor<2xf32>, tensor<f32>, tensor<2048xf32>) {
  %s = nn.constant 2.0 : tensor<f32>
  %sb = nn.broadcast %s : tensor<f32> -> tensor<4096x4096xf32>
  %sq = nn.sqrt %sb : tensor<4096x4096xf32>
  %a = nn.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %e = nn.exp %a : tensor<2xf32>
  %t = nn.constant 2.0 : tensor<3xf32>
  %sum = nn.sum %t [0] : tensor<3xf32> -> tensor<f32>
  %big = nn.constant dense<1.0> : tensor<2048xf32>
  %r = nn.constant dense<1.0> : tensor<2048xf32>
  %big2 = nn.add %big, %r : tensor<2048xf32>
  %i = "nn.constant"() {value = dense<[0.5, 1.5]> : tensor<2xf32>} : () -> tensor<2xf32>
  %ib = nn.broadcast %i : tensor<2xf32> -> tensor<1024x2xf32>
  %ibr = nn.reshape %ib : tensor<1024x2xf32> -> tensor<2048xf32>
  %ex = nn.exp %ibr : tensor<2048xf32>
  func.return %sq, %e, %sum, %ex : tensor<4096x4096xf32>, tensor<2xf32>, tensor<f32>, tensor<2048xf32>
}

// -----

// A transpose of the last two dimensions feeding a matmul becomes the matmul's transpose
// flag (toggled: a transposed operand transposed again is read plainly); the transpose
// stays where it has another use, and a batch-dimension permutation is not folded.
// CHECK-LABEL: func.func @transpose_into_matmul
// CHECK-SAME:  (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<16x8xf32>, %[[A:.*]]: tensor<2x8x4xf32>)
// CHECK-NEXT:  %[[R:.*]] = nn.matmul %[[X]], %[[W]] transpose_b : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
// CHECK-NEXT:  %[[R2:.*]] = nn.matmul %[[A]], %[[W]] transpose_a transpose_b : tensor<2x8x4xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT:  %[[P:.*]] = nn.transpose %[[A]] [1, 0, 2] : tensor<2x8x4xf32> -> tensor<8x2x4xf32>
// CHECK-NEXT:  %[[R3:.*]] = nn.matmul %[[P]], %[[X]] : tensor<8x2x4xf32>, tensor<4x8xf32> -> tensor<8x2x8xf32>
// CHECK-NEXT:  func.return %[[R]], %[[R2]], %[[R3]]
func.func @transpose_into_matmul(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %a: tensor<2x8x4xf32>) -> (tensor<4x16xf32>, tensor<2x4x16xf32>, tensor<8x2x8xf32>) {
  %t = nn.transpose %w [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32>
  %r = nn.matmul %x, %t : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %at = nn.transpose %a [0, 2, 1] : tensor<2x8x4xf32> -> tensor<2x4x8xf32>
  %r2 = nn.matmul %at, %w transpose_b : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %p = nn.transpose %a [1, 0, 2] : tensor<2x8x4xf32> -> tensor<8x2x4xf32>
  %r3 = nn.matmul %p, %x : tensor<8x2x4xf32>, tensor<4x8xf32> -> tensor<8x2x8xf32>
  func.return %r, %r2, %r3 : tensor<4x16xf32>, tensor<2x4x16xf32>, tensor<8x2x8xf32>
}

// -----

// A matmul whose contraction has one element is an outer product: a broadcast multiply
// in the result type (bf16 operands of an f32 result converted first; transposed
// operands reshaped, their elements already in order; a rank-2 rhs shared by the
// batch). A contraction of two stays a matmul.
// CHECK-LABEL: func.func @outer_product_matmul
// CHECK-SAME:  (%[[F:.*]]: tensor<1x64x1xf32>, %[[P:.*]]: tensor<1x1x7xf32>, %[[A:.*]]: tensor<2x1x3xbf16>, %[[B:.*]]: tensor<5x1xbf16>, %[[C:.*]]: tensor<3x2xf32>)
// CHECK-NEXT:  %[[FB:.*]] = nn.broadcast %[[F]] : tensor<1x64x1xf32> -> tensor<1x64x7xf32>
// CHECK-NEXT:  %[[PB:.*]] = nn.broadcast %[[P]] : tensor<1x1x7xf32> -> tensor<1x64x7xf32>
// CHECK-NEXT:  %[[R:.*]] = nn.mul %[[FB]], %[[PB]] : tensor<1x64x7xf32>
// CHECK-NEXT:  %[[AW:.*]] = nn.cast %[[A]] : tensor<2x1x3xbf16> -> tensor<2x1x3xf32>
// CHECK-NEXT:  %[[AR:.*]] = nn.reshape %[[AW]] : tensor<2x1x3xf32> -> tensor<2x3x1xf32>
// CHECK-NEXT:  %[[BW:.*]] = nn.cast %[[B]] : tensor<5x1xbf16> -> tensor<5x1xf32>
// CHECK-NEXT:  %[[BR:.*]] = nn.reshape %[[BW]] : tensor<5x1xf32> -> tensor<1x5xf32>
// CHECK-NEXT:  %[[AB:.*]] = nn.broadcast %[[AR]] : tensor<2x3x1xf32> -> tensor<2x3x5xf32>
// CHECK-NEXT:  %[[BB:.*]] = nn.broadcast %[[BR]] : tensor<1x5xf32> -> tensor<2x3x5xf32>
// CHECK-NEXT:  %[[R2:.*]] = nn.mul %[[AB]], %[[BB]] : tensor<2x3x5xf32>
// CHECK-NEXT:  %[[R3:.*]] = nn.matmul %[[C]], %[[C]] transpose_b
// CHECK-NEXT:  func.return %[[R]], %[[R2]], %[[R3]]
func.func @outer_product_matmul(%f: tensor<1x64x1xf32>, %p: tensor<1x1x7xf32>, %a: tensor<2x1x3xbf16>, %b: tensor<5x1xbf16>, %c: tensor<3x2xf32>) -> (tensor<1x64x7xf32>, tensor<2x3x5xf32>, tensor<3x3xf32>) {
  %r = nn.matmul %f, %p : tensor<1x64x1xf32>, tensor<1x1x7xf32> -> tensor<1x64x7xf32>
  %r2 = nn.matmul %a, %b transpose_a transpose_b : tensor<2x1x3xbf16>, tensor<5x1xbf16> -> tensor<2x3x5xf32>
  %r3 = nn.matmul %c, %c transpose_b : tensor<3x2xf32>, tensor<3x2xf32> -> tensor<3x3xf32>
  func.return %r, %r2, %r3 : tensor<1x64x7xf32>, tensor<2x3x5xf32>, tensor<3x3xf32>
}

// -----

// Reductions of a splat too large to evaluate fold symbolically (max, min and mean: the
// splat; a float sum: the splat as stored times the count), never materializing it;
// an integer sum of one is left alone.
// CHECK-LABEL: func.func @huge_splat_reductions
// CHECK-DAG:   nn.constant 1.000000e+09 : tensor<f32>
// CHECK-DAG:   nn.constant 0.10000000149011612 : tensor<100000xf32>
// CHECK-DAG:   nn.constant 0.10000000149011612 : tensor<1x1xf32>
// CHECK-DAG:   nn.sum %{{.*}} [1] keepdim : tensor<100000x100000xi64> -> tensor<100000x1xi64>
// CHECK-NOT:   nn.reduce_min
func.func @huge_splat_reductions() -> (tensor<f32>, tensor<100000xf32>, tensor<1x1xf32>, tensor<100000x1xi64>) {
  %c = nn.constant 0.1 : tensor<100000x100000xf32>
  %s = nn.sum %c [0, 1] : tensor<100000x100000xf32> -> tensor<f32>
  %m = nn.mean %c [1] : tensor<100000x100000xf32> -> tensor<100000xf32>
  %n = nn.reduce_min %c [0, 1] keepdim : tensor<100000x100000xf32> -> tensor<1x1xf32>
  %i = nn.constant 3 : tensor<100000x100000xi64>
  %is = nn.sum %i [1] keepdim : tensor<100000x100000xi64> -> tensor<100000x1xi64>
  func.return %s, %m, %n, %is : tensor<f32>, tensor<100000xf32>, tensor<1x1xf32>, tensor<100000x1xi64>
}

// -----

// Rule: a max or min over an axis of size 0 has no value (torch.amax raises): it is
// never folded to the splat, while the sum of nothing folds to 0 (of any input).
// CHECK-LABEL: func.func @empty_axis
// CHECK:         %[[M:.*]] = nn.reduce_max %{{.*}} [1] keepdim : tensor<4x0xf32> -> tensor<4x1xf32>
// CHECK:         %[[S:.*]] = nn.constant 0.000000e+00 : tensor<4x1xf32>
// CHECK:         func.return %[[M]], %[[S]]
func.func @empty_axis() -> (tensor<4x1xf32>, tensor<4x1xf32>) {
  %c = nn.constant 2.0 : tensor<4x0xf32>
  %m = nn.reduce_max %c [1] keepdim : tensor<4x0xf32> -> tensor<4x1xf32>
  %s = nn.sum %c [1] keepdim : tensor<4x0xf32> -> tensor<4x1xf32>
  func.return %m, %s : tensor<4x1xf32>, tensor<4x1xf32>
}

// -----

// Rule: the sum of nothing is 0 and the mean NaN, whatever computes the empty input.
// CHECK-LABEL: func.func @empty_reductions
// CHECK-NEXT:    %[[S:.*]] = nn.constant 0.000000e+00 : tensor<3xf32>
// CHECK-NEXT:    %[[M:.*]] = nn.constant 0x7ff8000000000000 : tensor<3x1xbf16>
// CHECK-NEXT:    func.return %[[S]], %[[M]]
func.func @empty_reductions(%x: tensor<3x0xf32>, %y: tensor<3x0xbf16>) -> (tensor<3xf32>, tensor<3x1xbf16>) {
  %e = nn.exp %x : tensor<3x0xf32>
  %s = nn.sum %e [1] : tensor<3x0xf32> -> tensor<3xf32>
  %m = nn.mean %y [1] keepdim : tensor<3x0xbf16> -> tensor<3x1xbf16>
  func.return %s, %m : tensor<3xf32>, tensor<3x1xbf16>
}

// -----

// select with a constant condition (or equal branches) is the branch it takes.
// CHECK-LABEL: func.func @select_constant_condition
// CHECK-NEXT:    func.return %a, %b, %a : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
func.func @select_constant_condition(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xi1>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %t = nn.constant true : tensor<4xi1>
  %f = nn.constant false : tensor<4xi1>
  %0 = nn.select %t, %a, %b : tensor<4xf32>
  %1 = nn.select %f, %a, %b : tensor<4xf32>
  %2 = nn.select %c, %a, %a : tensor<4xf32>
  func.return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Keys and values repeated over their query groups (Hugging Face's repeat_kv: reshape to
// [B, Hkv, 1, S, D], broadcast over the group, reshape back) are read unrepeated by the
// attention (grouped-query heads); a value repeated differently, or only the key
// repeated, stays as it is.
// CHECK-LABEL: func.func @attention_reads_kv_unrepeated
// CHECK-SAME:  (%[[Q:.*]]: tensor<1x4x8x16xf32>, %[[K:.*]]: tensor<1x2x8x16xf32>, %[[V:.*]]: tensor<1x2x8x16xf32>)
// CHECK:       %[[KR:.*]] = nn.reshape %{{.*}} : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
// CHECK:       %[[A:.*]] = nn.attention %[[Q]], %[[K]], %[[V]] causal {scale = 2.500000e-01 : f64} : tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x4x8x16xf32>
// CHECK:       nn.attention %[[Q]], %[[KR]], %{{.*}} {scale
// CHECK-NEXT:  func.return %[[A]]
func.func @attention_reads_kv_unrepeated(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) {
  %k5 = nn.reshape %k : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %kb = nn.broadcast %k5 : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %kr = nn.reshape %kb : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %v5 = nn.reshape %v : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %vb = nn.broadcast %v5 : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %vr = nn.reshape %vb : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %a = nn.attention %q, %kr, %vr causal {scale = 0.25 : f64} : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  %vt = nn.transpose %vr [0, 1, 3, 2] : tensor<1x4x8x16xf32> -> tensor<1x4x16x8xf32>
  %vw = nn.reshape %vt : tensor<1x4x16x8xf32> -> tensor<1x4x8x16xf32>
  %b = nn.attention %q, %kr, %vw {scale = 0.25 : f64} : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32> -> tensor<1x4x8x16xf32>
  func.return %a, %b : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>
}

// -----

// A gather of every flat position of its input, in order, is a reshape: Hugging Face
// builds a padding mask as mask[batch_idx, kv_idx] with aranges over both axes.
// CHECK-LABEL: func.func @identity_take
// CHECK-NEXT:    %[[R:.*]] = nn.reshape %m : tensor<2x16xi1> -> tensor<2x1x1x16xi1>
// CHECK-NEXT:    func.return %[[R]]
func.func @identity_take(%m: tensor<2x16xi1>) -> tensor<2x1x1x16xi1> {
  %k = nn.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]]]]> : tensor<1x1x1x16xi64>
  %b = nn.constant dense<[[[[0]]], [[[16]]]]> : tensor<2x1x1x1xi64>
  %bb = nn.broadcast %b : tensor<2x1x1x1xi64> -> tensor<2x1x1x16xi64>
  %kb = nn.broadcast %k : tensor<1x1x1x16xi64> -> tensor<2x1x1x16xi64>
  %i = nn.add %bb, %kb : tensor<2x1x1x16xi64>
  %r = nn.take %m, %i : tensor<2x16xi1>, tensor<2x1x1x16xi64> -> tensor<2x1x1x16xi1>
  func.return %r : tensor<2x1x1x16xi1>
}

// -----

// Left alone: a permutation (here the last axis reversed), and positions that depend
// on an argument.
// CHECK-LABEL: func.func @other_takes
// CHECK:         nn.take %m, %{{.*}} : tensor<2x4xf32>, tensor<2x4xi64> -> tensor<2x4xf32>
// CHECK:         nn.take %m, %p : tensor<2x4xf32>, tensor<2x4xi64> -> tensor<2x4xf32>
func.func @other_takes(%m: tensor<2x4xf32>, %p: tensor<2x4xi64>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %i = nn.constant dense<[[3, 2, 1, 0], [7, 6, 5, 4]]> : tensor<2x4xi64>
  %a = nn.take %m, %i : tensor<2x4xf32>, tensor<2x4xi64> -> tensor<2x4xf32>
  %b = nn.take %m, %p : tensor<2x4xf32>, tensor<2x4xi64> -> tensor<2x4xf32>
  func.return %a, %b : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Elementwise ops on an integer index vector fold only to splats and index vectors: a
// mask or a clamp of positions stays computed (kernels make it from their tile
// indices; folded, it would be dense data); arange + 1 folds (an index vector), and so
// does a cumsum of one (computed, it would be a kernel of its own).
// CHECK-LABEL: func.func @index_vector_folding
// CHECK-DAG:   nn.compare lt
// CHECK-DAG:   nn.max
// CHECK-DAG:   nn.constant dense<[1, 2, 3, 4, 5, 6, 7, 8]> : tensor<8xi64>
// CHECK-DAG:   nn.constant dense<[0, 1, 3, 6, 10, 15, 21, 28]> : tensor<8xi64>
// CHECK-NOT:   nn.cumsum
func.func @index_vector_folding() -> (tensor<8xi1>, tensor<8xi64>, tensor<8xi64>, tensor<8xi64>) {
  %i = nn.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
  %three = nn.constant 3 : tensor<8xi64>
  %one = nn.constant 1 : tensor<8xi64>
  %mask = nn.compare lt, %i, %three : tensor<8xi64>
  %clamped = nn.max %i, %three : tensor<8xi64>
  %next = nn.add %i, %one : tensor<8xi64>
  %sums = nn.cumsum %i axis 0 : tensor<8xi64> -> tensor<8xi64>
  func.return %mask, %clamped, %next, %sums : tensor<8xi1>, tensor<8xi64>, tensor<8xi64>, tensor<8xi64>
}
