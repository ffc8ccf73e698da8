// RUN: fuse-opt %s -t triton | filecheck %s

// A row cache whose rank is below its source's (the per-program dim dropped): the copy
// %src[%pid, %r, 0] -> %cache[%r, 0] of a [1, 128] box covers the trailing dims of
// each, so a read %cache[%i, 0] is the source's [%pid, %i, 0] (Triton has no shared
// memory: it reads the source, masked to the 100 columns it has).
// CHECK:       def row_cache(src_ptr, out_ptr):
// CHECK-NEXT:      """Schedule row_reduction_looped; block sizes [1, 1, 128]."""
// CHECK-NEXT:      pid = tl.program_id(0)
// CHECK:           for r in range(0, 3, 1):
// CHECK-NEXT:          [[R:offs_r[_0-9]*]] = r + tl.arange(0, 1)
// CHECK-NEXT:          [[C:offs[_0-9]*]] = tl.arange(0, 128)
// CHECK-NEXT:          row = tl.load(src_ptr + pid * 300 + [[R]][:, None] * 100 + [[C]][None, :], mask={{.*}}([[C]][None, :] < 100), other=0.0, eviction_policy="evict_last")
// CHECK:           for i in range(0, 3, 1):
// CHECK-NEXT:          [[I:offs_i[_0-9]*]] = i + tl.arange(0, 1)
// CHECK-NEXT:          [[C1:offs[_0-9]*]] = tl.arange(0, 128)
// CHECK-NEXT:          {{row_[0-9]+}} = tl.load(src_ptr + pid * 300 + [[I]][:, None] * 100 + [[C1]][None, :], mask={{.*}}([[C1]][None, :] < 100), other=0.0, eviction_policy="evict_last")
// CHECK:               tl.store(out_ptr + pid * 300 + [[I]][:, None] * 100 + [[C1]][None, :], d, mask={{.*}}([[C1]][None, :] < 100))
tile.kernel @row_cache grid 1 (%src: memref<2x3x100xf32>, %out: memref<2x3x100xf32>) attributes {schedule = "row_reduction_looped", block_sizes = array<i64: 1, 1, 128>, num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %cache = tile.alloc : memref<3x128xf32, #tile.memory_space<shared>>
  %pid = tile.program_id 0
  %init = nn.constant 0xFFF0000000000000 : tensor<128xf32>
  %m = scf.for %r = %c0 to %c3 step %c1 iter_args(%acc = %init) -> (tensor<128xf32>) {
    tile.copy %src[%pid, %r, %c0] to %cache[%r, %c0] [1, 128] : memref<2x3x100xf32> to memref<3x128xf32, #tile.memory_space<shared>>
    tile.barrier
    %row = tile.load %cache[%r, %c0] : memref<3x128xf32, #tile.memory_space<shared>> -> tensor<1x128xf32>
    %part = tile.reduce max %row axis 0 : tensor<1x128xf32> -> tensor<128xf32>
    %next = nn.max %acc, %part : tensor<128xf32>
    scf.yield %next : tensor<128xf32>
  }
  scf.for %i = %c0 to %c3 step %c1 {
    %row = tile.load %cache[%i, %c0] : memref<3x128xf32, #tile.memory_space<shared>> -> tensor<1x128xf32>
    %mb = tile.broadcast %m dims [1] : tensor<128xf32> -> tensor<1x128xf32>
    %d = nn.sub %row, %mb : tensor<1x128xf32>
    tile.store %d, %out[%pid, %i, %c0] : tensor<1x128xf32>, memref<2x3x100xf32>
  }
  tile.return
}
