// RUN: fuse-opt %s --split-input-file -p nn-widen-intermediates | filecheck %s
// RUN: fuse-opt %s --split-input-file -p nn-widen-intermediates,nn-widen-intermediates | filecheck %s

// Rule: a bf16 chain computes in f32; its argument is widened where it is first read
// and the yielded value is rounded once.
// CHECK-LABEL: func.func @chain
// CHECK:         ^bb0(%[[A:.*]]: tensor<8xbf16>):
// CHECK-NEXT:      %[[W:.*]] = nn.cast %[[A]] : tensor<8xbf16> -> tensor<8xf32>
// CHECK-NEXT:      %[[E:.*]] = nn.exp %[[W]] : tensor<8xf32>
// CHECK-NEXT:      %[[C:.*]] = nn.constant 1.000000e-01 : tensor<8xf32>
// CHECK-NEXT:      %[[M:.*]] = nn.mul %[[E]], %[[C]] : tensor<8xf32>
// CHECK-NEXT:      %[[R:.*]] = nn.cast %[[M]] : tensor<8xf32> -> tensor<8xbf16>
// CHECK-NEXT:      nn.yield %[[R]] : tensor<8xbf16>
func.func @chain(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %0 = nn.fusion ins(%x : tensor<8xbf16>) -> tensor<8xbf16> {
  ^bb0(%a: tensor<8xbf16>):
    %e = nn.exp %a : tensor<8xbf16>
    %c = nn.constant 0.1 : tensor<8xbf16>
    %m = nn.mul %e, %c : tensor<8xbf16>
    nn.yield %m : tensor<8xbf16>
  }
  func.return %0 : tensor<8xbf16>
}

// -----

// Rule: an explicit conversion to bf16 rounds, as written (readers widen the rounded
// value); the bf16 op after it computes in f32; a conversion to an integer reads the
// rounded value, as eager truncates it.
// CHECK-LABEL: func.func @casts
// CHECK:         ^bb0(%[[A:.*]]: tensor<4xf32>):
// CHECK-NEXT:      %[[T:.*]] = nn.tanh %[[A]] : tensor<4xf32>
// CHECK-NEXT:      %[[H:.*]] = nn.cast %[[T]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NEXT:      %[[HW:.*]] = nn.cast %[[H]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK-NEXT:      %[[N:.*]] = nn.neg %[[HW]] : tensor<4xf32>
// CHECK-NEXT:      %[[R:.*]] = nn.cast %[[N]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NEXT:      %[[I:.*]] = nn.cast %[[R]] : tensor<4xbf16> -> tensor<4xi64>
// CHECK-NEXT:      nn.yield %[[N]], %[[I]] : tensor<4xf32>, tensor<4xi64>
func.func @casts(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi64>) {
  %0, %1 = nn.fusion ins(%x : tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi64>) {
  ^bb0(%a: tensor<4xf32>):
    %t = nn.tanh %a : tensor<4xf32>
    %h = nn.cast %t : tensor<4xf32> -> tensor<4xbf16>
    %n = nn.neg %h : tensor<4xbf16>
    %f = nn.cast %n : tensor<4xbf16> -> tensor<4xf32>
    %i = nn.cast %n : tensor<4xbf16> -> tensor<4xi64>
    nn.yield %f, %i : tensor<4xf32>, tensor<4xi64>
  }
  func.return %0, %1 : tensor<4xf32>, tensor<4xi64>
}

// -----

