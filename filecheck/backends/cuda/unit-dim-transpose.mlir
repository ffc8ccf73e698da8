// RUN: fuse-opt %s --pipeline standard -t cuda | filecheck %s
// A transpose or broadcast that only moves or adds unit dims keeps every element's
// row-major position: the CUDA printer relabels the registers instead of exchanging
// the tile through shared memory. RoPE on heads read seq-major, as Llama prepares q:
// the tile is one head by 64 rows by 64 columns, so [64x1x64] -> [1x64x64] is free.

func.func @main(%x: tensor<1x70x3x128xbf16>, %cos: tensor<1x70x128xbf16>, %sin: tensor<1x70x128xbf16>) -> tensor<1x3x70x128xbf16> {
  %q = nn.transpose %x [0, 2, 1, 3] : tensor<1x70x3x128xbf16> -> tensor<1x3x70x128xbf16>
  %c0 = nn.reshape %cos : tensor<1x70x128xbf16> -> tensor<1x1x70x128xbf16>
  %s0 = nn.reshape %sin : tensor<1x70x128xbf16> -> tensor<1x1x70x128xbf16>
  %c = nn.broadcast %c0 : tensor<1x1x70x128xbf16> -> tensor<1x3x70x128xbf16>
  %a = nn.mul %q, %c : tensor<1x3x70x128xbf16>
  %lo = nn.slice %q [0:1, 0:3, 0:70, 0:64] : tensor<1x3x70x128xbf16> -> tensor<1x3x70x64xbf16>
  %hi = nn.slice %q [0:1, 0:3, 0:70, 64:128] : tensor<1x3x70x128xbf16> -> tensor<1x3x70x64xbf16>
  %n = nn.neg %hi : tensor<1x3x70x64xbf16>
  %r = nn.concat %n, %lo axis 3 : tensor<1x3x70x64xbf16>, tensor<1x3x70x64xbf16> -> tensor<1x3x70x128xbf16>
  %s = nn.broadcast %s0 : tensor<1x1x70x128xbf16> -> tensor<1x3x70x128xbf16>
  %b = nn.mul %r, %s : tensor<1x3x70x128xbf16>
  %y = nn.add %a, %b : tensor<1x3x70x128xbf16>
  func.return %y : tensor<1x3x70x128xbf16>
}

// CHECK-LABEL: // ===== file: fused_0_mul_neg_add.cu =====
// CHECK: // launch: grid ({{[0-9]+}}), block ({{[0-9]+}}), dynamic shared memory 0 bytes
// CHECK-NOT: __syncthreads
// CHECK-NOT: reinterpret_cast<{{.*}}>(fo_smem
// CHECK: fused_0_mul_neg_add(
// CHECK-NOT: __syncthreads
// CHECK-NOT: reinterpret_cast<{{.*}}>(fo_smem
// CHECK: }
