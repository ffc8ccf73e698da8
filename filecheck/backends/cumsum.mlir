// RUN: fuse-opt %s --pipeline standard | filecheck %s --check-prefix=TILE
// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s --check-prefix=TRITON
// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s --check-prefix=CUDA

// nn.cumsum is never fused: a whole-tensor kernel of its own between the fused
// kernels around it. Triton's module runs PyTorch's cumsum in its host code; the CUDA
// backend scans one line per thread (here 4 x 9 lines of 70), summing in f32.
// TILE:        tile.kernel @{{.*}} grid 1
// TILE:        tile.kernel @f_cumsum grid 1 {{.*}}schedule = "whole_tensor"
// TILE:        nn.cumsum %{{.*}} axis 1 : tensor<4x70x9xf32> -> tensor<4x70x9xf32>
// TRITON:      torch.cumsum({{.*}}, dim=1)
// CUDA:        for (long long fo_l = (long long)blockIdx.x * 256 + threadIdx.x;
// CUDA-NEXT:   fo_l < 36LL;
// CUDA-NEXT:   const long long fo_base = fo_l / 9LL * 630LL + fo_l % 9LL;
// CUDA-NEXT:   float fo_a = 0;
// CUDA-NEXT:   for (long long fo_i = 0; fo_i < 70LL; ++fo_i) {
func.func @f(%x: tensor<4x70x9xf32>) -> tensor<4x70x9xf32> {
  %e = nn.exp %x : tensor<4x70x9xf32>
  %c = nn.cumsum %e axis 1 : tensor<4x70x9xf32> -> tensor<4x70x9xf32>
  %r = nn.rsqrt %c : tensor<4x70x9xf32>
  func.return %r : tensor<4x70x9xf32>
}
