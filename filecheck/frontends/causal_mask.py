# RUN: %python %s | filecheck %s
# RUN: %python %s | fuse-opt --pipeline fuse | filecheck %s --check-prefix=FUSED
# ruff: noqa: E501 - CHECK lines are IR lines
"""fuseopt.export of a causal mask as models build it: `ones(...).tril()` becomes an
index comparison and a select, `&` / `~` of bool masks become selects and compares, and
nn-fuse folds it all into the one kernel that applies the mask."""

import torch

import fuseopt


def masked(scores: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    causal = torch.ones(4, 4, dtype=torch.bool).tril(diagonal=0)
    return scores.masked_fill(~(causal & keep), -1.0)


# CHECK-LABEL: func.func @forward
# CHECK:         nn.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
# CHECK:         nn.compare le, {{.*}} : tensor<4x4xi64>
# CHECK:         nn.select {{.*}} : tensor<4x4xi1>
# CHECK:         nn.compare eq, {{.*}} : tensor<4x4xi1>
# CHECK:         nn.select {{.*}} : tensor<4x4xf32>
# FUSED:         nn.fusion
# FUSED-NOT:     nn.fusion
print(fuseopt.export(masked, (torch.randn(4, 4), torch.randn(4, 4) > 0)))
