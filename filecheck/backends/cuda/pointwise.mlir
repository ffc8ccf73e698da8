// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s
// Pointwise schedule: 16-byte vector loads/stores with a masked scalar tail; the bf16
// math runs in f32 and is rounded once, at the store (nn-widen-intermediates). Every
// chunk starts at a multiple of 8 elements, so the 16-byte alignment is tested on the
// pointer (the same test for every chunk) and only the ragged last column block is
// tested against the row's end.

func.func @main(%x: tensor<64x1000xbf16>, %b: tensor<1000xbf16>) -> tensor<64x1000xbf16> {
  %bb = nn.broadcast %b : tensor<1000xbf16> -> tensor<64x1000xbf16>
  %s = nn.add %x, %bb : tensor<64x1000xbf16>
  %g = nn.gelu %s : tensor<64x1000xbf16>
  func.return %g : tensor<64x1000xbf16>
}

// CHECK-LABEL: // ===== file: fused_0_add_gelu.cu =====
// CHECK: // fuseopt CUDA kernel `fused_0_add_gelu` (schedule: pointwise)
// CHECK: // launch: grid ([[G:[0-9]+]]), block ([[T:[0-9]+]]), dynamic shared memory {{[0-9]+}} bytes
// CHECK: #include <cuda_bf16.h>
// CHECK: extern "C" __global__ void __launch_bounds__([[T]])
// CHECK-NEXT: fused_0_add_gelu(const __nv_bfloat16* __restrict__ [[B:p[0-9]]], const __nv_bfloat16* __restrict__ [[X:p[0-9]]], __nv_bfloat16* __restrict__ [[Y:p[0-9]]])
// CHECK-NOT: fo_aligned({{p[0-9]}} + fo_g
// CHECK: if (fo_ok && fo_c + 8 <= 1000 && fo_aligned([[X]], fo_vec_bytes<__nv_bfloat16, 8>()))
// CHECK-NEXT: fo_copy_vec<__nv_bfloat16, 8>(&{{.*}}, [[X]] + fo_g);
// CHECK: else {
// CHECK-NEXT: = (fo_ok && fo_c + 0 < 1000) ? [[X]][fo_g + 0] : fo_to<__nv_bfloat16>::of(0.0f);
// CHECK: [[G1:t_[0-9]+]][0] = fo_gelu(
// CHECK: [[R:t_[0-9]+]][0] = fo_to<__nv_bfloat16>::of([[G1]][0]);
// CHECK: fo_copy_vec<__nv_bfloat16, 8>([[Y]] + fo_g, &[[R]][0]);
// CHECK: if (fo_ok && fo_c + 7 < 1000) [[Y]][fo_g + 7] =
// CHECK: extern "C" cudaError_t launch_fused_0_add_gelu(
// CHECK: fused_0_add_gelu<<<dim3([[G]], 1, 1), dim3([[T]]), {{[0-9]+}}, stream>>>
