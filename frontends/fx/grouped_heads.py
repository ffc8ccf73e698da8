"""PyTorch's attention kernels read grouped-query keys and values unrepeated.

Models with fewer key/value heads than query heads (Llama, Qwen2, Mistral) repeat the
keys and values over each query group before calling `scaled_dot_product_attention`
(Hugging Face's `repeat_kv`: `x[:, :, None].expand(B, Hkv, G, S, D).reshape(B, H, S,
D)`). Where the attention runs in PyTorch (`attention="eager"`, the CUDA backend's
default), that repeat reached the compiled region as a copy: the values transposed to
heads and written G times over (a kernel that only copies), the keys written G times
by their RoPE kernel, and in a decode step the whole cache copied G times per layer.

PyTorch's flash kernels (CUDA and CPU) and its cuDNN kernel take keys and values with
fewer heads themselves (query head h reads key/value head h // G, as `enable_gqa`
does). `read_keys_values_unrepeated` hands them the unrepeated tensors, in graphs that
need no gradient (the kernels' backward would return gradients of the unrepeated
shape). Whether the cuDNN kernel takes grouped heads with the call's arguments (a
bias, causal, head dim, dtype) depends on the cuDNN release, so it is asked once per
such form on small tensors (`cudnn_takes_grouped_heads`); a form it refuses or computes
differently keeps the repeat.
"""

from __future__ import annotations

import functools
import logging

import torch
from torch.fx import GraphModule, Node

logger = logging.getLogger("fuseopt")
aten = torch.ops.aten

FLASH_KERNELS = (
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
)
"""PyTorch's flash-attention kernels: they take fewer key/value heads than query heads."""

CUDNN_KERNEL = aten._scaled_dot_product_cudnn_attention.default
"""PyTorch's cuDNN attention kernel: grouped heads where the cuDNN release takes them."""

FLAT_VIEWS = (aten._unsafe_view.default, aten.view.default, aten.reshape.default)
"""The ops that flatten the [B, Hkv, G, S, D] repeat to [B, H, S, D]."""


def _shape(node: object) -> tuple[int, ...] | None:
    """The static shape of `node`'s traced value, or None (not a tensor, symbolic)."""
    value = node.meta.get("val") if isinstance(node, Node) else None
    if not isinstance(value, torch.Tensor):
        return None
    try:
        return tuple(int(n) for n in value.shape)
    except TypeError:  # a symbolic size
        return None


def unrepeated(node: object) -> Node | None:
    """The [B, Hkv, S, D] tensor that `node` (a [B, H, S, D] value) repeats over query
    groups of G = H / Hkv heads: `view(clone(expand(unsqueeze(x, 2), [B, Hkv, G, S, D])),
    [B, H, S, D])`, the clone optional; else None."""
    if not isinstance(node, Node) or node.target not in FLAT_VIEWS:
        return None
    wide = node.args[0]
    if isinstance(wide, Node) and wide.target == aten.clone.default:
        wide = wide.args[0]
    if not isinstance(wide, Node) or wide.target != aten.expand.default:
        return None
    grouped = wide.args[0]
    if not isinstance(grouped, Node) or grouped.target != aten.unsqueeze.default:
        return None
    source = grouped.args[0]
    flat, repeated, kv = _shape(node), _shape(wide), _shape(source)
    if flat is None or repeated is None or kv is None or len(flat) != 4 or len(kv) != 4:
        return None
    b, hkv, s, d = kv
    if _shape(grouped) != (b, hkv, 1, s, d):  # the new unit dim right after the heads
        return None
    if repeated != (b, hkv, repeated[2], s, d) or flat != (b, hkv * repeated[2], s, d):
        return None
    return source if isinstance(source, Node) else None


@functools.cache
def cudnn_takes_grouped_heads(
    device: torch.device, dtype: torch.dtype, head_dim: int, bias: bool, causal: bool
) -> bool:
    """Whether PyTorch's cuDNN attention on `device` computes grouped-query heads (2
    query heads per key/value head) as it computes them repeated, for this dtype, head
    dim, with or without a bias, causal or not: asked once on small random tensors."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily(), torch.no_grad():
        try:
            generator = torch.Generator(device=device).manual_seed(0)
            shape = (1, 2, 64, head_dim)
            q = torch.randn(shape, device=device, dtype=dtype, generator=generator)
            k, v = (
                torch.randn((1, 1, 64, head_dim), device=device, dtype=dtype, generator=generator)
                for _ in range(2)
            )
            mask = (
                torch.randn((1, 1, 64, 64), device=device, dtype=dtype, generator=generator)
                if bias
                else None
            )
            grouped = CUDNN_KERNEL(q, k, v, mask, False, 0.0, causal, False)[0]
            repeated = CUDNN_KERNEL(
                q,
                k.expand(shape).contiguous(),
                v.expand(shape).contiguous(),
                mask,
                False,
                0.0,
                causal,
                False,
            )[0]
            return bool(torch.allclose(grouped.float(), repeated.float(), atol=1e-2, rtol=1e-2))
        except Exception as e:  # the release refuses the form: keep the repeat
            logger.debug("fuseopt: cuDNN attention takes no grouped heads here: %s", e)
            return False


def _takes_grouped_heads(call: Node, key: Node) -> bool:
    """Whether the attention kernel `call` takes `key` (fewer heads than its query)."""
    if call.target in FLASH_KERNELS:
        return True
    value = key.meta.get("val")
    if call.target != CUDNN_KERNEL or not isinstance(value, torch.Tensor):
        return False
    if value.device.type != "cuda":
        return False
    bias = call.args[3] if len(call.args) > 3 else call.kwargs.get("attn_bias")
    causal = call.args[6] if len(call.args) > 6 else call.kwargs.get("is_causal", False)
    return cudnn_takes_grouped_heads(
        value.device, value.dtype, int(value.shape[-1]), bias is not None, bool(causal)
    )


def read_keys_values_unrepeated(gm: GraphModule) -> int:
    """Give every flash or cuDNN attention call in `gm` (a graph that needs no
    gradient) whose keys and values are `unrepeated` repeats the unrepeated tensors, in
    place; the repeats no other node reads are removed. The number of calls changed."""
    changed = 0
    for call in gm.graph.nodes:
        if call.op != "call_function" or call.target not in (*FLASH_KERNELS, CUDNN_KERNEL):
            continue
        key, value = unrepeated(call.args[1]), unrepeated(call.args[2])
        if key is None or value is None or _shape(key)[1] != _shape(value)[1]:
            continue
        if not _takes_grouped_heads(call, key):
            continue
        call.args = (call.args[0], key, value, *call.args[3:])
        changed += 1
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return changed