// Rule: a matmul in a generated kernel reads its 16-bit operands and gives its f32
// accumulator; its epilogue (bias add and activation) is computed in f32 and rounded once.
// CHECK-LABEL: func.func @matmul_epilogue
// CHECK:         ^bb0(%[[X:.*]]: tensor<4x8xf16>, %[[W:.*]]: tensor<8x16xf16>, %[[B:.*]]: tensor<4x16xf16>):
// CHECK-NEXT:      %[[M:.*]] = nn.matmul %[[X]], %[[W]] : tensor<4x8xf16>, tensor<8x16xf16> -> tensor<4x16xf32>
// CHECK-NEXT:      %[[BW:.*]] = nn.cast %[[B]] : tensor<4x16xf16> -> tensor<4x16xf32>
// CHECK-NEXT:      %[[S:.*]] = nn.add %[[M]], %[[BW]] : tensor<4x16xf32>
// CHECK-NEXT:      %[[G:.*]] = nn.gelu %[[S]] : tensor<4x16xf32>
// CHECK-NEXT:      %[[R:.*]] = nn.cast %[[G]] : tensor<4x16xf32> -> tensor<4x16xf16>
// CHECK-NEXT:      nn.yield %[[R]] : tensor<4x16xf16>
func.func @matmul_epilogue(%x: tensor<4x8xf16>, %w: tensor<8x16xf16>, %b: tensor<4x16xf16>) -> tensor<4x16xf16> {
  %0 = nn.fusion ins(%x, %w, %b : tensor<4x8xf16>, tensor<8x16xf16>, tensor<4x16xf16>) -> tensor<4x16xf16> attributes {route = "kernel"} {
  ^bb0(%a: tensor<4x8xf16>, %c: tensor<8x16xf16>, %d: tensor<4x16xf16>):
    %m = nn.matmul %a, %c : tensor<4x8xf16>, tensor<8x16xf16> -> tensor<4x16xf16>
    %s = nn.add %m, %d : tensor<4x16xf16>
    %g = nn.gelu %s : tensor<4x16xf16>
    nn.yield %g : tensor<4x16xf16>
  }
  func.return %0 : tensor<4x16xf16>
}

// -----

