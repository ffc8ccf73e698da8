// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s
// An op the tiler cannot index (concat of transposes) becomes element-parallel
// kernels: a grid-stride loop over output elements with an index map per operand.

func.func @main(%x: tensor<64x32xf32>, %y: tensor<64x32xf32>) -> tensor<64x64xf32> {
  %a = nn.transpose %x [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>
  %b = nn.transpose %y [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>
  %c = nn.concat %a, %b axis 0 : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
  func.return %c : tensor<64x64xf32>
}

// CHECK: // fuseopt CUDA kernel `main_transpose` (schedule: whole_tensor)
// CHECK: // launch: grid (8), block (256), dynamic shared memory 0 bytes
// CHECK: for (long long fo_o = (long long)blockIdx.x * 256 + threadIdx.x; fo_o < 2048LL;
// CHECK-NEXT: fo_o += (long long)gridDim.x * 256) {
// CHECK: const int fo_c1 = (int)fo_o / 1 % 64;
// CHECK: p1[fo_o] = (float)(p0[fo_c0 * 1LL + fo_c1 * 32LL]);
// CHECK: // fuseopt CUDA kernel `main_concat` (schedule: whole_tensor)
// CHECK: fo_o < 4096LL;
// CHECK: p2[fo_o] = (float)((fo_c0 < 32 ? p0[(fo_c0 - 0) * 64LL + fo_c1 * 1LL] : p1[(fo_c0 - 32) * 64LL + fo_c1 * 1LL]));
