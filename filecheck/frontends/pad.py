# RUN: %python %s | filecheck %s
"""F.pad with a constant is indexing: fuseopt.export reads x at clamped source columns
(an nn.take) and selects the pad value outside x; the standard pipeline makes it one
kernel with its consumer, which computes the positions from its tile indices."""

import torch
import torch.nn.functional as F

import fuseopt


def padded(x: torch.Tensor) -> torch.Tensor:
    return F.pad(x, (1, 2), value=-1.0) * 2


text = fuseopt.export(padded, (torch.randn(4, 6),))
print(text)
print(fuseopt.run_pipeline(fuseopt.parse(text), "standard"))

# CHECK-LABEL: func.func @forward
# CHECK-SAME:  (%x: tensor<4x6xf32>) -> tensor<4x9xf32>
# CHECK:       %[[I:.*]] = nn.constant dense<[-1, 0, 1, 2, 3, 4, 5, 6, 7]> : tensor<9xi64>
# CHECK:       nn.max
# CHECK:       nn.min
# CHECK:       %[[IN:.*]] = nn.compare eq
# CHECK:       %[[T:.*]] = nn.take %x, %{{.*}} : tensor<4x6xf32>, tensor<4x9xi64> -> tensor<4x9xf32>
# CHECK:       %[[V:.*]] = nn.constant -1.000000e+00 : tensor<4x9xf32>
# CHECK:       nn.select %[[IN]], %[[T]], %[[V]] : tensor<4x9xf32>
# CHECK-NOT:   nn.concat
# CHECK:       tile.kernel
# CHECK-NOT:   tile.kernel
# CHECK:       func.func @forward
