"""frontends/fx/grouped_heads.py: PyTorch's attention kernels, where they run in PyTorch
(`attention="eager"`), read grouped-query keys and values unrepeated in graphs that need
no gradient, so no compiled region copies them G times over; training graphs keep the
repeat. On the CPU the kernel is PyTorch's flash kernel for CPUs; the cuDNN form is
checked on a GPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_frontend_common import assert_close
from torch.fx.experimental.proxy_tensor import make_fx
from torch.profiler import ProfilerActivity

import fuseopt
from fuseopt.frontends.fx.grouped_heads import (
    CUDNN_KERNEL,
    FLASH_KERNELS,
    read_keys_values_unrepeated,
    takes_grouped_heads,
    unrepeated,
)

ATTENTION_KERNELS = (*FLASH_KERNELS, CUDNN_KERNEL)


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Hugging Face's `repeat_kv`: [B, Hkv, S, D] -> [B, Hkv * groups, S, D]."""
    b, h, s, d = x.shape
    return x[:, :, None, :, :].expand(b, h, groups, s, d).reshape(b, h * groups, s, d)


class GroupedAttention(torch.nn.Module):
    """Grouped-query self-attention as Llama writes it: projections to 4 query heads and
    2 key/value heads, keys scaled (a stand-in for RoPE), keys and values repeated over
    the query groups, PyTorch's attention, output projection."""

    def __init__(self, heads: int = 4, kv_heads: int = 2, head_dim: int = 8) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        width = heads * head_dim
        self.q = torch.nn.Linear(width, width, bias=False)
        self.kv = torch.nn.Linear(width, 2 * kv_heads * head_dim, bias=False)
        self.out = torch.nn.Linear(width, width, bias=False)
        for linear in (self.q, self.kv, self.out):
            torch.nn.init.normal_(linear.weight, std=0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        groups = self.heads // self.kv_heads
        q = self.q(x).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).split(self.kv_heads * self.head_dim, dim=-1)
        k = k.view(b, n, self.kv_heads, self.head_dim).transpose(1, 2) * 1.5
        v = v.view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, repeat_kv(k, groups), repeat_kv(v, groups), is_causal=True
        )
        return self.out(y.transpose(1, 2).reshape(x.shape))


def _key_shapes(fn, *args: torch.Tensor) -> tuple[torch.Tensor, list[tuple[int, ...]]]:  # noqa: ANN001
    """`fn(*args)` and the shapes of the keys every attention kernel got in that call
    (the profiler's record of the ATen calls: a dispatch mode would make Dynamo run the
    model eagerly)."""
    names = {f"aten::{k._schema.name.split('::')[1]}" for k in ATTENTION_KERNELS}
    with torch.profiler.profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        out = fn(*args)
    keys = [tuple(e.input_shapes[1]) for e in prof.events() if e.name in names]
    return out, keys


def _region_outputs(compiled: fuseopt.CompiledModule) -> list[tuple[int, ...]]:
    return [
        tuple(t.get_shape())
        for region in compiled.regions
        for t in region.imported.body.block.ops.first.function_type.outputs
    ]


def test_eager_attention_reads_keys_and_values_unrepeated() -> None:
    """The kernel gets the 2 key/value heads, no region returns a repeated [2, 4, 6, 8]
    key or value, and the result is eager's."""
    torch.manual_seed(0)
    model = GroupedAttention()
    x = torch.randn(2, 6, 32)
    with torch.no_grad():
        compiled = fuseopt.compile(model, (x,), backend="interpret", attention="eager")
        actual, keys = _key_shapes(compiled, x)
        assert_close(actual, model(x))
    assert keys == [(2, 2, 6, 8)]
    assert (2, 4, 6, 8) not in _region_outputs(compiled)


def test_training_graphs_keep_the_repeat() -> None:
    """A graph that needs gradients hands the kernel the repeated keys (the kernel's
    backward returns gradients of the shape it was given); gradients are eager's."""
    torch.manual_seed(0)
    model = GroupedAttention()
    x = torch.randn(2, 6, 32, requires_grad=True)
    compiled = fuseopt.compile(model, (x,), backend="interpret", attention="eager")
    actual, keys = _key_shapes(compiled, x)
    assert keys == [(2, 4, 6, 8)]
    expected = model(x)
    assert_close(actual, expected)
    (grad,) = torch.autograd.grad(actual.sum(), x)
    (expected_grad,) = torch.autograd.grad(expected.sum(), x)
    assert_close(grad, expected_grad)


def _traced(fn, *args: torch.Tensor) -> torch.fx.GraphModule:  # noqa: ANN001 - a function
    return make_fx(fn, tracing_mode="fake")(*args)


def _attention_of(k: torch.Tensor, v: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)[0]


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_repeats_are_read_unrepeated_and_removed(groups: int) -> None:
    """Each group count (1: a repeat that copies nothing) is found; the rewritten graph
    has no expand left and computes what the original computes."""
    k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    q = torch.randn(2, 3 * groups, 5, 8)
    gm = _traced(
        lambda k, v, q: _attention_of(repeat_kv(k, groups), repeat_kv(v, groups), q), k, v, q
    )
    expected = gm(k, v, q)
    assert read_keys_values_unrepeated(gm) == 1
    assert not [n for n in gm.graph.nodes if n.target == torch.ops.aten.expand.default]
    assert_close(gm(k, v, q), expected)


