// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s
// Row reduction (whole row in registers): warp shuffles, then the warps' partials
// meet in shared memory; the rsqrt result is broadcast back along the row.

func.func @main(%x: tensor<64x4096xbf16>, %w: tensor<4096xbf16>, %b: tensor<4096xbf16>) -> tensor<64x4096xbf16> {
  %r = nn.layer_norm %x weight %w bias %b {eps = 1.0e-05 : f64} : tensor<64x4096xbf16>, tensor<4096xbf16>, tensor<4096xbf16> -> tensor<64x4096xbf16>
  func.return %r : tensor<64x4096xbf16>
}

// CHECK: // fuseopt CUDA kernel `{{.*}}` (schedule: row_reduction)
// CHECK: // launch: grid (64), block ([[T:[0-9]+]])
// CHECK: float* {{red[_0-9]*}} = reinterpret_cast<float*>(fo_smem + 0);
// CHECK: [[P:part[_0-9]*]] = fo_group_allreduce<32>([[P]], fo_sum_op());
// CHECK: if (fo_lane == 0) {
// CHECK-NEXT: [[RED:red[_0-9]*]][0 + fo_warp] = [[P]];
// CHECK: __syncthreads();
// CHECK-NEXT: [[P]] = [[RED]][0];
// CHECK: (1.0f / sqrtf(
