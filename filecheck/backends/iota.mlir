// RUN: fuse-opt %s --pipeline standard -t triton | filecheck %s
// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s --check-prefix=CUDA
// RUN: fuse-opt %s --pipeline standard | filecheck %s --check-prefix=TILE

// argmax as the frontend builds it: the column index vector (an arange) is computed in
// the row kernel from the tile's positions (tile.iota), never read from memory or made
// by a kernel of its own; each row's first maximal index is a min over indices.
// TILE-NOT:    schedule = "whole_tensor"
// TILE:        tile.kernel @{{.*}} grid 1
// TILE:        tile.iota %{{.*}} start 0 step 1 : tensor<256xi64>
// TILE:        tile.reduce min
// CHECK:       @triton.jit
// CHECK:       [[OFFS:offs_[0-9]+]] = (tl.arange(0, 256)).to(tl.int64)
// CHECK-NEXT:  iota = ([[OFFS]])
// CHECK-NEXT:  tl.broadcast_to(iota[None, :], [8, 256])
// CHECK-NOT:   torch.tensor(
// CUDA:        __global__
// CUDA:        long long iota[2];
// CUDA-NEXT:   iota[0] = (0LL + 1LL * ((long long)(0LL) + ((fo_tid * 2) + 0)));
// CUDA-NEXT:   iota[1] = (0LL + 1LL * ((long long)(0LL) + ((fo_tid * 2) + 1)));
func.func @argmax(%x: tensor<6x200xf32>) -> tensor<6xi64> {
  %0 = nn.reduce_max %x [1] keepdim : tensor<6x200xf32> -> tensor<6x1xf32>
  %1 = nn.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139, 140, 141, 142, 143, 144, 145, 146, 147, 148, 149, 150, 151, 152, 153, 154, 155, 156, 157, 158, 159, 160, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 173, 174, 175, 176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197, 198, 199]> : tensor<200xi64>
  %2 = nn.reshape %1 : tensor<200xi64> -> tensor<1x200xi64>
  %3 = nn.broadcast %2 : tensor<1x200xi64> -> tensor<6x200xi64>
  %4 = nn.constant 200 : tensor<6x200xi64>
  %5 = nn.broadcast %0 : tensor<6x1xf32> -> tensor<6x200xf32>
  %6 = nn.compare eq, %x, %5 : tensor<6x200xf32>
  %7 = nn.select %6, %3, %4 : tensor<6x200xi64>
  %10 = nn.reduce_min %7 [1] keepdim : tensor<6x200xi64> -> tensor<6x1xi64>
  %11 = nn.reshape %10 : tensor<6x1xi64> -> tensor<6xi64>
  func.return %11 : tensor<6xi64>
}
