# RUN: %python %s | filecheck %s
"""fuseopt.export of a scaled, masked softmax: the composite stays one nn.softmax (for
nn-decompose and the fuser), the scalar scale becomes a splat constant, and the
boolean mask a compare + select."""

import torch

import fuseopt


def scaled_softmax(scores: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    masked = torch.where(bias > 0, scores * 0.125, -1e4)
    return torch.softmax(masked, dim=-1)


print(fuseopt.export(scaled_softmax, (torch.randn(2, 4, 8), torch.randn(8))))

# CHECK-LABEL: func.func @forward
# CHECK-SAME: (%scores: tensor<2x4x8xf32>, %bias: tensor<8xf32>) -> tensor<2x4x8xf32>
# CHECK: %[[Z:.*]] = nn.constant 0.000000e+00 : tensor<8xf32>
# CHECK: %[[M:.*]] = nn.compare gt, %bias, %[[Z]] : tensor<8xf32>
# CHECK: %[[S:.*]] = nn.mul %scores, %{{.*}} : tensor<2x4x8xf32>
# CHECK: %[[MB:.*]] = nn.broadcast %[[M]] : tensor<8xi1> -> tensor<2x4x8xi1>
# CHECK: %[[SEL:.*]] = nn.select %[[MB]], %[[S]], %{{.*}} : tensor<2x4x8xf32>
# CHECK: %[[R:.*]] = nn.softmax %[[SEL]] axis 2 : tensor<2x4x8xf32>
# CHECK: func.return %[[R]] : tensor<2x4x8xf32>
