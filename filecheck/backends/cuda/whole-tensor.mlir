// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s
// An op the tiler cannot index (concat of transposes) becomes element-parallel
// kernels: a grid-stride loop over output elements with an index map per operand,
// 16 bytes of consecutive outputs per thread and step.

func.func @main(%x: tensor<64x32xf32>, %y: tensor<64x32xf32>) -> tensor<64x64xf32> {
  %a = nn.transpose %x [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>
  %b = nn.transpose %y [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>
  %c = nn.concat %a, %b axis 0 : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
  func.return %c : tensor<64x64xf32>
}

// CHECK: // fuseopt CUDA kernel `main_transpose` (schedule: whole_tensor)
// CHECK: // launch: grid (2), block (256), dynamic shared memory 0 bytes
// CHECK: for (long long fo_o = ((long long)blockIdx.x * 256 + threadIdx.x) * 4;
// CHECK-NEXT: fo_o < 2048LL; fo_o += (long long)gridDim.x * 1024) {
// CHECK-NEXT: const int fo_c1 = (int)fo_o / 1 % 64;
// CHECK-NEXT: const int fo_c0 = (int)fo_o / 64 % 32;
// CHECK: fo_r[3] = (float)(p0[fo_c0 * 1LL + (fo_c1 + 3) * 32LL]);
// CHECK-NEXT: if (fo_aligned(p1 + fo_o, 16)) fo_copy_vec<float, 4>(p1 + fo_o, fo_r);
// CHECK: // fuseopt CUDA kernel `main_concat` (schedule: whole_tensor)
// CHECK: fo_o < 4096LL;
// CHECK: fo_r[0] = (float)((fo_c0 < 32 ? p0[(fo_c0 - 0) * 64LL + (fo_c1 + 0) * 1LL] : p1[(fo_c0 - 32) * 64LL + (fo_c1 + 0) * 1LL]));
