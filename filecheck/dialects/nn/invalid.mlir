// RUN: fuse-opt %s --split-input-file --verify-diagnostics

// Invalid nn IR, one case per chunk: each case's `expected-error` names the message and
// the line it must be reported at.

func.func @binary_shape_mismatch(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error@+1 {{'nn.add' op operands must have the same type, got tensor<4x8xf32> and tensor<8xf32>}}
  %0 = "nn.add"(%a, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @float_only(%a: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error@+1 {{'nn.exp' op needs a floating-point tensor, got tensor<4xi64>}}
  %0 = nn.exp %a : tensor<4xi64>
  func.return %0 : tensor<4xi64>
}

// -----

func.func @unsupported_element(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error@+1 {{'nn.neg' op operand has element type i32; nn supports f32, f16, bf16, i1, i64}}
  %0 = nn.neg %a : tensor<4xi32>
  func.return %0 : tensor<4xi32>
}

// -----

func.func @bad_axis(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'nn.sum' op axis 2 is out of range for rank 2}}
  %0 = nn.sum %a [2] : tensor<4x8xf32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @repeated_axis(%a: tensor<4x8xf32>) -> tensor<f32> {
  // expected-error@+1 {{'nn.sum' op axes [1, 1] repeat an axis}}
  %0 = nn.sum %a [1, 1] : tensor<4x8xf32> -> tensor<f32>
  func.return %0 : tensor<f32>
}

// -----

func.func @bad_reduced_shape(%a: tensor<4x8xf32>) -> tensor<4x1xf32> {
  // expected-error@+1 {{'nn.sum' op result shape must be 4, got tensor<4x1xf32>}}
  %0 = nn.sum %a [1] : tensor<4x8xf32> -> tensor<4x1xf32>
  func.return %0 : tensor<4x1xf32>
}

// -----

func.func @mean_of_ints(%a: tensor<4xi64>) -> tensor<i64> {
  // expected-error@+1 {{'nn.mean' op needs a floating-point tensor, got tensor<4xi64>}}
  %0 = nn.mean %a [0] : tensor<4xi64> -> tensor<i64>
  func.return %0 : tensor<i64>
}

// -----

func.func @matmul_k(%a: tensor<4x8xf32>, %b: tensor<7x16xf32>) -> tensor<4x16xf32> {
  // expected-error@+1 {{'nn.matmul' op contraction dims differ: 8 and 7}}
  %0 = nn.matmul %a, %b : tensor<4x8xf32>, tensor<7x16xf32> -> tensor<4x16xf32>
  func.return %0 : tensor<4x16xf32>
}

// -----

func.func @matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x16xf32>) -> tensor<2x4x16xf32> {
  // expected-error@+1 {{'nn.matmul' op batch dims must match (or rhs be rank 2): [2] and [3]}}
  %0 = nn.matmul %a, %b : tensor<2x4x8xf32>, tensor<3x8x16xf32> -> tensor<2x4x16xf32>
  func.return %0 : tensor<2x4x16xf32>
}

// -----

func.func @matmul_dtypes(%a: tensor<4x8xf32>, %b: tensor<8x16xbf16>) -> tensor<4x16xf32> {
  // expected-error@+1 {{'nn.matmul' op operands and result must share an element type}}
  %0 = nn.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xbf16> -> tensor<4x16xf32>
  func.return %0 : tensor<4x16xf32>
}

// -----

func.func @reshape_size(%a: tensor<4x8xf32>) -> tensor<30xf32> {
  // expected-error@+1 {{'nn.reshape' op must keep the number of elements}}
  %0 = nn.reshape %a : tensor<4x8xf32> -> tensor<30xf32>
  func.return %0 : tensor<30xf32>
}

// -----

func.func @not_a_permutation(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error@+1 {{'nn.transpose' op [1, 1] is not a permutation of rank 2}}
  %0 = nn.transpose %a [1, 1] : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %0 : tensor<8x4xf32>
}

// -----

func.func @slice_out_of_bounds(%a: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error@+1 {{'nn.slice' op slice 6:10:1 is invalid for a dim of size 8}}
  %0 = nn.slice %a [0:4, 6:10] : tensor<4x8xf32> -> tensor<4x4xf32>
  func.return %0 : tensor<4x4xf32>
}

// -----

