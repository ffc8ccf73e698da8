# RUN: %python %s | filecheck %s
"""fuseopt.export of an f16 softplus: computed in f32 (PyTorch's opmath) in the stable
form max(x, 0) + log1p(exp(-|x|)), with log1p corrected where 1 + u rounds, the
threshold select (x where x > 20), and one rounding to f16 at the end."""

import torch
import torch.nn.functional as F

import fuseopt


def softplus(x: torch.Tensor) -> torch.Tensor:
    return F.softplus(x)


print(fuseopt.export(softplus, (torch.randn(8, dtype=torch.float16),)))

# CHECK-LABEL: func.func @forward
# CHECK-SAME: (%x: tensor<8xf16>) -> tensor<8xf16>
# CHECK-NEXT: %[[X:.*]] = nn.cast %x : tensor<8xf16> -> tensor<8xf32>
# CHECK-NEXT: %[[A:.*]] = nn.abs %[[X]] : tensor<8xf32>
# CHECK-NEXT: %[[N:.*]] = nn.neg %[[A]] : tensor<8xf32>
# CHECK-NEXT: %[[U:.*]] = nn.exp %[[N]] : tensor<8xf32>
# CHECK-NEXT: %[[ONE:.*]] = nn.constant 1.000000e+00 : tensor<8xf32>
# CHECK-NEXT: %[[W:.*]] = nn.add %[[ONE]], %[[U]] : tensor<8xf32>
# CHECK-NEXT: %[[ROUNDS:.*]] = nn.compare eq, %[[W]], %[[ONE]] : tensor<8xf32>
# CHECK-NEXT: %[[WM1:.*]] = nn.sub %[[W]], %[[ONE]] : tensor<8xf32>
# CHECK-NEXT: %[[DEN:.*]] = nn.select %[[ROUNDS]], %[[ONE]], %[[WM1]] : tensor<8xf32>
# CHECK-NEXT: %[[LOG:.*]] = nn.log %[[W]] : tensor<8xf32>
# CHECK-NEXT: %[[Q:.*]] = nn.div %[[U]], %[[DEN]] : tensor<8xf32>
# CHECK-NEXT: %[[CORR:.*]] = nn.mul %[[LOG]], %[[Q]] : tensor<8xf32>
# CHECK-NEXT: %[[L1P:.*]] = nn.select %[[ROUNDS]], %[[U]], %[[CORR]] : tensor<8xf32>
# CHECK-NEXT: %[[Z:.*]] = nn.constant 0.000000e+00 : tensor<8xf32>
# CHECK-NEXT: %[[POS:.*]] = nn.max %[[X]], %[[Z]] : tensor<8xf32>
# CHECK-NEXT: %[[SOFT:.*]] = nn.add %[[POS]], %[[L1P]] : tensor<8xf32>
# CHECK-NEXT: %[[T:.*]] = nn.constant 2.000000e+01 : tensor<8xf32>
# CHECK-NEXT: %[[BIG:.*]] = nn.compare gt, %[[X]], %[[T]] : tensor<8xf32>
# CHECK-NEXT: %[[Y:.*]] = nn.select %[[BIG]], %[[X]], %[[SOFT]] : tensor<8xf32>
# CHECK-NEXT: %[[R:.*]] = nn.cast %[[Y]] : tensor<8xf32> -> tensor<8xf16>
# CHECK-NEXT: func.return %[[R]] : tensor<8xf16>
