// Temporaries in the workspace, on the CUDA backend (backends/host_memory.py,
// workspace_uses): a kernel reads every temporary through the workspace's pointer plus
// its offset; a temporary only kernels read (%b) gets no tensor at all; a view of a
// temporary that a library GEMM reads (%av) is made straight from the workspace, at its
// source's offset, without a tensor of the source (%a). A run's values are stored by
// one line before the run is issued.
// RUN: fuse-opt %s -t cuda | filecheck %s

// CHECK:      def main(x, w, *, device):
// CHECK-NEXT:     """Run the host code: 4 launch(es); returns the outputs."""
// CHECK-NEXT:     empty = fuseopt_empty[device.type]
// CHECK-NEXT:     y = empty((4, 16), (16, 1), torch.float32)
// CHECK-NEXT:     workspace = empty((768,), (1,), torch.uint8)
// CHECK-NEXT:     workspace_pointer = workspace.data_ptr()
// CHECK-NEXT:     workspace_float32 = workspace.view(torch.float32)
// CHECK-NEXT:     av = fuseopt_reinterpret(workspace_float32, (4, 16), (16, 1), 64)
// CHECK-NEXT:     g = fuseopt_reinterpret(workspace_float32, (4, 16), (16, 1), 128)
// CHECK-NEXT:     fuseopt_run0_values[0:4] = (x.data_ptr(), workspace_pointer, workspace_pointer, workspace_pointer + 256, )
// CHECK-NEXT:     failed = fuseopt_launch_run(fuseopt_run0, fuseopt_stream(fuseopt_device_index))
// CHECK-NEXT:     if failed:
// CHECK-NEXT:         raise fuseopt_launch_failed(failed, 0)
// CHECK-NEXT:     torch.mm(av, w, out=g)
// CHECK-NEXT:     fuseopt_run1_values[0:2] = (workspace_pointer + 512, y.data_ptr(), )
// CHECK:          return (y, )
// CHECK-NOT:  fuseopt_reinterpret
func.func @main(%x: memref<64xf32>, %w: memref<16x16xf32>, %y: memref<4x16xf32> {tile.output}) {
  %b = tile.alloc : memref<64xf32>
  %a = tile.alloc : memref<64xf32>
  %av = tile.view %a : memref<64xf32> -> memref<4x16xf32>
  %g = tile.alloc : memref<4x16xf32>
  %gv = tile.view %g : memref<4x16xf32> -> memref<64xf32>
  %yv = tile.view %y : memref<4x16xf32> -> memref<64xf32>
  tile.launch @k grid [4] (%x, %b) : memref<64xf32>, memref<64xf32>
  tile.launch @k grid [4] (%b, %a) : memref<64xf32>, memref<64xf32>
  tile.gemm %av, %w into %g : memref<4x16xf32>, memref<16x16xf32>, memref<4x16xf32>
  tile.launch @k grid [4] (%gv, %yv) : memref<64xf32>, memref<64xf32>
  func.return
}
tile.kernel @k grid 1 (%x: memref<64xf32>, %y: memref<64xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %p = tile.program_id 0
  %c16 = arith.constant 16 : index
  %o = arith.muli %p, %c16 : index
  %t = tile.load %x[%o] : memref<64xf32> -> tensor<16xf32>
  %e = nn.exp %t : tensor<16xf32>
  tile.store %e, %y[%o] : tensor<16xf32>, memref<64xf32>
  tile.return
}
