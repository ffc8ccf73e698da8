// --verify-diagnostics fails (exit non-zero) when an expected error is not produced or
// an error was not expected, and says so at the annotation or at the error; every chunk
// is checked. An annotation that cannot be read is an error too.
// RUN: not fuse-opt %s --split-input-file --verify-diagnostics 2>&1 | filecheck %s

// A function that verifies: the expected error never fires.
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE + 2]]:6: error: expected error "needs a floating-point tensor" was not produced
func.func @missing(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{needs a floating-point tensor}}
  %0 = nn.exp %a : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// An error without an annotation.
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE + 2]]:3: error: unexpected error: 'nn.exp' op needs a floating-point tensor, got tensor<4xi64>
func.func @unexpected(%a: tensor<4xi64>) -> tensor<4xi64> {
  %0 = nn.exp %a : tensor<4xi64>
  func.return %0 : tensor<4xi64>
}

// -----

// The right message at the wrong line: both sides are reported.
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE + 4]]:3: error: unexpected error: 'nn.sum' op axis 2 is out of range for rank 2
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE + 2]]:6: error: expected error "axis 2 is out of range" was not produced
func.func @wrong_line(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error@+2 {{axis 2 is out of range}}
  %0 = nn.sum %a [2] : tensor<4x8xf32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// The right line with another message.
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE + 3]]:3: error: unexpected error: 'nn.neg' op operand has element type i32
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE + 2]]:38: error: expected error "is not an integer" was not produced
func.func @wrong_message(%a: tensor<4xi32>) -> tensor<4xi32> {
  %0 = nn.neg %a : tensor<4xi32>  // expected-error {{is not an integer}}
  func.return %0 : tensor<4xi32>
}

// -----

// Annotations that cannot be read. (A CHECK line that spelled out an annotation would be
// read as one: this one writes `expected-{{error}}`.)
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE + 3]]:6: error: unknown designator '@next' (expected @+N, @-N, @above, @below or @unknown)
// CHECK: verify-diagnostics-mismatch.mlir:[[# @LINE + 3]]:6: error: malformed annotation: write expected-{{error}} {{[{][{]}}message{{[}][}]}}
func.func @malformed(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@next {{anything}}
  // expected-error {{no closing braces
  func.return %a : tensor<4xf32>
}
