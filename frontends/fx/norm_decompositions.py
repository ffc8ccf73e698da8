"""fuseopt's own decompositions of normalization ops, for AOTAutograd's table.

PyTorch's decomposition of `aten.native_group_norm` (torch._refs) has two forms. On
the CPU it applies a per-(sample, channel) scale and shift to the input. On every other
device it normalizes in the group shape, `(x - mean) * rstd` over
(N, groups, channels per group x positions), and views that result as (N, C, ...) for
the affine step. That view is a reshape between two iteration spaces, so the
normalized value (f32 for a 16-bit input) is stored by one kernel and read back by the
next: on a GPU, a bf16 GroupNorm over 32 x 256 x 56 x 56 moved about 5x the input's
bytes (91 us of kernel time on an H200 against torch.compile's 54).

`native_group_norm` below is PyTorch's CPU form on every device: the group statistics,
then a scale `rstd * weight` and a shift `bias - mean * scale` per (sample, channel)
(small tensors, one small kernel), and a pointwise `x * scale + shift` in the input's
own shape, which reads the input once and writes the output once (Inductor's count of
passes). Against `(x - mean) * rstd`, the rounding of `x * scale` and of `mean * scale`
costs about what the rounding of the mean already costs: an error of order
eps * |mean| / std relative to the output, in the computation dtype (f32 for 16-bit
inputs).
"""

from __future__ import annotations

import torch

COMPUTED_IN_F32 = (torch.float16, torch.bfloat16)
"""Input dtypes whose statistics and normalization are computed in f32 (PyTorch's
computation dtype for them); others compute in their own dtype."""


def native_group_norm(
    input: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    batch_size: int,
    num_channels: int,
    flattened_inner_size: int,
    num_groups: int,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | object:
    """`aten.native_group_norm` as group statistics and a per-(sample, channel) scale
    and shift applied to the input in its own shape (see the module docstring).
    Returns (output, mean, rstd) as the op does: mean and rstd of shape (N, groups) in
    the input's dtype. Inputs PyTorch's own checks reject (fewer than 2 dims, channels
    not divisible by the groups) are left to PyTorch (NotImplemented)."""
    if input.ndim < 2 or num_groups <= 0 or num_channels % num_groups:
        return NotImplemented
    per_group = num_channels // num_groups
    computation = torch.float32 if input.dtype in COMPUTED_IN_F32 else input.dtype
    x = input.to(computation)
    grouped = x.reshape(batch_size, num_groups, per_group, flattened_inner_size)
    var, mean = torch.var_mean(grouped, dim=[2, 3], correction=0, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    channels = [batch_size, num_groups, per_group, 1]
    scale = rstd.expand(channels)
    if weight is not None:
        scale = scale * weight.to(computation).reshape(channels[1:])
    shift = -mean * scale
    if bias is not None:
        shift = shift + bias.to(computation).reshape(channels[1:])
    per_channel = [batch_size, num_channels] + [1] * (input.ndim - 2)
    out = x * scale.reshape(per_channel) + shift.reshape(per_channel)
    statistics = [batch_size, num_groups]
    return (
        out.to(input.dtype),
        mean.reshape(statistics).to(input.dtype),
        rstd.reshape(statistics).to(input.dtype),
    )
