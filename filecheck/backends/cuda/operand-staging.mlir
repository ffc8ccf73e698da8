// RUN: fuse-opt %s -p tile-promote -t cuda | filecheck %s --check-prefix=S3
// RUN: fuse-opt %s -p 'tile-promote{num-stages=2}' -t cuda | filecheck %s --check-prefix=S2
// RUN: fuse-opt %s -p 'tile-promote{shared-bytes=70000}' -t cuda | filecheck %s --check-prefix=S1
// RUN: fuse-opt %s -p 'tile-promote{shared-bytes=64}' -t cuda | filecheck %s --check-prefix=REG
// RUN: not fuse-opt %s -p 'tile-promote{shared-bytes=1000000 num-stages=7}' -t cuda 2>&1 | filecheck %s --check-prefix=TOOBIG

// The CUDA printer stages matmul operands as tile-promote decided (operand_staging,
// num_stages; see filecheck/passes/tile-promote.mlir for the decisions on this kernel),
// and takes exactly the shared memory tile-promote recorded (shared_bytes): the operand
// stages (rows padded to 72 bf16), then the epilogue's f32 accumulator after them, or
// over them (once the K loop is done) where both do not fit that budget.

// Default: a 3-stage cp.async pipeline.
// S3:      dynamic shared memory 176128 bytes
// S3:      __nv_bfloat16* [[A:pipe]] = reinterpret_cast<__nv_bfloat16*>(fo_smem + 0);
// S3-NEXT: __nv_bfloat16* [[B:pipe_1]] = reinterpret_cast<__nv_bfloat16*>(fo_smem + 55296);
// S3-NEXT: float* [[C:accsm]] = reinterpret_cast<float*>(fo_smem + 110592);
// S3:      for (int fo_s = 0; fo_s < 2; ++fo_s) {
// S3:      fo_cp_async16([[A]] + (fo_s) * 9216 + (fo_f / 64) * 72 + fo_f % 64, p0 + fo_g);
// S3:      for (long long fo_it = 0; fo_it < {{.*}}; ++fo_it) {
// S3-NEXT:   fo_cp_async_wait<1>();
// S3-NEXT:   __syncthreads();
// S3:        fo_cp_async16([[A]] + ((fo_it + 2) % 3) * 9216
// S3:        nvcuda::wmma::load_matrix_sync(fo_fa[0], [[A]] + (fo_it % 3) * 9216 + {{.*}}, 72);
// S3:      fo_cp_async_wait<0>();
// S3-NEXT: __syncthreads();
// S3:      nvcuda::wmma::store_matrix_sync([[C]] +

// num-stages=2: a 2-stage pipeline (each iteration waits for its own group).
// S2:      dynamic shared memory 139264 bytes
// S2:      __nv_bfloat16* [[A:pipe]] = reinterpret_cast<__nv_bfloat16*>(fo_smem + 0);
// S2-NEXT: __nv_bfloat16* [[B:pipe_1]] = reinterpret_cast<__nv_bfloat16*>(fo_smem + 36864);
// S2-NEXT: float* {{accsm}} = reinterpret_cast<float*>(fo_smem + 73728);
// S2:      for (int fo_s = 0; fo_s < 1; ++fo_s) {
// S2:      for (long long fo_it = 0; fo_it < {{.*}}; ++fo_it) {
// S2-NEXT:   fo_cp_async_wait<0>();
// S2-NEXT:   __syncthreads();
// S2:        fo_cp_async16([[B]] + ((fo_it + 1) % 2) * 9216
// S2:        nvcuda::wmma::load_matrix_sync(fo_fb[0], [[B]] + (fo_it % 2) * 9216 + {{.*}}, 72);

// A 70000-byte budget holds one stage, and the accumulator only over it (offset 0):
// operands copied synchronously into one buffer, between two barriers, no cp.async.
// S1:      dynamic shared memory 65536 bytes
// S1-NOT:  cp.async
// S1:      __nv_bfloat16* [[A:pipe]] = reinterpret_cast<__nv_bfloat16*>(fo_smem + 0);
// S1-NEXT: __nv_bfloat16* [[B:pipe_1]] = reinterpret_cast<__nv_bfloat16*>(fo_smem + 18432);
// S1-NEXT: float* {{accsm}} = reinterpret_cast<float*>(fo_smem + 0);
// S1:      for (long long fo_it = 0; fo_it < {{.*}}; ++fo_it) {
// S1-NEXT:   const long long fo_next_iv = 0LL + fo_it * 64LL;
// S1-NEXT:   __syncthreads();
// S1:        if (fo_ok && fo_c + 8 <= 128 && fo_aligned(p0 + fo_g, 16)) {
// S1-NEXT:     fo_copy_vec<__nv_bfloat16, 8>([[A]] + (fo_f / 64) * 72 + fo_f % 64, p0 + fo_g);
// S1:          ([[B]] + (fo_f / 64) * 72 + fo_f % 64)[7] = (fo_ok && fo_c + 7 < 128) ? p1[fo_g + 7] : fo_to<__nv_bfloat16>::of(0.0f);
// S1:        __syncthreads();
// S1:        nvcuda::wmma::load_matrix_sync(fo_fa[0], [[A]] + {{.*}}, 72);
// S1-NOT:  fo_cp_async

