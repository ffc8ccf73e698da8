"""The three ways the benchmark and the tests spread a Llama over ranks.

- `data_parallel`: DistributedDataParallel (every rank holds the whole model and its
  own batch; gradients are all-reduced by DDP's reducer during the backward);
- `fully_sharded`: FSDP2 (`torch.distributed.fsdp.fully_shard`) on every decoder layer
  and on the root (parameters sharded; all-gathered before a layer runs, gradients
  reduce-scattered after);
- `tensor_parallel`: `parallelize_module` with `LLAMA_TP_PLAN` on every decoder layer:
  the attention and MLP input projections column-wise, the output projections
  row-wise, so each layer ends in one all-reduce per block (attention, MLP) and holds
  ``heads / world_size`` query heads and ``kv_heads / world_size`` key/value heads.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

STRATEGIES = ("ddp", "fsdp", "tp")
"""The parallelisms, in table order."""

TRAINING = {"ddp": True, "fsdp": True, "tp": False}
"""Which strategies run a training step (the others a prefill)."""


def llama_tp_plan() -> dict[str, Any]:
    """The tensor-parallel plan of one Llama decoder layer (module path -> style)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    return {
        "self_attn.q_proj": ColwiseParallel(),
        "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(),
        "self_attn.o_proj": RowwiseParallel(),
        "mlp.gate_proj": ColwiseParallel(),
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(),
    }


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The decoder layers of a Hugging Face causal LM (``model.model.layers``)."""
    return list(model.model.layers)


def data_parallel(module: nn.Module, device: torch.device, bucket_cap_mb: float | None = None):
    """`module` under DDP on `device` (``bucket_cap_mb``: DDP's gradient bucket size;
    None is DDP's default)."""
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    kwargs = {} if bucket_cap_mb is None else {"bucket_cap_mb": bucket_cap_mb}
    return DistributedDataParallel(module, device_ids=ids, **kwargs)


def fully_sharded(root: nn.Module, layers: list[nn.Module]) -> nn.Module:
    """FSDP2 on each of `layers` and then on `root` (in place); returns `root`."""
    from torch.distributed.fsdp import fully_shard

    for layer in layers:
        fully_shard(layer)
    fully_shard(root)
    return root


def tensor_parallel(layers: list[nn.Module], device: torch.device, world_size: int) -> None:
    """Shard every layer's projections over all ranks by `llama_tp_plan` (in place)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    mesh = init_device_mesh(device.type, (world_size,))
    for layer in layers:
        parallelize_module(layer, mesh, llama_tp_plan())


def full_gradient(param: nn.Parameter) -> torch.Tensor | None:
    """A parameter's whole gradient on every rank (an FSDP2 gradient is a sharded
    DTensor, gathered here: a collective every rank must call)."""
    grad = param.grad
    if grad is None:
        return None
    full = getattr(grad, "full_tensor", None)
    return (full() if full is not None else grad).detach().clone()
