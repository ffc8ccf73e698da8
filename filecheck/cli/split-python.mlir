// With a target that prints Python (-t triton), the chunks' outputs are separated by
// `# -----`, a Python comment, so that the whole output is one Python file.
// RUN: fuse-opt %s --split-input-file --pipeline standard -t triton -o %t.py
// RUN: %python -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" %t.py
// RUN: filecheck %s < %t.py
// RUN: fuse-opt %s --split-input-file --pipeline standard -t triton | %python -c "import ast, sys; ast.parse(sys.stdin.read())"
// RUN: fuse-opt %s --split-input-file --pipeline standard -t cuda | filecheck %s --check-prefix=CUDA

// CHECK:     def exp_rows(
// CHECK:     {{^# -----$}}
// CHECK-NOT: {{^//}}
// CHECK:     def softmax_rows(
// CUDA:      fused_0_exp
// CUDA:      {{^//}} {{-----$}}
// CUDA:      fused_0_reduce_max

func.func @exp_rows(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.exp %x : tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @softmax_rows(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.softmax %x axis 1 : tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}
