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
shape). Whether a kernel takes grouped heads with the call's arguments (a bias,
causal, head dim, dtype, one query or several) depends on the PyTorch and cuDNN
releases, so each form is asked once on small tensors (`takes_grouped_heads`); a form
the kernel refuses or computes differently keeps the repeat. Graphs of symbolic sizes
are left as they are (the repeat's shapes are not known).
"""

from __future__ import annotations

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

BIAS_ARGUMENT = {
    CUDNN_KERNEL: "attn_bias",
    aten._scaled_dot_product_flash_attention_for_cpu.default: "attn_mask",
}
"""The name of each kernel's bias argument (CUDA flash takes none)."""

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


PROBE_GROUPS = 2
"""Query heads per key/value head in the probe (`takes_grouped_heads`)."""

_probed: dict[tuple, bool] = {}
"""`takes_grouped_heads`' answers, by form."""


def _probe_call(
    kernel: object,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bias: torch.Tensor | None,
    causal: bool,
) -> torch.Tensor:
    """`kernel`'s attention output for these operands (arguments by name)."""
    named: dict[str, object] = {"is_causal": causal}
    if kernel in BIAS_ARGUMENT:
        named[BIAS_ARGUMENT[kernel]] = bias
    if kernel == CUDNN_KERNEL:
        named["compute_log_sumexp"] = False  # required by its schema
    return kernel(q, k, v, **named)[0]  # type: ignore[operator]


def _argument(call: Node, name: str | None, default: object = None) -> object:
    """The argument `name` of `call` (positional or keyword, by its op's schema)."""
    names = [a.name for a in call.target._schema.arguments]  # type: ignore[union-attr]
    if name not in names:
        return default
    i = names.index(name)
    return call.args[i] if i < len(call.args) else call.kwargs.get(name, default)


def takes_grouped_heads(
    kernel: object,
    device: torch.device,
    dtype: torch.dtype,
    head_dim: int,
    bias: bool,
    causal: bool,
    queries: int,
) -> bool:
    """Whether PyTorch's attention `kernel` on `device` computes grouped-query heads
    (query head h reads key/value head h // G) as it computes them repeated, for this
    dtype and head dim, with or without a bias, causal or not, one query or several:
    asked once per form on small random tensors (2 batches, 2 key/value heads of 2
    query heads each, 24 keys), outside any CUDA graph capture. Which kernels take
    grouped heads depends on the PyTorch and cuDNN releases."""
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return False  # no probe inside a capture (it would synchronize); not cached
    form = (kernel, device.type, device.index, dtype, head_dim, bias, causal, queries == 1)
    if form not in _probed:
        _probed[form] = _probe(kernel, device, dtype, head_dim, bias, causal, queries == 1)
    return _probed[form]


def _probe(
    kernel: object,
    device: torch.device,
    dtype: torch.dtype,
    head_dim: int,
    bias: bool,
    causal: bool,
    one_query: bool,
) -> bool:
    """`takes_grouped_heads`' question, asked (real tensors, even under a fake mode)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily(), torch.no_grad():
        try:
            generator = torch.Generator(device=device).manual_seed(0)

            def draw(*shape: int) -> torch.Tensor:
                return torch.randn(shape, device=device, dtype=dtype, generator=generator)

            kv_heads, length, keys = 2, 1 if one_query else 8, 24
            q = draw(2, kv_heads * PROBE_GROUPS, length, head_dim)
            k, v = draw(2, kv_heads, keys, head_dim), draw(2, kv_heads, keys, head_dim)
            mask = draw(2, 1, length, keys) if bias else None
            grouped = _probe_call(kernel, q, k, v, mask, causal)
            repeated = _probe_call(
                kernel,
                q,
                k.repeat_interleave(PROBE_GROUPS, 1),
                v.repeat_interleave(PROBE_GROUPS, 1),
                mask,
                causal,
            )
            return bool(torch.allclose(grouped.float(), repeated.float(), atol=1e-2, rtol=1e-2))
        except Exception as e:  # the release refuses the form: keep the repeat
            logger.debug("fuseopt: %s takes no grouped heads here: %s", kernel, e)
            return False


def _takes_grouped_heads(call: Node, key: Node) -> bool:
    """Whether the attention kernel `call` takes `key` (fewer heads than its query)."""
    value, query = key.meta.get("val"), call.args[0]
    queries = _shape(query)
    if not isinstance(value, torch.Tensor) or queries is None:
        return False
    bias = _argument(call, BIAS_ARGUMENT.get(call.target))  # type: ignore[arg-type]
    causal = _argument(call, "is_causal", False)
    return takes_grouped_heads(
        call.target,
        value.device,
        value.dtype,
        int(value.shape[-1]),
        bias is not None,
        bool(causal),
        queries[2],
    )


def _erase_unused_chain(gm: GraphModule, node: object) -> None:
    """Erase `node` and the view, clone, expand and unsqueeze nodes above it that no
    other node reads any more (a repeat the attention call no longer reads)."""
    chain_ops = (*FLAT_VIEWS, aten.clone.default, aten.expand.default, aten.unsqueeze.default)
    while isinstance(node, Node) and node.target in chain_ops and not node.users:
        above = node.args[0]
        gm.graph.erase_node(node)
        node = above


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
        repeats = call.args[1:3]
        call.args = (call.args[0], key, value, *call.args[3:])
        for repeat in repeats:
            _erase_unused_chain(gm, repeat)
        changed += 1
    if changed:
        gm.recompile()
    return changed
