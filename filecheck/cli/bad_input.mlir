// Every bad input gets one located error, a non-zero exit, and no traceback; with
// --split-input-file every chunk's error is reported (DIAG), not only the first one's.
// RUN: not fuse-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=DIAG
// RUN: not fuse-opt %s 2>&1 | filecheck %s --check-prefix=FIRST
// RUN: head -n 31 %s | not fuse-opt 2>&1 | filecheck %s --check-prefix=TRUNC
// RUN: not fuse-opt %s -p frobnicate 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not fuse-opt %s -p 'canonicalize{bogus=1}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not fuse-opt %S/does-not-exist.mlir 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not fuse-opt %s -t nonsense 2>&1 | filecheck %s --check-prefix=TARGET
// RUN: not fuse-opt %s -t '' 2>&1 | filecheck %s --check-prefix=EMPTY-TARGET
// RUN: not fuse-opt %s -p 'canonicalize,' 2>&1 | filecheck %s --check-prefix=EMPTY-PASS

// FIRST:       bad_input.mlir:{{[0-9]+}}:{{[0-9]+}}: error: Operation nn.frobnicate is not registered
// FIRST-NOT:   Traceback
// TRUNC:       stdin:{{[0-9]+}}:{{[0-9]+}}: error:
// TRUNC-NOT:   Traceback
// PASS:        fuse-opt: error: Unrecognized passes: ['frobnicate']
// PASS-NOT:    Traceback
// OPTION:      fuse-opt: error: {{.*}}bogus
// OPTION-NOT:  Traceback
// MISSING:     fuse-opt: error: cannot open '{{.*}}does-not-exist.mlir': No such file or directory
// TARGET:      fuse-opt: error: argument -t/--target: invalid choice: 'nonsense'
// EMPTY-TARGET: error: argument -t/--target: empty target name (choose from mlir, triton, cuda)
// EMPTY-PASS:   fuse-opt: error: pass-pipeline:1:13: empty pass name in the pipeline
// EMPTY-PASS-NEXT: canonicalize,
// EMPTY-PASS-NEXT: {{^  +\^$}}

// DIAG: bad_input.mlir:[[# @LINE + 4]]:22: error: Operation nn.frobnicate is not registered
// DIAG-NEXT: %0 = nn.frobnicate %x : tensor<4xf32>
// DIAG-NEXT: ^^
func.func @unknown_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.frobnicate %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// DIAG: bad_input.mlir:{{[0-9]+}}:20: error: expected a ranked tensor type, got i32
func.func @wrong_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %x : i32
  func.return %0 : tensor<4xf32>
}

// -----

// DIAG: bad_input.mlir:{{[0-9]+}}:3: error: 'nn.gelu' op 3 : i64 should be of base attribute string
func.func @bad_attribute(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.gelu %x {approximate = 3 : i64} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// DIAG: error: values used but not defined: [%y]
func.func @undefined_value(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %y : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// DIAG: error: Expected ':'
func.func @missing_colon(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %x tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// DIAG: error: ']' expected
func.func @unclosed_list(%x: tensor<4xf32>) -> tensor<f32> {
  %0 = nn.sum %x [0 : tensor<4xf32> -> tensor<f32>
  func.return %0 : tensor<f32>
}

// -----

// DIAG: error: 'nn.sum' op 3 : i64 should be of base attribute array
func.func @generic_bad_attribute(%x: tensor<4xf32>) -> tensor<f32> {
  %0 = "nn.sum"(%x) {axes = 3 : i64} : (tensor<4xf32>) -> tensor<f32>
  func.return %0 : tensor<f32>
}

// -----

// DIAG: bad_input.mlir:[[# @LINE + 2]]:3: error: 'nn.add' op operand 0 is this op's own result: a value must be defined before it is used
func.func @own_result(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.add %0, %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// DIAG: bad_input.mlir:[[# @LINE + 2]]:3: error: 'nn.add' op operand 0 is used before it is defined (by 'nn.exp' at {{.*}}bad_input.mlir:[[# @LINE + 3]]:3)
func.func @use_before_def(%x: tensor<4xf32>) -> tensor<4xf32> {
  %1 = nn.add %0, %x : tensor<4xf32>
  %0 = nn.exp %x : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// -----

// DIAG: bad_input.mlir:[[# @LINE + 2]]:32: error: dimension 799999999999999999992 is too large: sizes are 64-bit (at most 9223372036854775807)
// DIAG-NEXT: func.func @huge_dim(%x: tensor<799999999999999999992xf32>) {
func.func @huge_dim(%x: tensor<799999999999999999992xf32>) {
  func.return
}

// -----

// DIAG: bad_input.mlir:[[# @LINE + 1]]:34: error: shape 4294967296x4294967296 has 18446744073709551616 elements, more than a 64-bit size can count
func.func @huge_shape(%x: tensor<4294967296x4294967296xf32>) {
  func.return
}

// -----

// DIAG: bad_input.mlir:[[# @LINE + 5]]:1: error: expected '}' to close the region opened at [[# @LINE + 1]]:62 (or an operation, or a block label ^name), got the end of the input
func.func @missing_brace(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>

// -----

// DIAG: bad_input.mlir:[[# @LINE + 1]]:545: error: nesting too deep: operations nest at most 32 levels inside one another's regions
builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module { builtin.module {
} } } } } } } } } } } } } } } } } } } } } } } } } } } } } } } } }
