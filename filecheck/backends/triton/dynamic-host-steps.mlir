// Host steps on buffers of dynamic size: a view whose dynamic dim follows from the element
// count (`view(-1, ...)`, never aliased: launches read its sizes), library GEMMs with
// dynamic rows (the padded one included: its output keeps the row pitch), a PyTorch
// call, and a temporary allocated per call.
// RUN: fuse-opt %s -t triton | filecheck %s

// CHECK:      def main(x, w, head, *, device):
// CHECK-NEXT:     """Run the host code: 4 launch(es); returns the outputs."""
// CHECK-NEXT:     empty = fuseopt_empty[device.type]
// CHECK-NEXT:     y = empty((x.shape[0], 16, ), (16, 1, ), torch.float32)
// CHECK-NEXT:     logits = empty((x.shape[0], 1028), (1028, 1), torch.float32)[:, :1025].view((x.shape[0], 1025, ))
// CHECK-NEXT:     flipped = empty((x.shape[0], 4, 8, ), (32, 8, 1, ), torch.float32)
// CHECK-NEXT:     n = x.shape[0]
// CHECK-NEXT:     rows = x.view((-1, 32))
// CHECK-NEXT:     torch.mm(rows, w.mT, out=y)
// CHECK-NEXT:     t = empty((n, 1024, ), (1024, 1, ), torch.float32)
// CHECK-NEXT:     launch_widen(rows, t, rows.shape[0], t.shape[0], grid=(n, ))
// CHECK-NEXT:     fuseopt_mm_padded(t, head.mT, logits, 1028)
// CHECK-NEXT:     called = (torch.ops.aten.flip.default(x, [1]),)
// CHECK-NEXT:     flipped.copy_(called[0].reshape(flipped.shape))
// CHECK-NEXT:     return (y, logits, flipped, )
tile.kernel @widen grid 1 (%x: memref<?x32xf32>, %y: memref<?x1024xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64} {
  %p = tile.program_id 0
  %c0 = arith.constant 0 : index
  %t = tile.load %x[%p, %c0] : memref<?x32xf32> -> tensor<1024xf32>
  tile.store %t, %y[%p, %c0] : tensor<1024xf32>, memref<?x1024xf32>
  tile.return
}

func.func @main(%x: memref<?x4x8xf32>, %w: memref<16x32xf32>, %head: memref<1025x1024xf32>,
                %y: memref<?x16xf32> {tile.output, tile.dims_from = array<i64: 0, 0>},
                %logits: memref<?x1025xf32> {tile.output, tile.dims_from = array<i64: 0, 0>},
                %flipped: memref<?x4x8xf32> {tile.output, tile.dims_from = array<i64: 0, 0>}) {
  %n = tile.dim %x, 0 : memref<?x4x8xf32>
  %rows = tile.view %x : memref<?x4x8xf32> -> memref<?x32xf32>
  tile.gemm %rows, %w into %y transpose_b : memref<?x32xf32>, memref<16x32xf32>, memref<?x16xf32>
  %t = tile.alloc(%n) : memref<?x1024xf32>
  tile.launch @widen grid [%n] (%rows, %t) : memref<?x32xf32>, memref<?x1024xf32>
  tile.gemm %t, %head into %logits transpose_b : memref<?x1024xf32>, memref<1025x1024xf32>, memref<?x1025xf32>
  tile.torch_call "aten.flip.default"(%x) into (%flipped) {call = "{'args':[{'operand':0},[1]],'kwargs':{}}"} : (memref<?x4x8xf32>) -> (memref<?x4x8xf32>)
  func.return
}