func.func @bad_broadcast(%a: tensor<3xf32>) -> tensor<4x8xf32> {
  // expected-error@+1 {{'nn.broadcast' op cannot broadcast tensor<3xf32> to tensor<4x8xf32>}}
  %0 = nn.broadcast %a : tensor<3xf32> -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @concat_dims(%a: tensor<4x8xf32>, %b: tensor<3x2xf32>) -> tensor<4x10xf32> {
  // expected-error@+1 {{'nn.concat' op operand dims must match off the axis: tensor<3x2xf32>}}
  %0 = nn.concat %a, %b axis 1 : tensor<4x8xf32>, tensor<3x2xf32> -> tensor<4x10xf32>
  func.return %0 : tensor<4x10xf32>
}

// -----

func.func @compare_predicate(%a: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error@+1 {{'nn.compare' op unknown predicate 'almost'; expected one of eq, ne, lt, le, gt, ge}}
  %0 = nn.compare almost, %a, %a : tensor<4xf32>
  func.return %0 : tensor<4xi1>
}

// -----

func.func @select_condition(%c: tensor<4xf32>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'nn.select' op condition must be tensor<4xi1>, got tensor<4xf32>}}
  %0 = "nn.select"(%c, %a, %a) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @gelu_mode(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'nn.gelu' op approximate must be one of ('none', 'tanh'), got 'fast'}}
  %0 = nn.gelu %a {approximate = "fast"} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @float_splat_for_ints() -> tensor<4xi64> {
  // expected-error@+1 {{a float splat needs a floating-point tensor, got tensor<4xi64>}}
  %0 = nn.constant 1.5 : tensor<4xi64>
  func.return %0 : tensor<4xi64>
}

// -----

func.func @dense_type(%a: tensor<4xf32>) -> tensor<3xf32> {
  // expected-error@+1 {{'nn.constant' op dense value has type tensor<2xf32>, result is tensor<3xf32>}}
  %0 = "nn.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}

// -----

func.func @norm_weight(%x: tensor<4x8xf32>, %w: tensor<4xf32>) -> tensor<4x8xf32> {
  // expected-error@+1 {{'nn.rms_norm' op weight must be tensor<8xf32>, got tensor<4xf32>}}
  %0 = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @rms_norm_bias(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error@+1 {{'nn.rms_norm' op takes no bias}}
  %0 = nn.rms_norm %x bias %w {eps = 1.0e-06 : f64} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @softmax_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error@+1 {{'nn.softmax' op axis 2 is out of range for rank 2}}
  %0 = nn.softmax %x axis 2 : tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @linear_weight(%x: tensor<4x8xf32>, %w: tensor<16x7xf32>) -> tensor<4x16xf32> {
  // expected-error@+1 {{'nn.linear' op weight must be [out, 8], got tensor<16x7xf32>}}
  %0 = nn.linear %x, %w : tensor<4x8xf32>, tensor<16x7xf32> -> tensor<4x16xf32>
  func.return %0 : tensor<4x16xf32>
}

// -----

func.func @fusion_args(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'nn.fusion' op block arguments must match the ins operands: (tensor<8xf32>) vs (tensor<4xf32>)}}
  %0 = nn.fusion ins(%x : tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<8xf32>):
    %e = nn.exp %a : tensor<8xf32>
    nn.yield %e : tensor<8xf32>
  }
  func.return %0 : tensor<4xf32>
}

// -----

func.func @fusion_yield(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'nn.fusion' op nn.yield types (tensor<f32>) differ from results (tensor<4xf32>)}}
  %0 = nn.fusion ins(%x : tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %s = nn.sum %a [0] : tensor<4xf32> -> tensor<f32>
    nn.yield %s : tensor<f32>
  }
  func.return %0 : tensor<4xf32>
}

// -----

func.func @fusion_captures(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'nn.fusion' op Operation using value defined out of its IsolatedFromAbove parent}}
  %0 = nn.fusion ins() -> tensor<4xf32> {
    %e = nn.exp %x : tensor<4xf32>
    nn.yield %e : tensor<4xf32>
  }
  func.return %0 : tensor<4xf32>
}

// -----

func.func @yield_outside() -> () {
  %c = nn.constant 1.0 : tensor<4xf32>
  // expected-error-re@+1 {{'nn.yield' op {{.*}}nn.fusion}}
  nn.yield %c : tensor<4xf32>
}

// -----

// nn-fuse's routing attributes are declared on nn.fusion and checked.
func.func @fusion_route(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'nn.fusion' op route must be one of "kernel", "library_gemm", "unfused", got "cublas"}}
  %0 = nn.fusion ins(%x : tensor<4xf32>) -> tensor<4xf32> attributes {route = "cublas"} {
  ^bb0(%a: tensor<4xf32>):
    %e = nn.exp %a : tensor<4xf32>
    nn.yield %e : tensor<4xf32>
  }
  func.return %0 : tensor<4xf32>
}

// -----

func.func @fusion_kind(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'nn.fusion' op kind must be one of "pointwise", "reduction", "matmul", got "scan"}}
  %0 = nn.fusion ins(%x : tensor<4xf32>) -> tensor<4xf32> attributes {kind = "scan"} {
  ^bb0(%a: tensor<4xf32>):
    %e = nn.exp %a : tensor<4xf32>
    nn.yield %e : tensor<4xf32>
  }
  func.return %0 : tensor<4xf32>
}

// -----

func.func @fusion_name(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{should be of base attribute string}}
  %0 = nn.fusion ins(%x : tensor<4xf32>) -> tensor<4xf32> attributes {kernel_name = 3 : i64} {
  ^bb0(%a: tensor<4xf32>):
    %e = nn.exp %a : tensor<4xf32>
    nn.yield %e : tensor<4xf32>
  }
  func.return %0 : tensor<4xf32>
}