// Rule: a library GEMM writes its result to memory in its own type, as eager does; the
// epilogue kernel reads it and computes in f32.
// CHECK-LABEL: func.func @library_gemm
// CHECK:         %[[M:.*]] = nn.matmul %{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
// CHECK-NEXT:    %[[MW:.*]] = nn.cast %[[M]] : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT:    %[[T:.*]] = nn.tanh %[[MW]] : tensor<4x16xf32>
func.func @library_gemm(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>) -> tensor<4x16xbf16> {
  %0 = nn.fusion ins(%x, %w : tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16> attributes {route = "library_gemm"} {
  ^bb0(%a: tensor<4x8xbf16>, %c: tensor<8x16xbf16>):
    %m = nn.matmul %a, %c : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
    %t = nn.tanh %m : tensor<4x16xbf16>
    nn.yield %t : tensor<4x16xbf16>
  }
  func.return %0 : tensor<4x16xbf16>
}

// -----

// Rule: reductions, views, compares and selects of a group are widened together; an
// i1 mask stays as it is.
// CHECK-LABEL: func.func @reduction
// CHECK:         %[[W:.*]] = nn.cast %{{.*}} : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT:    %[[MX:.*]] = nn.reduce_max %[[W]] [1] keepdim : tensor<2x4xf32> -> tensor<2x1xf32>
// CHECK-NEXT:    %[[B:.*]] = nn.broadcast %[[MX]] : tensor<2x1xf32> -> tensor<2x4xf32>
// CHECK-NEXT:    %[[P:.*]] = nn.compare lt, %[[W]], %[[B]] : tensor<2x4xf32>
// CHECK-NEXT:    %[[S:.*]] = nn.select %[[P]], %[[W]], %[[B]] : tensor<2x4xf32>
// CHECK-NEXT:    %[[R:.*]] = nn.cast %[[S]] : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK-NEXT:    nn.yield %[[R]], %[[P]] : tensor<2x4xbf16>, tensor<2x4xi1>
func.func @reduction(%x: tensor<2x4xbf16>) -> (tensor<2x4xbf16>, tensor<2x4xi1>) {
  %0, %1 = nn.fusion ins(%x : tensor<2x4xbf16>) -> (tensor<2x4xbf16>, tensor<2x4xi1>) {
  ^bb0(%a: tensor<2x4xbf16>):
    %m = nn.reduce_max %a [1] keepdim : tensor<2x4xbf16> -> tensor<2x1xbf16>
    %b = nn.broadcast %m : tensor<2x1xbf16> -> tensor<2x4xbf16>
    %p = nn.compare lt, %a, %b : tensor<2x4xbf16>
    %s = nn.select %p, %a, %b : tensor<2x4xbf16>
    nn.yield %s, %p : tensor<2x4xbf16>, tensor<2x4xi1>
  }
  func.return %0, %1 : tensor<2x4xbf16>, tensor<2x4xi1>
}

// -----

// Rule: ops outside fusion groups run one at a time and keep eager's rounding; a group
// with nothing narrow is left as it is.
// CHECK-LABEL: func.func @outside
// CHECK:         %[[E:.*]] = nn.exp %x : tensor<4xbf16>
// CHECK:         nn.fusion
// CHECK-NEXT:    ^bb0(%[[A:.*]]: tensor<4xf32>):
// CHECK-NEXT:      %[[N:.*]] = nn.neg %[[A]] : tensor<4xf32>
// CHECK-NEXT:      nn.yield %[[N]] : tensor<4xf32>
func.func @outside(%x: tensor<4xbf16>, %y: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>) {
  %e = nn.exp %x : tensor<4xbf16>
  %0 = nn.fusion ins(%y : tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %n = nn.neg %a : tensor<4xf32>
    nn.yield %n : tensor<4xf32>
  }
  func.return %e, %0 : tensor<4xbf16>, tensor<4xf32>
}

// -----

// Rule: a view of a 16-bit input stays 16-bit and is widened after the view, so the
// backends still index the broadcast weight straight from memory.
// CHECK-LABEL: func.func @view_of_input
// CHECK:         ^bb0(%[[A:.*]]: tensor<4x8xbf16>, %[[W:.*]]: tensor<8xbf16>):
// CHECK-NEXT:      %[[B:.*]] = nn.broadcast %[[W]] : tensor<8xbf16> -> tensor<4x8xbf16>
// CHECK-NEXT:      %[[AW:.*]] = nn.cast %[[A]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT:      %[[BW:.*]] = nn.cast %[[B]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT:      %[[M:.*]] = nn.mul %[[AW]], %[[BW]] : tensor<4x8xf32>
func.func @view_of_input(%x: tensor<4x8xbf16>, %w: tensor<8xbf16>) -> tensor<4x8xbf16> {
  %0 = nn.fusion ins(%x, %w : tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16> {
  ^bb0(%a: tensor<4x8xbf16>, %c: tensor<8xbf16>):
    %b = nn.broadcast %c : tensor<8xbf16> -> tensor<4x8xbf16>
    %m = nn.mul %a, %b : tensor<4x8xbf16>
    nn.yield %m : tensor<4x8xbf16>
  }
  func.return %0 : tensor<4x8xbf16>
}

// -----

// Rule: a gather reads its table from memory by address: the take stays bf16 (a
// kernel gathers only from its inputs) and its result is widened after it.
// CHECK-LABEL: func.func @take
// CHECK:         ^bb0(%[[W:.*]]: tensor<64x32xbf16>, %[[P:.*]]: tensor<8x32xi64>, %[[B:.*]]: tensor<8x32xbf16>):
// CHECK-NEXT:      %[[T:.*]] = nn.take %[[W]], %[[P]] : tensor<64x32xbf16>, tensor<8x32xi64> -> tensor<8x32xbf16>
// CHECK-NEXT:      %[[TW:.*]] = nn.cast %[[T]] : tensor<8x32xbf16> -> tensor<8x32xf32>
// CHECK-NEXT:      %[[BW:.*]] = nn.cast %[[B]] : tensor<8x32xbf16> -> tensor<8x32xf32>
// CHECK-NEXT:      nn.add %[[TW]], %[[BW]] : tensor<8x32xf32>
func.func @take(%w: tensor<64x32xbf16>, %p: tensor<8x32xi64>, %b: tensor<8x32xbf16>) -> tensor<8x32xbf16> {
  %0 = nn.fusion ins(%w, %p, %b : tensor<64x32xbf16>, tensor<8x32xi64>, tensor<8x32xbf16>) -> tensor<8x32xbf16> {
  ^bb0(%a: tensor<64x32xbf16>, %q: tensor<8x32xi64>, %c: tensor<8x32xbf16>):
    %t = nn.take %a, %q : tensor<64x32xbf16>, tensor<8x32xi64> -> tensor<8x32xbf16>
    %s = nn.add %t, %c : tensor<8x32xbf16>
    nn.yield %s : tensor<8x32xbf16>
  }
  func.return %0 : tensor<8x32xbf16>
}
