// Buffers of dynamic size (`?`): the kernel takes each dynamic dim after its pointers as
// an integer Triton does not specialize on (one compiled kernel for every size), masks
// and addresses with it (in int64); the host reads sizes from its inputs, computes the
// grid, allocates the output and a temporary per call.
// RUN: fuse-opt %s -t triton | filecheck %s
// RUN: sed -e 's/, tile.dims_from = array<i64: 0, 0>//' %s | not fuse-opt -t triton 2>&1 | filecheck %s --check-prefix=SIZES

// CHECK:      @triton.jit(do_not_specialize=['x_n0', 'y_n0'])
// CHECK-NEXT: def double(x_ptr, y_ptr, x_n0, y_n0):
// CHECK:      @triton.jit(do_not_specialize=['x_n0', 'y_n0'])
// CHECK-NEXT: def rows(x_ptr, y_ptr, x_n0, y_n0):
// CHECK:      t = tl.load(x_ptr + offs_r[:, None] * 100 + offs[None, :], mask=(offs_r[:, None] < x_n0) & (offs[None, :] < 100), other=0.0)
// CHECK:      m = tl.broadcast_to((offs_r_1[:, None] < x_n0) & (offs_1[None, :] < 100), [2, 128])
// CHECK:      tl.store(y_ptr + offs_r, sum_, mask=(offs_r < y_n0))
// CHECK:      def launch_rows(buf0, buf1, size0_0, size1_0, grid):
// CHECK-NEXT:     """Launch rows over `grid` programs."""
// CHECK-NEXT:     rows[grid](buf0, buf1, size0_0, size1_0, num_warps=4, num_stages=1)
// CHECK:      def rows_host(x, *, device):
// CHECK-NEXT:     """Run the host code: 2 launch(es); returns the outputs."""
// CHECK-NEXT:     empty = fuseopt_empty[device.type]
// CHECK-NEXT:     y = empty((x.shape[0], ), (1, ), torch.float32)
// CHECK-NEXT:     n = x.shape[0]
// CHECK-NEXT:     c2 = 2
// CHECK-NEXT:     g = -(-n // c2)
// CHECK-NEXT:     t = empty((n, 100, ), (100, 1, ), torch.float32)
// CHECK-NEXT:     launch_double(x, t, x.shape[0], t.shape[0], grid=(g, ))
// CHECK-NEXT:     launch_rows(t, y, t.shape[0], y.shape[0], grid=(g, ))
// CHECK-NEXT:     return (y, )

// SIZES: error: an output of type memref<?xf32> needs tile.dims_from with one (input, dim) pair per dynamic dim, got []
tile.kernel @double grid 1 (%x: memref<?x100xf32>, %y: memref<?x100xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64} {
  %p = tile.program_id 0
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %r = arith.muli %p, %c2 : index
  %t = tile.load %x[%r, %c0] : memref<?x100xf32> -> tensor<2x128xf32>
  %u = nn.add %t, %t : tensor<2x128xf32>
  tile.store %u, %y[%r, %c0] : tensor<2x128xf32>, memref<?x100xf32>
  tile.return
}

tile.kernel @rows grid 1 (%x: memref<?x100xf32>, %y: memref<?xf32>) attributes {schedule = "row_reduction", num_warps = 4 : i64, num_stages = 1 : i64} {
  %p = tile.program_id 0
  %c2 = arith.constant 2 : index
  %c0 = arith.constant 0 : index
  %r = arith.muli %p, %c2 : index
  %n = tile.dim %x, 0 : memref<?x100xf32>
  %t = tile.load %x[%r, %c0] : memref<?x100xf32> -> tensor<2x128xf32>
  %m = tile.mask [%r, %c0] bounds [%n, 100] : tensor<2x128xi1>
  %z = nn.constant 0.0 : tensor<2x128xf32>
  %s = nn.select %m, %t, %z : tensor<2x128xf32>
  %sum = tile.reduce sum %s axis 1 : tensor<2x128xf32> -> tensor<2xf32>
  tile.store %sum, %y[%r] : tensor<2xf32>, memref<?xf32>
  tile.return
}

func.func @rows_host(%x: memref<?x100xf32>, %y: memref<?xf32> {tile.output, tile.dims_from = array<i64: 0, 0>}) {
  %n = tile.dim %x, 0 : memref<?x100xf32>
  %c2 = arith.constant 2 : index
  %g = arith.ceildivui %n, %c2 : index
  %t = tile.alloc(%n) : memref<?x100xf32>
  tile.launch @double grid [%g] (%x, %t) : memref<?x100xf32>, memref<?x100xf32>
  tile.launch @rows grid [%g] (%t, %y) : memref<?x100xf32>, memref<?xf32>
  func.return
}