def _tiled_heads(k: torch.Tensor) -> torch.Tensor:
    """[2, 2, 5, 8] -> [2, 4, 5, 8] with the unit dim before the heads: head h reads
    head h % 2 (the heads tiled, not grouped), though every size matches a repeat."""
    return k.unsqueeze(-4).expand(2, 2, 2, 5, 8).reshape(2, 4, 5, 8)


def _not_a_group_repeat(k: torch.Tensor) -> torch.Tensor:
    """[2, 3, 5, 8] -> [2, 6, 5, 8] by repeating along the sequence's neighbour axis:
    the heads are not grouped copies of one head each."""
    return k[:, :, :, None, :].expand(2, 3, 5, 2, 8).reshape(2, 6, 5, 8)


@pytest.mark.parametrize(
    "make_key",
    [
        pytest.param(_not_a_group_repeat, id="other-axis"),
        pytest.param(lambda k: torch.cat([k, k], dim=1), id="concatenated"),
        pytest.param(lambda k: k.repeat(1, 2, 1, 1), id="tiled"),
    ],
)
def test_other_head_layouts_are_left(make_key) -> None:  # noqa: ANN001 - a function
    """Keys widened in another way (heads not h // G) keep their call as it was."""
    k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    q = torch.randn(2, 6, 5, 8)
    gm = _traced(lambda k, v, q: _attention_of(make_key(k), repeat_kv(v, 2), q), k, v, q)
    expected = gm(k, v, q)
    assert read_keys_values_unrepeated(gm) == 0
    assert_close(gm(k, v, q), expected)


def test_heads_tiled_with_matching_sizes_are_left() -> None:
    """Two key heads tiled twice (unit dim before the heads: head h reads h % 2) have
    the sizes of a repeat over groups of 2; the call keeps them."""
    k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    q = torch.randn(2, 4, 5, 8)
    gm = _traced(lambda k, v, q: _attention_of(_tiled_heads(k), _tiled_heads(v), q), k, v, q)
    expected = gm(k, v, q)
    assert read_keys_values_unrepeated(gm) == 0
    assert_close(gm(k, v, q), expected)


def test_a_view_that_is_not_a_repeat_is_not_unrepeated() -> None:
    gm = _traced(lambda k: k.reshape(2, 6, 5, 4), torch.randn(2, 3, 5, 8))
    (view,) = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert unrepeated(view) is None


def test_cudnn_needs_a_cuda_device() -> None:
    """The cuDNN kernel on a CPU tensor is never asked (it cannot run there)."""
    cpu = torch.device("cpu")
    assert not takes_grouped_heads(CUDNN_KERNEL, cpu, torch.float32, 8, False, True, 4)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("queries", [1, 5])
def test_the_cpu_flash_kernel_is_asked_and_takes_grouped_heads(bias: bool, queries: int) -> None:
    cpu_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    assert takes_grouped_heads(
        cpu_flash, torch.device("cpu"), torch.float32, 8, bias, False, queries
    )


def test_an_additive_mask_is_read_with_grouped_heads() -> None:
    """The CPU kernel with a per-batch additive mask: grouped keys and values give what
    the repeated ones give."""
    k, v = torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 8)
    q, mask = torch.randn(2, 4, 3, 8), torch.randn(2, 1, 3, 7)

    def attention(k: torch.Tensor, v: torch.Tensor, q: torch.Tensor, m: torch.Tensor):  # noqa: ANN202
        kernel = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
        return kernel(q, repeat_kv(k, 2), repeat_kv(v, 2), 0.0, False, attn_mask=m)[0]

    gm = _traced(attention, k, v, q, mask)
    expected = gm(k, v, q, mask)
    assert read_keys_values_unrepeated(gm) == 1
    assert_close(gm(k, v, q, mask), expected)


def test_a_repeat_read_elsewhere_stays_for_its_other_reader() -> None:
    """The repeated values are also returned: the call reads the unrepeated ones, the
    repeat stays for the output; nothing else in the graph is removed."""
    k, v, q = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 4, 5, 8)

    def attention(k: torch.Tensor, v: torch.Tensor, q: torch.Tensor):  # noqa: ANN202
        wide_v = repeat_kv(v, 2)
        unused = torch.ops.aten.add.Tensor(q, 1.0)  # dead before the rewrite: kept
        del unused
        return _attention_of(repeat_kv(k, 2), wide_v, q), wide_v

    gm = _traced(attention, k, v, q)
    count = len(gm.graph.nodes)
    expected = gm(k, v, q)
    assert read_keys_values_unrepeated(gm) == 1
    assert_close(gm(k, v, q), expected)
    expands = [n for n in gm.graph.nodes if n.target == torch.ops.aten.expand.default]
    assert len(expands) == 1  # the keys' repeat is gone, the values' stays
    assert len(gm.graph.nodes) == count - 4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_gpu_attention_reads_keys_and_values_unrepeated(backend: str) -> None:
    """On a GPU (bf16, head dim 64) PyTorch's kernel gets the 2 key/value heads where it
    takes them (cuDNN where the release does, else flash), and the result is eager's."""
    torch.manual_seed(0)
    model = GroupedAttention(8, 2, 64).cuda().to(torch.bfloat16)
    x = torch.randn(2, 128, 512, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        compiled = fuseopt.compile(model, (x,), backend=backend, attention="eager")
        actual, keys = _key_shapes(compiled, x)
        assert_close(actual, model(x))
    assert keys == [(2, 2, 128, 64)]
