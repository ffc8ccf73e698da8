// --split-input-file processes every chunk, as mlir-opt does: each failing chunk's
// error is reported, the other chunks are still printed, and the exit is non-zero.
// RUN: not fuse-opt %s --split-input-file 2>&1 | filecheck %s
// RUN: not fuse-opt %s --split-input-file -o %t.mlir

// CHECK:      func.func @first
// CHECK:      {{^//}} {{-----$}}
// CHECK-NEXT: split-input-file.mlir:[[# @LINE + 14]]:3: error: 'nn.exp' op needs a floating-point tensor, got tensor<4xi64>
// CHECK-NEXT: {{^//}} {{-----$}}
// CHECK-NEXT: builtin.module {
// CHECK-NEXT:   func.func @third
// CHECK:      {{^//}} {{-----$}}
// CHECK-NEXT: split-input-file.mlir:[[# @LINE + 22]]:3: error: 'nn.sum' op axis 2 is out of range for rank 2

func.func @first(%a: tensor<4xf32>) -> tensor<4xf32> {
  func.return %a : tensor<4xf32>
}

// -----

func.func @second(%a: tensor<4xi64>) -> tensor<4xi64> {
  %0 = nn.exp %a : tensor<4xi64>
  func.return %0 : tensor<4xi64>
}

// -----

func.func @third(%a: tensor<4xf32>) -> tensor<4xf32> {
  func.return %a : tensor<4xf32>
}

// -----

func.func @fourth(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = nn.sum %a [2] : tensor<4x8xf32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
