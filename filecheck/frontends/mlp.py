# RUN: %python %s | filecheck %s
# RUN: %python %s | fuse-opt | filecheck %s --check-prefix=ROUNDTRIP
# RUN: %python %s | fuse-opt --pipeline fuse | filecheck %s --check-prefix=FUSED
# ruff: noqa: E501 - CHECK lines are IR lines
"""fuseopt.export of an MLP: parameters become arguments, nn.Linear becomes nn.linear."""

import torch
from torch import nn

import fuseopt


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 32)
        self.down = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x), approximate="tanh")) + x


print(fuseopt.export(MLP(), torch.randn(4, 8)))

# CHECK-LABEL: func.func @forward
# CHECK-SAME: (%p_up_weight: tensor<32x8xf32>, %p_up_bias: tensor<32xf32>, %p_down_weight: tensor<8x32xf32>, %p_down_bias: tensor<8xf32>, %x: tensor<4x8xf32>) -> tensor<4x8xf32>
# CHECK-NEXT: %[[UP:.*]] = nn.linear %x, %p_up_weight, %p_up_bias : tensor<4x8xf32>, tensor<32x8xf32>, tensor<32xf32> -> tensor<4x32xf32>
# CHECK-NEXT: %[[ACT:.*]] = nn.gelu %[[UP]] {approximate = "tanh"} : tensor<4x32xf32>
# CHECK-NEXT: %[[DOWN:.*]] = nn.linear %[[ACT]], %p_down_weight, %p_down_bias : tensor<4x32xf32>, tensor<8x32xf32>, tensor<8xf32> -> tensor<4x8xf32>
# CHECK-NEXT: %[[SUM:.*]] = nn.add %[[DOWN]], %x : tensor<4x8xf32>
# CHECK-NEXT: func.return %[[SUM]] : tensor<4x8xf32>

# ROUNDTRIP: func.func @forward
# ROUNDTRIP: nn.linear
# ROUNDTRIP: nn.gelu

# The exported text goes through the nn-level pipeline: two kernels, each a matmul
# with its bias (and the GELU, or the residual) as the epilogue.
# FUSED-LABEL: func.func @forward
# FUSED: %[[H:.*]] = nn.fusion ins(%x, %p_up_weight, %p_up_bias : {{.*}}) -> tensor<4x32xf32> attributes {kernel_name = "fused_0_matmul_add_gelu", kind = "matmul"{{.*}}
# FUSED: nn.gelu
# FUSED: %[[O:.*]] = nn.fusion ins(%[[H]], %p_down_weight, %p_down_bias, %x : {{.*}}) -> tensor<4x8xf32> attributes {kernel_name = "fused_1_matmul_add", kind = "matmul"{{.*}}
# FUSED: func.return %[[O]] : tensor<4x8xf32>
