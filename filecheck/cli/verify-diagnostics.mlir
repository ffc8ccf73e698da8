// --verify-diagnostics as in mlir-opt: each error must be annotated at its line with a
// part of its message, and then fuse-opt exits 0. Chunks without errors are printed;
// a chunk with an (expected) error prints nothing.
// RUN: fuse-opt %s --split-input-file --verify-diagnostics | filecheck %s

// CHECK:      func.func @fine
// CHECK:      {{^//}} {{-----$}}
// CHECK-COUNT-6: {{^//}} {{-----$}}
// CHECK-NEXT: builtin.module {
// CHECK-NEXT:   func.func @also_fine

func.func @fine(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %a : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// An annotation on the line of the error.
func.func @same_line(%a: tensor<4xi64>) -> tensor<4xi64> {
  %0 = nn.exp %a : tensor<4xi64>  // expected-error {{needs a floating-point tensor}}
  func.return %0 : tensor<4xi64>
}

// -----

// @+N: N lines below.
func.func @lines_below(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error@+2 {{'nn.sum' op axis 2 is out of range for rank 2}}
  // (the error is on the second line below)
  %0 = nn.sum %a [2] : tensor<4x8xf32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// @-N: N lines above.
func.func @line_above(%a: tensor<4x8xf32>) -> tensor<f32> {
  %0 = nn.sum %a [1, 1] : tensor<4x8xf32> -> tensor<f32>
  // expected-error@-1 {{axes [1, 1] repeat an axis}}
  func.return %0 : tensor<f32>
}

// -----

// @below: the next line without an annotation (the error is the parser's, at `tensor`).
func.func @below(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@below {{Expected ':'}}
  %0 = nn.exp %x tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// @above: the previous line without an annotation.
func.func @above(%a: tensor<4x8xf32>, %b: tensor<7x16xf32>) -> tensor<4x16xf32> {
  %0 = nn.matmul %a, %b : tensor<4x8xf32>, tensor<7x16xf32> -> tensor<4x16xf32>
  // expected-error@above {{contraction dims differ: 8 and 7}}
  func.return %0 : tensor<4x16xf32>
}

// -----

// -re: {{...}} inside the message is a regular expression.
func.func @regex(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error-re@+1 {{'nn.neg' op operand has element type i{{[0-9]+}}; nn supports {{.*}}i64}}
  %0 = nn.neg %a : tensor<4xi32>
  func.return %0 : tensor<4xi32>
}

// -----

func.func @also_fine(%a: tensor<4xf32>) -> tensor<4xf32> {
  func.return %a : tensor<4xf32>
}
