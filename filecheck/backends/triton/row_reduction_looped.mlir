// RUN: fuse-opt %s -p "nn-decompose,canonicalize,cse,nn-fuse,convert-nn-to-tile{max-row-block=1024},tile-promote" -t triton | filecheck %s

// Rows of 4096 with rows longer than max-row-block are reduced in column chunks: one
// loop per dependent reduction (max, then sum of exp) with loop-carried accumulators,
// then a loop that stores. tile-promote's row cache (shared memory) has no Triton
// spelling: every loop reads the input row itself, at the program's row offset.
// CHECK:       def [[K:fused_0_[a-z_]+]](in0_ptr, out0_ptr):
// CHECK-NEXT:      """Schedule row_reduction_looped; block sizes [1, {{[0-9]+}}]."""
// CHECK-NEXT:      pid = tl.program_id(0)
// CHECK-NEXT:      [[M0:c[_0-9]*]] = tl.full([1], float("-inf"), tl.float32)
// CHECK-NEXT:      [[M:carried[_0-9]*]] = [[M0]]
// CHECK-NEXT:      for [[I:k[_0-9]*]] in range(0, 4096, {{[0-9]+}}):
// CHECK-NEXT:          [[ROW:offs_pid[_0-9]*]] = pid + tl.arange(0, 1)
// CHECK:               tl.load(in0_ptr + [[ROW]][:, None] * 4096 + {{.*}})
// CHECK:               [[M]] = {{.*}}
// CHECK:           for [[J:k[_0-9]*]] in range(0, 4096, {{[0-9]+}}):
// CHECK:               tl.load(in0_ptr + {{offs_pid[_0-9]*}}[:, None] * 4096 + {{.*}})
// CHECK:               tl.exp(
// CHECK:           for {{k[_0-9]*}} in range(0, 4096, {{[0-9]+}}):
// CHECK:               tl.store(out0_ptr + {{.*}} * 4096 + {{.*}})
// CHECK-NOT:   tile.
func.func @softmax_long(%x: tensor<8x4096xbf16>) -> tensor<8x4096xbf16> {
  %r = nn.softmax %x axis 1 : tensor<8x4096xbf16>
  func.return %r : tensor<8x4096xbf16>
}
