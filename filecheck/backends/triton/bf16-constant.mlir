// RUN: fuse-opt %s -t triton | filecheck %s

// A bf16 splat that is stored (not inlined into an elementwise op) is filled in f32
// and converted: the value is a bf16 already, so the conversion is exact, and Triton
// 3.6's CPU interpreter cannot build bf16 constants. Other types fill directly.
// CHECK:       def constants(
// CHECK:           {{[a-z_0-9]+}} = tl.full([8], -2.5, tl.float32).to(tl.bfloat16)
// CHECK:           {{[a-z_0-9]+}} = tl.full([8], 1.5, tl.float16)
tile.kernel @constants grid 1 (%o0: memref<8xbf16>, %o1: memref<8xf16>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %c0 = arith.constant 0 : index
  %b = nn.constant dense<-2.5> : tensor<8xbf16>
  %h = nn.constant dense<1.5> : tensor<8xf16>
  tile.store %b, %o0[%c0] : tensor<8xbf16>, memref<8xbf16>
  tile.store %h, %o1[%c0] : tensor<8xf16>, memref<8xf16>
  tile.return
}
