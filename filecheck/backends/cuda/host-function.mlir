// The CUDA backend's host function, printed once as Python (backends/cuda/host_function.py):
// allocations, sizes and library calls are lines; the kernels between two library calls
// form a run: its launches' grids of dynamic size are stored in the run's geometry as
// they come, their pointers and sizes by one line before the run is issued (one call of
// the C launch loop).
// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s

// CHECK:      // ===== file: main.py =====
// CHECK-NEXT: def main(in0, in1, *, device):
// CHECK-NEXT:     """Run the host code: 3 launch(es); returns the outputs."""
// CHECK-NEXT:     empty = fuseopt_empty[device.type]
// CHECK-NEXT:     out0 = empty((in0.shape[0], 256, ), (256, 1, ), torch.float32)
// CHECK:          fuseopt_run0_geometry[0:3] = ([[G:n_[0-9]+]], 1, 1, )
// CHECK:          fuseopt_run0_values[0:4] = ([[X:view[_0-9]*]].data_ptr(), [[T:view[_0-9]*]].data_ptr(), [[X]].shape[0], [[T]].shape[0], )
// CHECK-NEXT:     [[F:failed]] = fuseopt_launch_run(fuseopt_run0, fuseopt_stream(fuseopt_device_index))
// CHECK-NEXT:     if [[F]]:
// CHECK-NEXT:         raise fuseopt_launch_failed([[F]], 0)
// CHECK-NEXT:     torch.mm([[A:tmp[_0-9]*]], in1, out=[[C:tmp_[0-9]+]])
// CHECK:          fuseopt_run1_values[0:4] = ([[C]].data_ptr(), out0.data_ptr(), [[C]].shape[0], out0.shape[0], )
// CHECK-NEXT:     failed_1 = fuseopt_launch_run(fuseopt_run1, fuseopt_stream(fuseopt_device_index))
// CHECK:          return (out0, )
func.func @main(%x: tensor<?x256xf32>, %w: tensor<256x256xf32>) -> tensor<?x256xf32> {
  %e = nn.exp %x : tensor<?x256xf32>
  %m = nn.matmul %e, %w : tensor<?x256xf32>, tensor<256x256xf32> -> tensor<?x256xf32>
  %t = nn.tanh %m : tensor<?x256xf32>
  %s = nn.softmax %t axis 1 : tensor<?x256xf32>
  func.return %s : tensor<?x256xf32>
}
