// RUN: fuse-opt %s --split-input-file --pipeline standard | filecheck %s
// RUN: fuse-opt %s --split-input-file --pipeline standard -t triton | filecheck %s --check-prefix=TRITON
// RUN: fuse-opt %s --split-input-file --pipeline standard -t cuda | filecheck %s --check-prefix=CUDA

// gelu(x[1:-1, 16:-16]): the row slice is a host view (an aligned run); the column
// slice, which nn-fuse cannot index in the gelu's group (16 parts of 16 columns), is
// not copied: the kernel gets the whole buffer as a strided view. Its rows stay apart
// (a view row ends 32 elements before the next begins); the printers add the offset
// to the buffer's pointer and step rows by 256.
// CHECK:       tile.kernel @[[K:.*]] grid 1 (%{{.*}}: memref<62x224xf32, strided<[256, 1], offset: 16>>, %{{.*}}: memref<62x224xf32>)
// CHECK:       tile.load %{{.*}} : memref<62x224xf32, strided<[256, 1], offset: 16>> -> tensor<{{.*}}xf32>
// CHECK-LABEL: func.func @narrow_gelu
// CHECK:       %[[ROWS:.*]] = tile.view %{{.*}} {offset = 256 : i64} : memref<64x256xf32> -> memref<62x256xf32>
// CHECK-NEXT:  tile.launch @[[K]] grid [{{[0-9]+}}] (%[[ROWS]], %{{.*}}) : memref<62x256xf32>, memref<62x224xf32>
// CHECK-NEXT:  func.return
// TRITON:      x = tl.load(in0_ptr + 16 + {{.*}} * 256 + {{.*}}, mask=
// CUDA:        const long long fo_g = 16LL + {{.*}} * 256LL + {{.*}};
func.func @narrow_gelu(%x: tensor<64x256xf32>) -> tensor<62x224xf32> {
  %0 = nn.slice %x [1:63, 0:256] : tensor<64x256xf32> -> tensor<62x256xf32>
  %1 = nn.slice %0 [0:62, 16:240] : tensor<62x256xf32> -> tensor<62x224xf32>
  %2 = nn.gelu %1 : tensor<62x224xf32>
  func.return %2 : tensor<62x224xf32>
}

// -----

// x[:, ::2] * x[:, 1::2]: two strided views of one buffer, both passed %x. The view
// rows follow on from each other (256 = 2 x 128), so the kernel is flat with stride 2.
// The CUDA kernel reads element by element (no 16-byte vector on a stride of 2), the
// threads of a warp consecutive elements (not 8 apiece: sectors read for 4 bytes each).
// CHECK:       tile.kernel @[[K:.*]] grid 1 (%{{.*}}: memref<8192xf32, strided<[2]>>, %{{.*}}: memref<8192xf32, strided<[2], offset: 1>>, %{{.*}}: memref<8192xf32>)
// CHECK-LABEL: func.func @even_times_odd
// CHECK-SAME:  (%[[X:.*]]: memref<64x256xf32>,
// CHECK-NEXT:  tile.launch @[[K]] grid [{{[0-9]+}}] (%[[X]], %[[X]], %{{.*}})
// TRITON:      tl.load(in0_ptr + [[OFFS:.*]] * 2)
// TRITON:      tl.load(in1_ptr + 1 + [[OFFS]] * 2)
// CUDA-LABEL:  fused_0_mul(const float* __restrict__ p0
// CUDA:        const int fo_f = (fo_tid * 1);
// CUDA:        ? p0[fo_g + 0] :
// CUDA-NOT:    p0[fo_g + 2]
func.func @even_times_odd(%x: tensor<64x256xf32>) -> tensor<64x128xf32> {
  %e = nn.slice %x [0:64, 0:256:2] : tensor<64x256xf32> -> tensor<64x128xf32>
  %o = nn.slice %x [0:64, 1:256:2] : tensor<64x256xf32> -> tensor<64x128xf32>
  %y = nn.mul %e, %o : tensor<64x128xf32>
  func.return %y : tensor<64x128xf32>
}

