// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s
// RUN: fuse-opt %s -p "nn-decompose,canonicalize,cse,nn-fuse,convert-nn-to-tile{row-cache-bytes=65535},tile-promote" -t cuda | filecheck %s
// RUN: fuse-opt %s -p "nn-decompose,canonicalize,cse,nn-fuse,convert-nn-to-tile{row-cache-bytes=65536},tile-promote" -t cuda | filecheck %s --check-prefix=PERLEVEL
// RUN: fuse-opt %s -p "nn-decompose,canonicalize,cse,nn-fuse,convert-nn-to-tile{online-stats=false},tile-promote" -t cuda | filecheck %s --check-prefix=PERLEVEL
// Looped row reduction (softmax over 32768 columns): the whole row is copied into
// shared memory (the row cache) by cp.async before the first loop, every loop reads it
// from there. The max and the sum of exponentials share one loop (online softmax: each
// chunk's max and sum are combined across the block in the loop, the running sum is
// rescaled by exp(m - m')); a second loop stores the row. So under the standard
// pipeline, and when the row (65536 bytes) does not fit `row-cache-bytes`.
// When it fits (fuseopt.compile's CUDA backend passes tile-promote's 96 KB row-cache budget:
// the row is read from shared memory, so one loop per reduction level costs no HBM
// traffic), or with online-stats=false, each loop folds its reduction into per-thread
// partials, combined across the block once after the loop: max, sum and store loops.

func.func @main(%x: tensor<8x32768xbf16>) -> tensor<8x32768xbf16> {
  %r = nn.softmax %x axis 1 : tensor<8x32768xbf16>
  func.return %r : tensor<8x32768xbf16>
}

// CHECK: // fuseopt CUDA kernel `{{.*}}` (schedule: row_reduction_looped)
// CHECK: __nv_bfloat16* [[ROW:shared[_0-9]*]] = reinterpret_cast<__nv_bfloat16*>(fo_smem + 0);
// CHECK: for (long long [[PRE:pre_iv]] = 0LL; [[PRE]] < 32768LL; [[PRE]] += {{[0-9]+}}LL) {
// CHECK: fo_cp_async16([[ROW]] + fo_d_g, p0 + fo_s_g);
// CHECK: fo_cp_async_commit();
// CHECK-NEXT: fo_cp_async_wait<0>();
// CHECK-NEXT: __syncthreads();
// CHECK-NEXT: for (long long [[IV:iv]] = 0LL; [[IV]] < 32768LL; [[IV]] += {{[0-9]+}}LL) {
// CHECK-NOT: p0 +
// CHECK-NOT: __syncthreads
// CHECK: fo_copy_vec<__nv_bfloat16, 8>(&{{.*}}, [[ROW]] + fo_g);
// CHECK: [[PART:part[_0-9]*]] = fo_max([[PART]],
// CHECK: [[PART]] = fo_group_allreduce<32>([[PART]], fo_max_op());
// CHECK: fo_group_allreduce<32>({{.*}}, fo_sum_op());
// CHECK: = expf(
// CHECK: for (long long [[IV1:iv_1]] = 0LL;
// CHECK-NOT: p0 +
// CHECK: fo_copy_vec<__nv_bfloat16, 8>(p1 + fo_g,

// PERLEVEL: // fuseopt CUDA kernel `{{.*}}` (schedule: row_reduction_looped)
// PERLEVEL: __nv_bfloat16* [[ROW:shared[_0-9]*]] = reinterpret_cast<__nv_bfloat16*>(fo_smem + 0);
// PERLEVEL: for (long long [[PRE:pre_iv]] = 0LL; [[PRE]] < 32768LL; [[PRE]] += {{[0-9]+}}LL) {
// PERLEVEL: fo_cp_async16([[ROW]] + fo_d_g, p0 + fo_s_g);
// PERLEVEL: fo_cp_async_commit();
// PERLEVEL-NEXT: fo_cp_async_wait<0>();
// PERLEVEL-NEXT: __syncthreads();
// PERLEVEL-NEXT: for (long long [[IV:iv]] = 0LL; [[IV]] < 32768LL; [[IV]] += {{[0-9]+}}LL) {
// PERLEVEL-NOT: p0 +
// PERLEVEL-NOT: __syncthreads
// PERLEVEL: fo_copy_vec<__nv_bfloat16, 8>(&{{.*}}, [[ROW]] + fo_g);
// PERLEVEL: [[PART:part[_0-9]*]] = fo_max([[PART]],
// PERLEVEL: [[PART]] = fo_group_allreduce<32>([[PART]], fo_max_op());
// PERLEVEL: for (long long [[IV1:iv_1]] = 0LL;
// PERLEVEL-NOT: p0 +
// PERLEVEL: fo_copy_vec<__nv_bfloat16, 8>(&{{.*}}, [[ROW]] + fo_g);
// PERLEVEL: fo_group_allreduce<32>({{.*}}, fo_sum_op());
// PERLEVEL: for (long long [[IV2:iv_2]] = 0LL;
// PERLEVEL-NOT: p0 +
// PERLEVEL: fo_copy_vec<__nv_bfloat16, 8>(p1 + fo_g,
