// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s
// Matmul + bias + gelu: the K loop is a 3-stage cp.async pipeline into padded
// shared-memory rows (ragged chunks are zero-filled synchronously), WMMA on bf16 with f32
// accumulation (the transposed weight is read column-major, never transposed), and the
// epilogue runs on the accumulator after it is stored to shared memory.

func.func @main(%x: tensor<256x256xbf16>, %w: tensor<1024x256xbf16>, %b: tensor<1024xbf16>) -> tensor<256x1024xbf16> {
  %l = nn.linear %x, %w, %b : tensor<256x256xbf16>, tensor<1024x256xbf16>, tensor<1024xbf16> -> tensor<256x1024xbf16>
  %g = nn.gelu %l : tensor<256x1024xbf16>
  func.return %g : tensor<256x1024xbf16>
}

// CHECK: // fuseopt CUDA kernel `{{.*}}` (schedule: matmul)
// CHECK: #include <mma.h>
// CHECK: asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
// CHECK: __nv_bfloat16* [[A:pipe]] = reinterpret_cast<__nv_bfloat16*>(fo_smem + 0);
// CHECK: __nv_bfloat16* [[B:pipe_1]] = reinterpret_cast<__nv_bfloat16*>(fo_smem + 55296);
// CHECK: nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> [[ACC:acc]][{{[0-9]+}}];
// CHECK: nvcuda::wmma::fill_fragment([[ACC]][fo_i], {{.*}});
// CHECK: const long long [[TRIPS:trips]] = (256LL - 0LL + 64LL - 1) / 64LL;
// CHECK: for (int fo_s = 0; fo_s < 2; ++fo_s) {
// CHECK: fo_cp_async16([[A]] + (fo_s) * 9216 + (fo_f / 64) * 72 + fo_f % 64, p0 + fo_g);
// CHECK: = (fo_ok && fo_c + 7 < 256) ? p0[fo_g + 7] : fo_to<__nv_bfloat16>::of(0.0f);
// CHECK: fo_cp_async16([[B]] + (fo_s) * 9216
// CHECK: fo_cp_async_commit();
// CHECK: for (long long fo_it = 0; fo_it < [[TRIPS]]; ++fo_it) {
// CHECK-NEXT: fo_cp_async_wait<1>();
// CHECK-NEXT: __syncthreads();
// CHECK: fo_cp_async16([[A]] + ((fo_it + 2) % 3) * 9216
// CHECK: nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> fo_fa
// CHECK: nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::col_major> fo_fb
// CHECK: nvcuda::wmma::load_matrix_sync(fo_fa[0], [[A]] + (fo_it % 3) * 9216 + (((fo_warp / 4) * 4 + 0) * 16) * 72 + fo_kk, 72);
// CHECK: nvcuda::wmma::load_matrix_sync(fo_fb[0], [[B]] + (fo_it % 3) * 9216 + (((fo_warp % 4) * 2 + 0) * 16) * 72 + fo_kk, 72);
// CHECK: nvcuda::wmma::mma_sync([[ACC]][0], fo_fa[0], fo_fb[0], [[ACC]][0]);
// CHECK: fo_cp_async_wait<0>();
// CHECK: nvcuda::wmma::store_matrix_sync(
// CHECK: fo_gelu(
// CHECK: cudaFuncSetAttribute(
