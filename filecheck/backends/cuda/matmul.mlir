// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s
// Matmul + bias + gelu: operand tiles staged in shared memory, WMMA (bf16, f32
// accumulation, rows padded by 16 bytes against bank conflicts; the transposed weight
// is read column-major, never transposed), the
// epilogue runs on the accumulator after it is stored to shared memory.

func.func @main(%x: tensor<256x256xbf16>, %w: tensor<1024x256xbf16>, %b: tensor<1024xbf16>) -> tensor<256x1024xbf16> {
  %l = nn.linear %x, %w, %b : tensor<256x256xbf16>, tensor<1024x256xbf16>, tensor<1024xbf16> -> tensor<256x1024xbf16>
  %g = nn.gelu %l : tensor<256x1024xbf16>
  func.return %g : tensor<256x1024xbf16>
}

// CHECK: // fuseopt CUDA kernel `{{.*}}` (schedule: matmul)
// CHECK: #include <mma.h>
// CHECK: nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> [[ACC:acc]][{{[0-9]+}}];
// CHECK: nvcuda::wmma::fill_fragment([[ACC]][fo_i], {{.*}});
// CHECK: for (long long {{.*}} += 64LL) {
// CHECK: __syncthreads();
// CHECK: fo_copy_vec<__nv_bfloat16, 8>(&[[A:stage]][((fo_tid * 8) / 64) * 72 + (fo_tid * 8) % 64], &{{.*}});
// CHECK: fo_copy_vec<__nv_bfloat16, 8>(&[[B:stage_1]][
// CHECK: __syncthreads();
// CHECK: nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> fo_fa
// CHECK: nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::col_major> fo_fb
// CHECK: nvcuda::wmma::load_matrix_sync(fo_fa[0], [[A]] + (((fo_warp / 4) * 4 + 0) * 16) * 72 + fo_kk, 72);
// CHECK: nvcuda::wmma::load_matrix_sync(fo_fb[0], [[B]] + (((fo_warp % 4) * 2 + 0) * 16) * 72 + fo_kk, 72);
// CHECK: nvcuda::wmma::mma_sync([[ACC]][0], fo_fa[0], fo_fb[0], [[ACC]][0]);
// CHECK: nvcuda::wmma::store_matrix_sync(
// CHECK: fo_gelu(
// CHECK: cudaFuncSetAttribute(