// -----

// An IRDL constraint error says what does not verify and why, on one line.
func.func @result_not_a_tensor(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'nn.exp' op result 'result' at position 0 does not verify: f32 should be of base attribute tensor}}
  %0 = "nn.exp"(%x) : (tensor<4xf32>) -> f32
  func.return %x : tensor<4xf32>
}

// -----

func.func @attention_heads(%q: tensor<1x3x8x16xf32>, %k: tensor<1x2x8x16xf32>) -> tensor<1x3x8x16xf32> {
  // expected-error@+1 {{'nn.attention' op 3 query heads are not a multiple of 2 key/value heads}}
  %0 = nn.attention %q, %k, %k {scale = 0.25 : f64} : tensor<1x3x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x3x8x16xf32>
  func.return %0 : tensor<1x3x8x16xf32>
}

// -----

func.func @attention_mask_shape(%q: tensor<1x2x8x16xf32>, %m: tensor<1x2x3x8xi1>) -> tensor<1x2x8x16xf32> {
  // expected-error@+1 {{'nn.attention' op mask must be rank 4 with each dim 1 or that of 1x2x8x8, got tensor<1x2x3x8xi1>}}
  %0 = nn.attention %q, %q, %q mask %m {scale = 0.25 : f64} : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x3x8xi1> -> tensor<1x2x8x16xf32>
  func.return %0 : tensor<1x2x8x16xf32>
}

// -----

func.func @attention_mask_type(%q: tensor<1x2x8x16xbf16>, %m: tensor<1x1x1x8xi64>) -> tensor<1x2x8x16xbf16> {
  // expected-error@+1 {{'nn.attention' op mask must be i1 (keep where true) or bf16 / f32 (added), got tensor<1x1x1x8xi64>}}
  %0 = nn.attention %q, %q, %q mask %m {scale = 0.25 : f64} : tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x2x8x16xbf16>, tensor<1x1x1x8xi64> -> tensor<1x2x8x16xbf16>
  func.return %0 : tensor<1x2x8x16xbf16>
}

// -----

func.func @attention_rank(%q: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  // expected-error@+1 {{'nn.attention' op query, key and value must be rank 4 [batch, heads, seq, dim]}}
  %0 = nn.attention %q, %q, %q {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  func.return %0 : tensor<2x8x16xf32>
}

// -----

func.func @exp2_of_integers(%a: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error@+1 {{'nn.exp2' op needs a floating-point tensor, got tensor<4xi64>}}
  %0 = nn.exp2 %a : tensor<4xi64>
  func.return %0 : tensor<4xi64>
}

// -----

func.func @take_float_index(%w: tensor<8x4xf32>, %p: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error@+1 {{'nn.take' op index must be a tensor of i64, got tensor<3xf32>}}
  %0 = nn.take %w, %p : tensor<8x4xf32>, tensor<3xf32> -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}

// -----

func.func @take_result_shape(%w: tensor<8x4xf32>, %p: tensor<3xi64>) -> tensor<4xf32> {
  // expected-error@+1 {{'nn.take' op result must be tensor<3xf32>, got tensor<4xf32>}}
  %0 = nn.take %w, %p : tensor<8x4xf32>, tensor<3xi64> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @take_from_empty(%w: tensor<0x4xf32>, %p: tensor<3xi64>) -> tensor<3xf32> {
  // expected-error@+1 {{'nn.take' op cannot take from an empty input tensor<0x4xf32>}}
  %0 = nn.take %w, %p : tensor<0x4xf32>, tensor<3xi64> -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}

// -----

func.func @cumsum_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error@+1 {{'nn.cumsum' op axis 2 is out of range for rank 2}}
  %0 = nn.cumsum %x axis 2 : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @cumsum_bool(%x: tensor<4x8xi1>) -> tensor<4x8xi1> {
  // expected-error@+1 {{'nn.cumsum' op cumsum of i1 is not defined; cast to i64 first: tensor<4x8xi1>}}
  %0 = nn.cumsum %x axis 1 : tensor<4x8xi1> -> tensor<4x8xi1>
  func.return %0 : tensor<4x8xi1>
}

// -----

func.func @cumsum_type(%x: tensor<4x8xf32>) -> tensor<4x8xbf16> {
  // expected-error@+1 {{'nn.cumsum' op operand and result must have the same type, got tensor<4x8xf32> and tensor<4x8xbf16>}}
  %0 = nn.cumsum %x axis 1 : tensor<4x8xf32> -> tensor<4x8xbf16>
  func.return %0 : tensor<4x8xbf16>
}

// -----

func.func @rounding_float_only(%a: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error@+1 {{'nn.floor' op needs a floating-point tensor, got tensor<4xi64>}}
  %0 = nn.floor %a : tensor<4xi64>
  func.return %0 : tensor<4xi64>
}

// -----

func.func @remainder_of_bools(%a: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error@+1 {{'nn.fmod' op is not defined on i1 tensors}}
  %0 = nn.fmod %a, %a : tensor<4xi1>
  func.return %0 : tensor<4xi1>
}
