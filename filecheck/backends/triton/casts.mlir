// RUN: fuse-opt %s -t triton | filecheck %s

// Casts to bf16 go through `fuseopt_bf16` from every source type, widened to f32 first
// unless they are f32 (Triton's CPU interpreter truncates f32 and reinterprets the
// bytes of any other source); casts from bf16 through `fuseopt_widen_bf16` (the
// interpreter flushes subnormals); the GPU branches are plain `.to`s. 16-bit floats
// test `!= 0` in f32 (the interpreter would see bf16's -0.0 as the nonzero bits 0x8000).
// CHECK:       def fuseopt_bf16(x):
// CHECK:           if INTERPRETED:
// CHECK:               bits = tl.where(x != x, 0x7FC0, bits >> 16)
// CHECK:           else:
// CHECK-NEXT:          return x.to(tl.bfloat16)
// CHECK:       def fuseopt_widen_bf16(x):
// CHECK:           if INTERPRETED:
// CHECK:               bits = x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16
// CHECK:           else:
// CHECK-NEXT:          return x.to(tl.float32)
// CHECK:       def casts(
// CHECK:           [[F:f[_0-9]*]] = tl.load(in_f32_ptr
// CHECK-NEXT:      [[H:h[_0-9]*]] = tl.load(in_f16_ptr
// CHECK-NEXT:      [[B:b[_0-9]*]] = tl.load(in_bf16_ptr
// CHECK-NEXT:      [[I:i[_0-9]*]] = tl.load(in_i64_ptr
// CHECK-NEXT:      [[P:p[_0-9]*]] = tl.load(in_i1_ptr
// CHECK-NEXT:      {{[a-z_0-9]+}} = fuseopt_bf16([[F]])
// CHECK-NEXT:      {{[a-z_0-9]+}} = fuseopt_bf16([[H]].to(tl.float32))
// CHECK-NEXT:      {{[a-z_0-9]+}} = fuseopt_bf16([[I]].to(tl.float32))
// CHECK-NEXT:      {{[a-z_0-9]+}} = fuseopt_bf16([[P]].to(tl.float32))
// CHECK-NEXT:      {{[a-z_0-9]+}} = fuseopt_widen_bf16([[B]]).to(tl.float16)
// CHECK-NEXT:      {{[a-z_0-9]+}} = [[I]].to(tl.float16)
// CHECK-NEXT:      {{[a-z_0-9]+}} = fuseopt_widen_bf16([[B]]) != 0
// CHECK-NEXT:      {{[a-z_0-9]+}} = [[H]].to(tl.float32) != 0
// CHECK-NEXT:      {{[a-z_0-9]+}} = [[F]] != 0
tile.kernel @casts grid 1 (%in_f32: memref<8xf32>, %in_f16: memref<8xf16>, %in_bf16: memref<8xbf16>, %in_i64: memref<8xi64>, %in_i1: memref<8xi1>, %o0: memref<8xbf16>, %o1: memref<8xbf16>, %o2: memref<8xbf16>, %o3: memref<8xbf16>, %o4: memref<8xf16>, %o5: memref<8xf16>, %o6: memref<8xi1>, %o7: memref<8xi1>, %o8: memref<8xi1>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %c0 = arith.constant 0 : index
  %f = tile.load %in_f32[%c0] : memref<8xf32> -> tensor<8xf32>
  %h = tile.load %in_f16[%c0] : memref<8xf16> -> tensor<8xf16>
  %b = tile.load %in_bf16[%c0] : memref<8xbf16> -> tensor<8xbf16>
  %i = tile.load %in_i64[%c0] : memref<8xi64> -> tensor<8xi64>
  %p = tile.load %in_i1[%c0] : memref<8xi1> -> tensor<8xi1>
  %0 = nn.cast %f : tensor<8xf32> -> tensor<8xbf16>
  %1 = nn.cast %h : tensor<8xf16> -> tensor<8xbf16>
  %2 = nn.cast %i : tensor<8xi64> -> tensor<8xbf16>
  %3 = nn.cast %p : tensor<8xi1> -> tensor<8xbf16>
  %4 = nn.cast %b : tensor<8xbf16> -> tensor<8xf16>
  %5 = nn.cast %i : tensor<8xi64> -> tensor<8xf16>
  %6 = nn.cast %b : tensor<8xbf16> -> tensor<8xi1>
  %7 = nn.cast %h : tensor<8xf16> -> tensor<8xi1>
  %8 = nn.cast %f : tensor<8xf32> -> tensor<8xi1>
  tile.store %0, %o0[%c0] : tensor<8xbf16>, memref<8xbf16>
  tile.store %1, %o1[%c0] : tensor<8xbf16>, memref<8xbf16>
  tile.store %2, %o2[%c0] : tensor<8xbf16>, memref<8xbf16>
  tile.store %3, %o3[%c0] : tensor<8xbf16>, memref<8xbf16>
  tile.store %4, %o4[%c0] : tensor<8xf16>, memref<8xf16>
  tile.store %5, %o5[%c0] : tensor<8xf16>, memref<8xf16>
  tile.store %6, %o6[%c0] : tensor<8xi1>, memref<8xi1>
  tile.store %7, %o7[%c0] : tensor<8xi1>, memref<8xi1>
  tile.store %8, %o8[%c0] : tensor<8xi1>, memref<8xi1>
  tile.return
}
