// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s
// Looped row reduction (softmax over 32768 columns): the first loop copies each chunk
// of the row into shared memory (the row cache), later loops read it from there.

func.func @main(%x: tensor<8x32768xbf16>) -> tensor<8x32768xbf16> {
  %r = nn.softmax %x axis 1 : tensor<8x32768xbf16>
  func.return %r : tensor<8x32768xbf16>
}

// CHECK: // fuseopt CUDA kernel `{{.*}}` (schedule: row_reduction_looped)
// CHECK: __nv_bfloat16* [[ROW:shared[_0-9]*]] = reinterpret_cast<__nv_bfloat16*>(fo_smem + 0);
// CHECK: for (long long [[IV:iv]] = 0LL; [[IV]] < 32768LL; [[IV]] += {{[0-9]+}}LL) {
// CHECK: fo_copy_vec<__nv_bfloat16, 8>([[ROW]] + fo_d_g, p0 + fo_s_g);
// CHECK: __syncthreads();
// CHECK: = fo_group_allreduce<32>({{.*}}, fo_max_op());
// CHECK: for (long long [[IV1:iv_1]] = 0LL;
// CHECK-NOT: p0 +
// CHECK: fo_copy_vec<__nv_bfloat16, 8>(&{{.*}}, [[ROW]] + fo_g);
// CHECK: fo_group_allreduce<32>({{.*}}, fo_sum_op());
// CHECK: for (long long [[IV2:iv_2]] = 0LL;
// CHECK-NOT: p0 +
// CHECK: fo_copy_vec<__nv_bfloat16, 8>(p1 + fo_g,