// -----

// RoPE's rotation of the query heads of a merged query/key projection: the query
// columns of the GEMM's result, split into 4 heads of 64 by a reshape nn-fuse leaves
// outside the kernel, are one strided view of the GEMM's buffer (rows 512 apart): no
// copy kernel between the GEMM and the rotation.
// CHECK:       tile.kernel @[[K:.*]] grid 1 (%{{.*}}: memref<64x4x64xf32, strided<[512, 64, 1]>>, %{{.*}}: memref<4x64x64xf32>)
// CHECK-NOT:   tile.kernel
// CHECK-LABEL: func.func @rotated_query_heads
// CHECK:       %[[Y:.*]] = tile.alloc : memref<64x512xf32>
// CHECK-NEXT:  tile.gemm %{{.*}}, %{{.*}} into %[[Y]] transpose_b
// CHECK-NEXT:  tile.launch @[[K]] grid [{{[0-9]+}}] (%[[Y]], %{{.*}}) : memref<64x512xf32>, memref<4x64x64xf32>
// CHECK-NEXT:  func.return
// TRITON:      tl.load(in0_ptr + {{.*}} * 512 + {{.*}} * 64 + {{.*}})
// CUDA:        const long long fo_g = {{.*}} * 512LL + {{.*}} * 64LL + {{.*}};
func.func @rotated_query_heads(%x: tensor<64x32xf32>, %w: tensor<512x32xf32>) -> tensor<4x64x64xf32> {
  %y = nn.matmul %x, %w transpose_b : tensor<64x32xf32>, tensor<512x32xf32> -> tensor<64x512xf32>
  %q = nn.slice %y [0:64, 0:256] : tensor<64x512xf32> -> tensor<64x256xf32>
  %qh = nn.reshape %q : tensor<64x256xf32> -> tensor<64x4x64xf32>
  %t = nn.transpose %qh [1, 0, 2] : tensor<64x4x64xf32> -> tensor<4x64x64xf32>
  %a = nn.slice %t [0:4, 0:64, 0:32] : tensor<4x64x64xf32> -> tensor<4x64x32xf32>
  %b = nn.slice %t [0:4, 0:64, 32:64] : tensor<4x64x64xf32> -> tensor<4x64x32xf32>
  %n = nn.neg %b : tensor<4x64x32xf32>
  %c = nn.concat %n, %a axis 2 : tensor<4x64x32xf32>, tensor<4x64x32xf32> -> tensor<4x64x64xf32>
  %e = nn.mul %t, %c : tensor<4x64x64xf32>
  func.return %e : tensor<4x64x64xf32>
}

// -----

// The same columns split into heads inside the kernel (nn-fuse puts the reshape in the
// exp's group): the reshape is taken out of the kernel as a view of the strided view,
// whose heads then merge back into rows of 256 (contiguous within a row): one kernel.
// CHECK:       tile.kernel @[[K:.*]] grid 1 (%{{.*}}: memref<64x256xf32, strided<[384, 1]>>, %{{.*}}: memref<64x256xf32>)
// CHECK-NOT:   tile.kernel
// CHECK-LABEL: func.func @query_heads_in_the_kernel
// CHECK:       tile.gemm
// CHECK-NEXT:  tile.launch @[[K]]
// CHECK-NEXT:  func.return
func.func @query_heads_in_the_kernel(%x: tensor<64x32xf32>, %w: tensor<384x32xf32>) -> tensor<64x4x64xf32> {
  %y = nn.matmul %x, %w transpose_b : tensor<64x32xf32>, tensor<384x32xf32> -> tensor<64x384xf32>
  %q = nn.slice %y [0:64, 0:256] : tensor<64x384xf32> -> tensor<64x256xf32>
  %qh = nn.reshape %q : tensor<64x256xf32> -> tensor<64x4x64xf32>
  %e = nn.exp %qh : tensor<64x4x64xf32>
  func.return %e : tensor<64x4x64xf32>
}
