// One reader of tile host functions (dialects/tile_host.py) serves both backends: an op
// a host function cannot hold (here a float constant; index arithmetic on sizes is
// allowed) is one located error, worded for the backend (the cuda backend's wording:
// tests/test_tile_host.py).
// RUN: not fuse-opt %s -t triton 2>&1 | filecheck %s --check-prefix=TRITON
// RUN: sed -e 's/^  %c = .*//' %s | fuse-opt -t triton | filecheck %s --check-prefix=HOST
// RUN: sed -e 's/^  %c = .*//' %s | fuse-opt -t cuda | filecheck %s --check-prefix=CUDA

// TRITON: host-functions.mlir:[[# @LINE + 24]]:3: error: the triton target cannot print arith.constant in a host function
// HOST:      def main(x, *, device):
// HOST-NEXT:     """Run the host code: 2 launch(es); returns the outputs."""
// HOST-NEXT:     empty = fuseopt_empty[device.type]
// HOST-NEXT:     y = empty((64,), (1,), torch.float32)
// HOST-NEXT:     workspace = empty((256,), (1,), torch.uint8)
// HOST-NEXT:     workspace_float32 = workspace.view(torch.float32)
// HOST-NEXT:     tmp = fuseopt_reinterpret(workspace_float32, (64,), (1,), 0)
// HOST-NEXT:     launch_k(x, tmp)
// HOST-NEXT:     launch_k(tmp, y)
// HOST-NEXT:     return (y, )
// The same steps on the CUDA backend, its two launches one run of the C launch loop (its
// values stored by one line); the temporary (and its view) only kernels read is the
// workspace's pointer, with no tensor:
// CUDA:      workspace = empty((256,), (1,), torch.uint8)
// CUDA-NEXT: workspace_pointer = workspace.data_ptr()
// CUDA-NEXT: fuseopt_run0_values[0:4] = (x.data_ptr(), workspace_pointer, workspace_pointer, y.data_ptr(), )
// CUDA-NEXT: failed = fuseopt_launch_run(fuseopt_run0, fuseopt_stream(fuseopt_device_index))
// CUDA-NEXT: if failed:
// CUDA-NEXT:     raise fuseopt_launch_failed(failed, 0)
// CUDA-NEXT: return (y, )
func.func @main(%x: memref<64xf32>, %y: memref<64xf32> {tile.output}) {
  %tmp = tile.alloc : memref<64xf32>
  %view = tile.view %tmp : memref<64xf32> -> memref<8x8xf32>
  %c = arith.constant 0.0 : f32
  tile.launch @k grid [4] (%x, %tmp) : memref<64xf32>, memref<64xf32>
  tile.launch @k grid [4] (%view, %y) : memref<8x8xf32>, memref<64xf32>
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
