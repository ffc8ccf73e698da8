"""frontends/fx/merged_linears.py: in graphs that need no gradient, linear layers that
read one input run as one GEMM over their weights, which move into one buffer at the
first call (the parameters become its slices); results match eager whatever happens to
the parameters afterwards (updated in place, replaced, not movable)."""

from __future__ import annotations

import logging

import pytest
import torch
from test_frontend_common import assert_close

import fuseopt
from fuseopt.frontends.fx.merged_linears import PackedParameters, owns_storage, packed_view


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> None:
    torch._dynamo.reset()


class Block(torch.nn.Module):
    """Query/key/value projections of one input (with or without biases), their mix,
    then a gated MLP whose gate and up projections read one input."""

    def __init__(self, width: int = 16, bias: bool = False) -> None:
        super().__init__()
        self.q = torch.nn.Linear(width, width, bias=bias)
        self.k = torch.nn.Linear(width, width // 2, bias=bias)
        self.v = torch.nn.Linear(width, width // 2, bias=bias)
        self.gate = torch.nn.Linear(width, 2 * width, bias=False)
        self.up = torch.nn.Linear(width, 2 * width, bias=False)
        self.down = torch.nn.Linear(2 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.q(x), self.k(x), self.v(x)
        h = q * torch.cat([k, v], dim=-1).sigmoid() + x
        return self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


def gemms(compiled: fuseopt.CompiledModule) -> int:
    """The matrix products the kernels compute (library GEMMs and generated ones)."""
    return sum(op in ("nn.matmul", "tile.dot") for k in compiled.kernels for op in k.ops)


def storage_of(p: torch.Tensor) -> int:
    return p.untyped_storage().data_ptr()


def compile_block(model: torch.nn.Module, x: torch.Tensor, **options: object):
    return fuseopt.compile(model, (x,), backend="triton", strict=True, **options)


@pytest.mark.parametrize("bias", [False, True])
def test_linears_of_one_input_run_as_one_gemm_over_packed_parameters(bias: bool) -> None:
    torch.manual_seed(0)
    model = Block(bias=bias).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        expected = model(x)
        compiled = compile_block(model, x)
        assert_close(compiled(x), expected)
        assert_close(compiled(x), expected)  # the packed buffer, found again
    assert gemms(compiled) == 3  # q/k/v, gate/up, down
    assert not compiled.fallbacks  # packing is not an op run in PyTorch
    assert storage_of(model.q.weight) == storage_of(model.k.weight) == storage_of(model.v.weight)
    assert model.k.weight.storage_offset() == 16 * 16
    assert storage_of(model.gate.weight) == storage_of(model.up.weight)
    assert owns_storage(model.down.weight)
    if bias:
        assert storage_of(model.q.bias) == storage_of(model.v.bias)
    assert all(type(p) is torch.nn.Parameter and p.is_leaf for p in model.parameters())


def test_updates_and_replacements_of_parameters_after_packing_are_read() -> None:
    torch.manual_seed(1)
    model = Block(bias=True).eval()
    x = torch.randn(3, 16)
    with torch.no_grad():
        compiled = compile_block(model, x)
        compiled(x)
        model.k.weight.mul_(-2.0)  # in place: lands in the packed buffer
        model.v.bias.add_(1.0)
        assert_close(compiled(x), model(x))
        model.load_state_dict({k: v + 0.5 for k, v in model.state_dict().items()})
        assert_close(compiled(x), model(x))
        model.q.weight = torch.nn.Parameter(torch.randn(16, 16))  # replaced: packed again
        assert_close(compiled(x), model(x))
        assert storage_of(model.q.weight) == storage_of(model.k.weight)


def test_parameters_packed_in_inference_mode_stay_trainable() -> None:
    torch.manual_seed(2)
    model = Block().eval()
    x = torch.randn(4, 16)
    with torch.inference_mode():
        compiled = compile_block(model, x)
        out = compiled(x)
    assert_close(out, model(x).detach())
    assert not any(p.is_inference() for p in model.parameters())
    model(x).sum().backward()  # eager training after packing
    assert model.q.weight.grad is not None and model.q.weight.grad.shape == (16, 16)


def test_a_second_graph_over_packed_parameters_reads_them_in_place() -> None:
    torch.manual_seed(3)
    model = Block().eval()
    compiled = fuseopt.compile(model, backend="triton", strict=True, dynamic=False)
    with torch.no_grad():
        for rows in (3, 7):  # a recompile for a new shape
            x = torch.randn(rows, 16)
            assert_close(compiled(x), model(x))
            pointer = model.q.weight.data_ptr()
    with torch.no_grad():
        compiled(torch.randn(3, 16))
    assert model.q.weight.data_ptr() == pointer  # not packed anew by the first graph


def test_symbolic_rows() -> None:
    torch.manual_seed(4)
    model = Block(bias=True).eval()
    compiled = fuseopt.compile(model, backend="triton", strict=True, dynamic=True)
    with torch.no_grad():
        for rows in (2, 9, 1):
            x = torch.randn(rows, 16)
            assert_close(compiled(x), model(x))
    assert storage_of(model.q.weight) == storage_of(model.k.weight)


def test_option_off_and_training_graphs_keep_each_linear() -> None:
    torch.manual_seed(5)
    model = Block()
    x = torch.randn(3, 16)
    with torch.no_grad():
        compiled = compile_block(model, x, merge_linears=False)
        assert_close(compiled(x), model(x))
    assert gemms(compiled) == 6
    assert all(owns_storage(p) for p in model.parameters())
    torch._dynamo.reset()
    trained = compile_block(model, x)  # gradients needed: no packing
    trained(x).sum().backward()
    assert all(owns_storage(p) for p in model.parameters())
    with pytest.raises(fuseopt.ConfigurationError, match="merge_linears"):
        compile_block(model, x, merge_linears="yes")


def test_cuda_graphs_keep_each_linear_unless_asked() -> None:
    """Under reduce-overhead launches cost no host time: merging is off by default."""
    torch.manual_seed(8)
    model = Block().eval()
    x = torch.randn(3, 16)
    with torch.no_grad():
        replayed = compile_block(model, x, mode="reduce-overhead")
        assert_close(replayed(x), model(x))
        assert gemms(replayed) == 6 and all(owns_storage(p) for p in model.parameters())
        torch._dynamo.reset()
        asked = compile_block(model, x, mode="reduce-overhead", merge_linears=True)
        assert_close(asked(x), model(x))
    assert gemms(asked) == 3


def test_weights_that_are_views_or_mixed_biases_keep_their_gemms() -> None:
    torch.manual_seed(6)
    model = Block(bias=True).eval()
    shared = torch.randn(64, 16)
    model.k.weight = torch.nn.Parameter(shared[8:16])  # a view: cannot be moved
    model.v.weight = torch.nn.Parameter(shared[16:24])
    model.up.bias = torch.nn.Parameter(torch.randn(32))  # gate has none
    x = torch.randn(3, 16)
    with torch.no_grad():
        compiled = compile_block(model, x)
        assert_close(compiled(x), model(x))
    assert gemms(compiled) == 6
    assert model.k.weight.storage_offset() == 8 * 16  # left where it was


def test_packed_parameters_at_run_time(caplog: pytest.LogCaptureFixture) -> None:
    a, b = torch.nn.Parameter(torch.randn(3, 4)), torch.nn.Parameter(torch.randn(2, 4))
    expected = torch.cat([a, b]).detach()
    pack = PackedParameters("test")
    packed = pack(a, b)
    assert torch.equal(packed, expected) and packed.is_contiguous()
    assert pack(a, b) is packed  # addresses unchanged: no work
    assert packed_view([a, b]) is not None and packed_view([b, a]) is None
    # not parameters: a copy for the call, logged once, parameters untouched
    c, d = torch.randn(3, 4), torch.randn(2, 4)
    other = PackedParameters("plain")
    with caplog.at_level(logging.INFO, logger="fuseopt"):
        assert torch.equal(other(c, d), torch.cat([c, d]))
        other(c, d)
    assert sum("concatenated each call" in r.message for r in caplog.records) == 1
    assert owns_storage(torch.nn.Parameter(c))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend", ["triton", "cuda"])
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_packed_parameters_on_the_gpu(backend: str, mode: str | None) -> None:
    """bf16 on the GPU: packed GEMMs match eager, also when CUDA graphs replay them after
    a parameter was updated in place or replaced."""
    torch.manual_seed(7)
    model = Block(width=256, bias=True).cuda().to(torch.bfloat16).eval()
    x = torch.randn(4, 64, 256, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        compiled = fuseopt.compile(
            model, (x,), backend=backend, mode=mode, strict=True, merge_linears=True
        )
        for step in range(6):
            if step == 3:
                model.k.weight.mul_(-1.0)
            if step == 4:
                model.up.weight = torch.nn.Parameter(torch.randn_like(model.up.weight) / 16)
            assert_close(compiled(x), model(x))
    assert storage_of(model.gate.weight) == storage_of(model.up.weight)
    assert gemms(compiled) == 3


def test_under_autocast() -> None:
    """Autocast casts the packed weights once (one cast of the buffer, not of each)."""
    torch.manual_seed(9)
    model = Block(bias=True).eval()
    x = torch.randn(4, 16)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model(x)
        compiled = compile_block(model, x)
        got = compiled(x)
    assert got.dtype == expected.dtype == torch.bfloat16
    assert_close(got, expected)
    assert storage_of(model.q.weight) == storage_of(model.v.weight)
