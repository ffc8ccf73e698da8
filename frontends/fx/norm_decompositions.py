"""fuseopt's own decompositions of normalization ops: GroupNorm for AOTAutograd's table,
InstanceNorm as a substitute in Dynamo's graph.

PyTorch's decomposition of `aten.native_group_norm` (torch._refs) has two forms. On
the CPU it applies a per-(sample, channel) scale and shift to the input. On every other
device it normalizes in the group shape, `(x - mean) * rstd` over
(N, groups, channels per group x positions), and views that result as (N, C, ...) for
the affine step. That view is a reshape between two iteration spaces, so the
normalized value (f32 for a 16-bit input) is stored by one kernel and read back by the
next: on a GPU, a bf16 GroupNorm over 32 x 256 x 56 x 56 moved about six times the
input's bytes, twice what the form below moves (92 us of kernel time on an H200 against
torch.compile's 54).

`native_group_norm` below is PyTorch's CPU form on every device: the group statistics,
then a scale `rstd * weight` and a shift `bias - mean * scale` per (sample, channel)
(small tensors, one small kernel), and a pointwise `x * scale + shift` in the input's
own shape, which reads the input once and writes the output once (Inductor's count of
passes; eager's own CPU kernel computes this form too). PyTorch's CPU form needs a
weight; this one takes none. Both forms err by order eps * |mean| / std relative to the
output (in the computation dtype, f32 for 16-bit inputs); `x * scale + shift` by about
three times `(x - mean) * rstd` (f32, mean 1e4 over a deviation of 10, against float64:
2.9e-4 and 1.1e-4; eager's CPU kernel 2.5e-4).

InstanceNorm never reaches the table: `torch.instance_norm` is a composite that runs
`batch_norm` over the input viewed as (1, N x C, ...) with the weight and bias
`repeat`ed N times, and a repeat is a broadcast followed by a reshape that is not a
view, so each of the two became a copy kernel ahead of the norm's own. `instance_norm`
below replaces `F.instance_norm` in Dynamo's graph (`substitute_composites`) for the
form without running statistics: statistics over the spatial dims of (N, C, ...) and
the weight and bias broadcast per channel, one kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch._prims_common import get_computation_dtype
from torch.fx import GraphModule

from fuseopt.frontends.fx.substitutes import substitute_calls


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
    Returns (output, mean, rstd) as the op does: the output in the input's dtype, mean
    and rstd of shape (N, groups) in the input's dtype, or f32 for a 16-bit input with
    f32 weight and bias. Left to PyTorch (NotImplemented): inputs its checks reject
    (fewer than 2 dims, channels not divisible by the groups, other mixed dtypes) and
    empty groups (whose mean eager gives as 0)."""
    if input.ndim < 2 or num_groups <= 0 or num_channels % num_groups:
        return NotImplemented
    if flattened_inner_size == 0:
        return NotImplemented
    computation = get_computation_dtype(input.dtype)  # PyTorch's: f32 for 16-bit floats
    statistics_dtype = input.dtype
    parameters = [p for p in (weight, bias) if p is not None]
    if any(p.dtype != input.dtype for p in parameters):
        if computation == input.dtype or any(p.dtype != computation for p in parameters):
            return NotImplemented
        statistics_dtype = computation
    per_group = num_channels // num_groups
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
        mean.reshape(statistics).to(statistics_dtype),
        rstd.reshape(statistics).to(statistics_dtype),
    )


def instance_norm(
    input: torch.Tensor,
    running_mean: torch.Tensor | None = None,
    running_var: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> torch.Tensor:
    """`F.instance_norm`, with the signature and errors of PyTorch's: normalized by its
    own statistics over the spatial dims, then the per-channel weight and bias (see the
    module docstring). It calls `F.instance_norm` itself, so that PyTorch's semantics
    and errors hold, with running statistics, without input statistics, with fewer than
    3 dims, and with a weight or bias that is not a vector of C elements of the input's
    dtype."""
    size = input.size()
    plain = (
        running_mean is None
        and running_var is None
        and use_input_stats
        and input.ndim >= 3
        and all(
            p is None or (p.dtype == input.dtype and tuple(p.shape) == (size[1],))
            for p in (weight, bias)
        )
    )
    if not plain:
        return F.instance_norm(
            input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps
        )
    if math.prod(size[2:]) == 1:  # PyTorch's own check, with its message
        raise ValueError(
            f"Expected more than 1 spatial element when training, got input size {size}"
        )
    computation = get_computation_dtype(input.dtype)
    x = input.to(computation)
    var, mean = torch.var_mean(x, dim=list(range(2, input.ndim)), correction=0, keepdim=True)
    out = (x - mean) * torch.rsqrt(var + eps)
    per_channel = [1, size[1]] + [1] * (input.ndim - 2)
    if weight is not None:
        out = out * weight.to(computation).reshape(per_channel)
    if bias is not None:
        out = out + bias.to(computation).reshape(per_channel)
    return out.to(input.dtype)


SUBSTITUTES: dict[Callable[..., torch.Tensor], Callable[..., torch.Tensor]] = {
    F.instance_norm: instance_norm,
}
"""Calls in Dynamo's graph that `substitute_composites` replaces, by target."""


def substitute_composites(gm: GraphModule) -> GraphModule:
    """Dynamo's graph `gm` with the calls in SUBSTITUTES replaced (`substitute_calls`).
    Only `F.instance_norm` is a target: a direct `torch.instance_norm` call is left as
    it is."""
    return substitute_calls(gm, SUBSTITUTES)
