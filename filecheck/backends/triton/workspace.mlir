// RUN: fuse-opt %s -t triton | filecheck %s

// Temporaries live in one workspace allocated per call (backends/host_memory.py): each
// at a 256-byte aligned offset, reusing the bytes of a temporary whose last use (through
// its views too) came before it is allocated; one view of the workspace per element type.
// Outputs and the workspace come from PyTorch's fast allocator for the device type.
// %a dies at the second launch, so %c takes its bytes; %b is still read by the third
// launch (through %bv), so %c must not overlap it; nothing uses the i32 temporary %d: it
// gets no bytes and no tensor. Outputs are allocated on their own (they outlive the call).
// Views used only as launch arguments print no view: kernels read the pointer
// (backends/host_memory.py, pointer_aliases), so %bv is passed as b and %cv as c.
// CHECK:       def main(x, *, device):
// CHECK-NEXT:      """Run the host code: 4 launch(es); returns the outputs."""
// CHECK-NEXT:      empty = fuseopt_empty[device.type]
// CHECK-NEXT:      y = empty((64,), (1,), torch.float32)
// CHECK-NEXT:      workspace = empty((512,), (1,), torch.uint8)
// CHECK-NEXT:      workspace_float32 = workspace.view(torch.float32)
// CHECK-NEXT:      a = fuseopt_reinterpret(workspace_float32, (64,), (1,), 0)
// CHECK-NEXT:      b = fuseopt_reinterpret(workspace_float32, (64,), (1,), 64)
// CHECK-NEXT:      launch_k(x, a)
// CHECK-NEXT:      launch_k(a, b)
// CHECK-NEXT:      c = fuseopt_reinterpret(workspace_float32, (48,), (1,), 0)
// CHECK-NEXT:      launch_k(b, y)
// CHECK-NEXT:      launch_l(c)
// CHECK-NEXT:      return (y, )
func.func @main(%x: memref<64xf32>, %y: memref<64xf32> {tile.output}) {
  %a = tile.alloc : memref<64xf32>
  %b = tile.alloc : memref<64xf32>
  %bv = tile.view %b : memref<64xf32> -> memref<8x8xf32>
  tile.launch @k grid [4] (%x, %a) : memref<64xf32>, memref<64xf32>
  tile.launch @k grid [4] (%a, %b) : memref<64xf32>, memref<64xf32>
  %c = tile.alloc : memref<48xf32>
  %cv = tile.view %c : memref<48xf32> -> memref<6x8xf32>
  tile.launch @k grid [4] (%bv, %y) : memref<8x8xf32>, memref<64xf32>
  tile.launch @l grid [4] (%cv) : memref<6x8xf32>
  %d = tile.alloc : memref<64xi32>
  func.return
}

// A view a library GEMM reads keeps its tensor (the GEMM reads its shape); the view
// of it that only a kernel reads does not.
// CHECK:       def gemm_view(x, w, *, device):
// CHECK:           xv = x.view((4, 16))
// CHECK-NEXT:      torch.mm(xv, w, out=y)
// CHECK-NEXT:      launch_k(y, z)
// CHECK-NEXT:      return (y, z, )
func.func @gemm_view(%x: memref<64xf32>, %w: memref<16x16xf32>, %y: memref<4x16xf32> {tile.output}, %z: memref<64xf32> {tile.output}) {
  %xv = tile.view %x : memref<64xf32> -> memref<4x16xf32>
  tile.gemm %xv, %w into %y : memref<4x16xf32>, memref<16x16xf32>, memref<4x16xf32>
  %yv = tile.view %y : memref<4x16xf32> -> memref<64xf32>
  tile.launch @k grid [4] (%yv, %z) : memref<64xf32>, memref<64xf32>
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
tile.kernel @l grid 1 (%x: memref<6x8xf32>) attributes {schedule = "pointwise", num_warps = 1 : i64, num_stages = 1 : i64, vector_width = 1 : i64} {
  tile.return
}
