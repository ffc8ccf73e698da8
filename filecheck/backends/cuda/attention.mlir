// RUN: fuse-opt %s -p "nn-decompose,canonicalize,cse,nn-fuse,convert-nn-to-tile{attention-block-m=64 attention-block-n=32},tile-promote" -t cuda | filecheck %s
// RUN: not fuse-opt %s --pipeline standard -t cuda 2>&1 | filecheck %s --check-prefix=TOOBIG

// The flash-attention kernel in CUDA C++ at the CUDA backend's sizes (64 queries, 32
// keys a step): every dot on WMMA (bf16 in, f32 accumulation), base-2 exponentials with
// exp2f, two key loops whose bounds depend on the program (the causal diagonal). At the
// Triton sizes (128 x 64) the printer's shared-memory staging exceeds a block's limit,
// and the error names the attention options.
// CHECK:       // fuseopt CUDA kernel `attention` (schedule: attention)
// CHECK-NEXT:  // launch: grid (16), block ({{[0-9]+}}), dynamic shared memory {{[0-9]+}} bytes
// CHECK:       extern "C" __global__ void __launch_bounds__(
// CHECK:       for (long long [[IV:iv]] = 0LL; [[IV]] < {{.*}}; [[IV]] += 32LL) {
// CHECK:         nvcuda::wmma::mma_sync
// CHECK:         exp2f(
// CHECK:         nvcuda::wmma::mma_sync
// CHECK:       for (long long [[IV2:iv_1]] = {{.*}}; [[IV2]] < {{.*}}; [[IV2]] += 32LL) {
// CHECK:         exp2f(

// TOOBIG: error: kernel needs {{[0-9]+}} bytes of shared memory; the limit is 232448: use smaller tile sizes (convert-nn-to-tile{attention-block-m=.. attention-block-n=.. (the CUDA backend's are 64 and 32)})
// TOOBIG-NOT: Traceback
func.func @main(%q: tensor<2x4x100x64xbf16>, %k: tensor<2x2x120x64xbf16>, %v: tensor<2x2x120x64xbf16>) -> tensor<2x4x100x64xbf16> {
  %o = nn.attention %q, %k, %v causal {scale = 0.125 : f64} : tensor<2x4x100x64xbf16>, tensor<2x2x120x64xbf16>, tensor<2x2x120x64xbf16> -> tensor<2x4x100x64xbf16>
  func.return %o : tensor<2x4x100x64xbf16>
}
