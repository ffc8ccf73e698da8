// RUN: fuse-opt %s -t triton | filecheck %s

// nn.max, nn.min and max/min reductions propagate NaN (as eager does): every
// tl.maximum / tl.minimum asks for it, in the kernel and in the combine helpers; bf16
// reductions compare in f32 (the CPU interpreter would order bf16's raw bits); relu
// keeps NaN through `tl.where(x < 0, 0, x)`.
// CHECK:       def fuseopt_max(a, b):
// CHECK-NEXT:      # NaN wins
// CHECK-NEXT:      return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
// CHECK:       def fuseopt_min(a, b):
// CHECK-NEXT:      # NaN wins
// CHECK-NEXT:      return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
// CHECK:       def nan_rules(x_ptr, y_ptr, h_ptr, out_ptr, hmax_ptr, hmin_ptr):
// CHECK:           [[A:a[_0-9]*]] = tl.load(x_ptr
// CHECK-NEXT:      [[B:b[_0-9]*]] = tl.load(y_ptr
// CHECK-NEXT:      [[MAX:max[_0-9]*]] = tl.maximum([[A]], [[B]], propagate_nan=tl.PropagateNan.ALL)
// CHECK-NEXT:      [[MIN:min[_0-9]*]] = tl.minimum([[MAX]], [[B]], propagate_nan=tl.PropagateNan.ALL)
// CHECK-NEXT:      relu = tl.where([[MIN]] < 0, 0, [[MIN]])
// CHECK:           [[T:t[_0-9]*]] = tl.load(h_ptr
// CHECK-NEXT:      mx = fuseopt_bf16(tl.reduce([[T]].to(tl.float32), 1, fuseopt_max))
// CHECK-NEXT:      mn = fuseopt_bf16(tl.reduce([[T]].to(tl.float32), 1, fuseopt_min))
tile.kernel @nan_rules grid 1 (%x: memref<4x8xf32>, %y: memref<4x8xf32>, %h: memref<4x8xbf16>, %out: memref<4x8xf32>, %hmax: memref<4xbf16>, %hmin: memref<4xbf16>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %c0 = arith.constant 0 : index
  %a = tile.load %x[%c0, %c0] : memref<4x8xf32> -> tensor<4x8xf32>
  %b = tile.load %y[%c0, %c0] : memref<4x8xf32> -> tensor<4x8xf32>
  %max = nn.max %a, %b : tensor<4x8xf32>
  %min = nn.min %max, %b : tensor<4x8xf32>
  %relu = nn.relu %min : tensor<4x8xf32>
  tile.store %relu, %out[%c0, %c0] : tensor<4x8xf32>, memref<4x8xf32>
  %t = tile.load %h[%c0, %c0] : memref<4x8xbf16> -> tensor<4x8xbf16>
  %mx = tile.reduce max %t axis 1 : tensor<4x8xbf16> -> tensor<4xbf16>
  %mn = tile.reduce min %t axis 1 : tensor<4x8xbf16> -> tensor<4xbf16>
  tile.store %mx, %hmax[%c0] : tensor<4xbf16>, memref<4xbf16>
  tile.store %mn, %hmin[%c0] : tensor<4xbf16>, memref<4xbf16>
  tile.return
}
