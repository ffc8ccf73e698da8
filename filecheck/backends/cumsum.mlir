// RUN: fuse-opt %s --pipeline standard | filecheck %s --check-prefix=TILE
// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s --check-prefix=TRITON
// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s --check-prefix=CUDA

// nn.cumsum is never fused: a scan kernel of its own between the fused kernels around
// it. The input is [outer, length, inner] = [4, 70, 9]: one program per outer index and
// block of 16 inner columns walks the scanned axis in [128, 16] tiles, scanning each
// along its rows and adding the carry (the sum of the tiles before, kept spread over
// a whole tile: Triton 3.6 miscompiles a 1-D carry updated by a reduction in a loop). Triton scans a
// tile with tl.associative_scan; the CUDA printer scans one line per thread (here 4 x
// 9 lines of 70), summing in f32.
// TILE:        tile.kernel @{{.*}} grid 1
// TILE:        tile.kernel @f_cumsum grid 1 (%{{.*}}: memref<4x70x9xf32>, %{{.*}}: memref<4x70x9xf32>) {{.*}}schedule = "scan"
// TILE:        scf.for {{.*}} iter_args(%[[CARRY:.*]] = %{{.*}}) -> (tensor<128x16xf32>)
// TILE:        %[[T:.*]] = tile.load {{.*}} : memref<4x70x9xf32> -> tensor<128x16xf32>
// TILE-NEXT:   %[[S:.*]] = nn.cumsum %[[T]] axis 0 : tensor<128x16xf32> -> tensor<128x16xf32>
// TILE-NEXT:   nn.add %[[S]], %[[CARRY]] : tensor<128x16xf32>
// TILE:        tile.launch @f_cumsum grid [4]
// TRITON:      cumsum = tl.associative_scan(x, 0, fuseopt_add)
// TRITON:      sum_ = tl.reduce(x, 0, fuseopt_add)
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
