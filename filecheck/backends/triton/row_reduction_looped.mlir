// RUN: fuse-opt %s -p "nn-decompose,canonicalize,cse,nn-fuse,convert-nn-to-tile{max-row-block=1024},tile-promote" -t triton | filecheck %s

// Rows of 4096 with rows longer than max-row-block are reduced in column chunks: the
// max and the sum of exp share one loop (online softmax: loop-carried max and sum, the
// sum rescaled by exp(m - m'); the summed exponentials in base 2, exp2), then a loop
// that stores: two passes over the row. A row all -inf sums to NaN, as every term
// exp(-inf - -inf) is.
// tile-promote's row cache (shared memory) has no Triton spelling: both loops read the
// input row itself at the program's row offset, asking L2 to keep it (evict_last).
// CHECK:       def [[K:fused_0_[a-z_]+]](in0_ptr, out0_ptr):
// CHECK-NEXT:      """Schedule row_reduction_looped; block sizes [1, {{[0-9]+}}]."""
// CHECK-NEXT:      pid = tl.program_id(0)
// CHECK-NEXT:      [[M0:c[_0-9]*]] = tl.full([1], float("-inf"), tl.float32)
// CHECK-NEXT:      [[S0:c[_0-9]*]] = tl.full([1], 0.0, tl.float32)
// CHECK-NEXT:      [[M:carried[_0-9]*]] = [[M0]]
// CHECK-NEXT:      [[S:carried[_0-9]*]] = [[S0]]
// CHECK-NEXT:      for [[I:k[_0-9]*]] in range(0, 4096, {{[0-9]+}}):
// CHECK-NEXT:          [[ROW:offs_pid[_0-9]*]] = pid + tl.arange(0, 1)
// CHECK:               tl.load(in0_ptr + [[ROW]][:, None] * 4096 + {{.*}}, eviction_policy="evict_last")
// CHECK:               [[CM:max_[_0-9]*]] = tl.reduce({{.*}}, 1, fuseopt_max)
// CHECK-NEXT:          [[MNEW:max_[_0-9]*]] = tl.maximum([[M]], [[CM]], propagate_nan=tl.PropagateNan.ALL)
// CHECK:               fuseopt_exp2(
// CHECK:               [[CS:sum_[_0-9]*]] = tl.reduce({{.*}}, 1, fuseopt_add)
// CHECK:               [[ALPHA:exp[_0-9]*]] = fuseopt_exp({{.*}})
// CHECK-NEXT:          [[SCALED:mul[_0-9]*]] = [[S]] * [[ALPHA]]
// CHECK-NEXT:          [[SNEW:add[_0-9]*]] = [[SCALED]] + [[CS]]
// CHECK-NEXT:          [[M]] = [[MNEW]]
// CHECK-NEXT:          [[S]] = [[SNEW]]
// CHECK-NEXT:      [[EMPTY:cond[_0-9]*]] = [[M]] == float("-inf")
// CHECK-NEXT:      {{select[_0-9]*}} = tl.where([[EMPTY]], float("nan"), [[S]])
// CHECK-NEXT:      for {{k[_0-9]*}} in range(0, 4096, {{[0-9]+}}):
// CHECK:               tl.store(out0_ptr + {{.*}} * 4096 + {{.*}})
// CHECK-NOT:       for
// CHECK-NOT:   tile.
func.func @softmax_long(%x: tensor<8x4096xbf16>) -> tensor<8x4096xbf16> {
  %r = nn.softmax %x axis 1 : tensor<8x4096xbf16>
  func.return %r : tensor<8x4096xbf16>
}
