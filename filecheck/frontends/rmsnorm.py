# RUN: %python %s | filecheck %s
"""fuseopt.export of a Llama-style RMSNorm in bf16, written out as Hugging Face does:
the f32 upcast, pow, mean, rsqrt and the weight scale each become nn ops, with the
scalar eps as an explicit splat constant and explicit broadcasts."""

import torch
from torch import nn

import fuseopt


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


print(fuseopt.export(RMSNorm(16).to(torch.bfloat16), torch.randn(2, 16, dtype=torch.bfloat16)))

# CHECK-LABEL: func.func @forward
# CHECK-SAME: (%p_weight: tensor<16xbf16>, %x: tensor<2x16xbf16>) -> tensor<2x16xbf16>
# CHECK: %[[X:.*]] = nn.cast %x : tensor<2x16xbf16> -> tensor<2x16xf32>
# CHECK: %[[SQ:.*]] = nn.pow %[[X]], %{{.*}} : tensor<2x16xf32>
# CHECK: %[[MS:.*]] = nn.mean %[[SQ]] [1] keepdim : tensor<2x16xf32> -> tensor<2x1xf32>
# CHECK: %[[EPS:.*]] = nn.constant 1.000000e-06 : tensor<2x1xf32>
# CHECK: %[[ADD:.*]] = nn.add %[[MS]], %[[EPS]] : tensor<2x1xf32>
# CHECK: %[[INV:.*]] = nn.rsqrt %[[ADD]] : tensor<2x1xf32>
# CHECK: %[[B:.*]] = nn.broadcast %[[INV]] : tensor<2x1xf32> -> tensor<2x16xf32>
# CHECK: %[[N:.*]] = nn.mul %[[X]], %[[B]] : tensor<2x16xf32>
# CHECK: %[[NB:.*]] = nn.cast %[[N]] : tensor<2x16xf32> -> tensor<2x16xbf16>
# CHECK: %[[W:.*]] = nn.broadcast %p_weight : tensor<16xbf16> -> tensor<2x16xbf16>
# CHECK: %[[Y:.*]] = nn.mul %[[W]], %[[NB]] : tensor<2x16xbf16>
# CHECK: func.return %[[Y]] : tensor<2x16xbf16>
