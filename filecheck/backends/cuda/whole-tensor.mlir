// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s
// An op the tiler cannot index (a transpose; a concat whose pieces share no part
// size: 3 + 61 rows would be 64 parts of one row) becomes element-parallel kernels: a grid-stride loop over output elements with an index map per operand,
// 16 bytes of consecutive outputs per thread and step.

func.func @main(%x: tensor<64x3xf32>, %y: tensor<64x61xf32>) -> tensor<64x64xf32> {
  %a = nn.transpose %x [1, 0] : tensor<64x3xf32> -> tensor<3x64xf32>
  %b = nn.transpose %y [1, 0] : tensor<64x61xf32> -> tensor<61x64xf32>
  %c = nn.concat %a, %b axis 0 : tensor<3x64xf32>, tensor<61x64xf32> -> tensor<64x64xf32>
  func.return %c : tensor<64x64xf32>
}

// CHECK: // fuseopt CUDA kernel `main_transpose` (schedule: whole_tensor)
// CHECK: // launch: grid (1), block (256), dynamic shared memory 0 bytes
// CHECK: for (long long fo_o = ((long long)blockIdx.x * 256 + threadIdx.x) * 4;
// CHECK-NEXT: fo_o < 192LL; fo_o += (long long)gridDim.x * 1024) {
// CHECK-NEXT: const int fo_c1 = (int)fo_o / 1 % 64;
// CHECK-NEXT: const int fo_c0 = (int)fo_o / 64 % 3;
// CHECK: fo_r[3] = (float)(p0[fo_c0 * 1LL + (fo_c1 + 3) * 3LL]);
// CHECK-NEXT: if (fo_aligned(p1 + fo_o, 16)) fo_copy_vec<float, 4>(p1 + fo_o, fo_r);
// CHECK: // fuseopt CUDA kernel `main_transpose_1` (schedule: whole_tensor)
// CHECK: fo_o < 3904LL;
// CHECK: // fuseopt CUDA kernel `main_concat` (schedule: whole_tensor)
// CHECK: fo_o < 4096LL;
// CHECK: fo_r[0] = (float)((fo_c0 < 3 ? p0[(fo_c0 - 0) * 64LL + (fo_c1 + 0) * 1LL] : p1[(fo_c0 - 3) * 64LL + (fo_c1 + 0) * 1LL]));