// A 64-byte budget: operands in registers. No shared memory at all and no tensor
// cores: each thread's accumulator chunks gather A and B from global memory, every
// element under its bounds mask (zero outside), and the epilogue runs in registers.
// REG:      dynamic shared memory 0 bytes
// REG-NOT:  wmma
// REG-NOT:  fo_smem +
// REG:      alignas(16) float [[ACC:acc]][64];
// REG:      for (long long [[K:iv]] = 0LL; [[K]] < 128LL; [[K]] += 64LL) {
// REG-NEXT:   for (int fo_q = 0; fo_q < 64; ++fo_q) {
// REG:          const float fo_a = (((i_8 + fo_m) < 256 && ([[K]] + fo_q) < 128) ? fo_f(p0[(i_8 + fo_m) * 128LL + ([[K]] + fo_q)]) : fo_f(fo_to<__nv_bfloat16>::of(0.0f)));
// REG-NEXT:     [[ACC]][0] += fo_a * (((i_9 + fo_n) < 256 && ([[K]] + fo_q) < 128) ? fo_f(p1[(i_9 + fo_n) * 128LL + ([[K]] + fo_q)]) : fo_f(fo_to<__nv_bfloat16>::of(0.0f)));
// REG-NOT:  wmma
// REG-NOT:  fo_smem +

// 7 stages do not fit the device (258048 bytes > 227 KiB, even with the accumulator
// over them): an error at the kernel.
// TOOBIG: operand-staging.mlir:[[# @LINE + 2]]:1: error: kernel needs 258048 bytes of shared memory; the limit is 232448: use smaller tile sizes (convert-nn-to-tile{block-m=.. block-n=.. block-k=..}) or a lower tile-promote{shared-bytes=..}
// TOOBIG-NOT: Traceback
tile.kernel @mm grid 1 (%0: memref<256x128xbf16>, %1: memref<256x128xbf16>, %2: memref<256x256xbf16>) attributes {schedule = "matmul", iteration_sizes = array<i64: 256, 256>, block_sizes = array<i64: 128, 128>, block_k = 64 : i64, group_m = 8 : i64} {
  %3 = arith.constant 16 : index
  %4 = arith.constant 8 : index
  %5 = arith.constant 2 : index
  %6 = arith.constant 128 : index
  %7 = arith.constant 0 : index
  %8 = arith.constant 64 : index
  %9 = tile.program_id 0
  %10 = arith.divsi %9, %3 : index
  %11 = arith.muli %10, %4 : index
  %12 = arith.subi %5, %11 : index
  %13 = arith.minsi %12, %4 : index
  %14 = arith.remsi %9, %3 : index
  %15 = arith.remsi %14, %13 : index
  %16 = arith.addi %11, %15 : index
  %17 = arith.divsi %14, %13 : index
  %18 = arith.muli %16, %6 : index
  %19 = arith.muli %17, %6 : index
  %20 = nn.constant 0.000000e+00 : tensor<128x128xf32>
  %21 = scf.for %22 = %7 to %6 step %8 iter_args(%23 = %20) -> (tensor<128x128xf32>) {
    %24 = tile.load %0[%18, %22] : memref<256x128xbf16> -> tensor<128x64xbf16>
    %25 = tile.load %1[%19, %22] : memref<256x128xbf16> -> tensor<128x64xbf16>
    %26 = tile.transpose %25 [1, 0] : tensor<128x64xbf16> -> tensor<64x128xbf16>
    %27 = tile.dot %24, %26, %23 : tensor<128x64xbf16>, tensor<64x128xbf16>, tensor<128x128xf32>
    scf.yield %27 : tensor<128x128xf32>
  }
  %28 = nn.cast %21 : tensor<128x128xf32> -> tensor<128x128xbf16>
  tile.store %28, %2[%18, %19] : tensor<128x128xbf16>, memref<256x256xbf16>
  tile.return
}
func.func @matmul(%0: memref<256x128xbf16>, %1: memref<256x128xbf16>, %2: memref<256x256xbf16> {tile.output}) {
  tile.launch @mm grid [4] (%0, %1, %2) : memref<256x128xbf16>, memref<256x128xbf16>, memref<256x256xbf16>
  func.return
}
