"""nn functions of dynamic size (`?`) compiled once and run at any size
(passes/generalize_sizes.py): bit for bit what a compile at that very size gives, on
the Triton interpreter here and the GPU where there is one; refused where the lowering
depends on the size in ways tile IR does not compute, and a call that breaks the
one-size rule is an error."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import fuseopt
from fuseopt.passes.generalize_sizes import HINTS, specialize

FILECHECK = Path(__file__).resolve().parents[1] / "filecheck/passes"
RMSNORM, MLP, ATTENTION, *_ = (FILECHECK / "generalize-sizes.mlir").read_text().split("// -----")


def _inputs(text: str, n: int, seed: int) -> list[torch.Tensor]:
    """Random inputs for the function in `text` with every `?` = n (bf16 or f32)."""
    g = torch.Generator().manual_seed(seed)
    signature = re.search(r"func\.func @\w+\((.*?)\) ->", text, re.S)
    assert signature is not None
    out = []
    for dims, element in re.findall(r"tensor<((?:[?\d]+x)+)(bf16|f32)>", signature.group(1)):
        shape = [n if d == "?" else int(d) for d in dims.rstrip("x").split("x")]
        x = torch.randn(shape, generator=g)
        out.append(x.bfloat16() if element == "bf16" else x)
    return out


def _same_as_static(text: str, sizes: tuple[int, ...], device: str = "cpu") -> None:
    dynamic = fuseopt.load_mlir(text, backend="triton")
    for n in sizes:
        static = fuseopt.load_mlir(specialize(text, n), backend="triton")
        xs = [x.to(device) for x in _inputs(text, n, seed=n)]
        for a, b in zip(dynamic(*xs), static(*xs), strict=True):
            assert a.shape == b.shape
            assert torch.equal(a, b), f"size {n}: max difference {(a - b).abs().max()}"


def test_a_norm_compiled_once_is_the_static_compile_at_every_size() -> None:
    _same_as_static(RMSNORM, (1, 2, 5, 64, 100))


def test_a_batched_matmul_kernel_over_a_dynamic_batch() -> None:
    _same_as_static(MLP, (1, 3, 17))


def test_attention_over_a_dynamic_batch() -> None:
    """The attention kernel streams its keys in each program: its grid (heads x query
    blocks per batch) is generalized from its values at the hints. On the GPU where
    there is one: Triton 3.6's CPU interpreter cannot loop to a bound known at run
    time (the causal key loop's; the newest Triton's can)."""
    _same_as_static(ATTENTION, (1, 3), "cuda" if torch.cuda.is_available() else "cpu")


def test_a_module_exported_with_a_dynamic_batch_matches_eager() -> None:
    """An MLP block with a LayerNorm, a softmax and a sum, exported from PyTorch with the
    batch made `?`, against the module itself."""
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = torch.nn.Linear(64, 96), torch.nn.Linear(96, 64)
            self.norm = torch.nn.LayerNorm(64)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y = self.norm(self.down(torch.nn.functional.gelu(self.up(x))) + x)
            return torch.softmax(y * 2.0, -1), y.sum(-1)

    block = Block().eval()
    text = fuseopt.export(block, (torch.randn(7, 5, 64),)).replace("tensor<7x", "tensor<?x")
    compiled = fuseopt.load_mlir(text, backend="triton")
    for batch in (1, 2, 9, 33):
        x = torch.randn(batch, 5, 64)
        for got, want in zip(compiled(*block.parameters(), x), block(x), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_the_tile_interpreter_runs_the_generalized_module() -> None:
    compiled = fuseopt.load_mlir(RMSNORM, backend="triton")
    module = compiled.module  # the tile IR of dynamic size
    for n in (1, 6):
        xs = _inputs(RMSNORM, n, seed=n)
        (want,) = compiled(*xs)
        (got,) = fuseopt.interpret(module, "rmsnorm_silu_gate", *xs)
        np.testing.assert_array_equal(np.asarray(got, dtype=np.float32), want.float().numpy())


def test_inputs_whose_dynamic_dims_differ_are_an_error() -> None:
    compiled = fuseopt.load_mlir(RMSNORM, backend="triton")
    x, w, _ = _inputs(RMSNORM, 4, seed=0)
    g = torch.randn(5, 320).bfloat16()
    with pytest.raises(ValueError, match="must be one size, got \\(4, 5\\)"):
        compiled(x, w, g)


def test_what_depends_on_the_size_otherwise_is_refused_located() -> None:
    attention, weight_grad = (
        (FILECHECK / "generalize-sizes-refused.mlir").read_text().split("// -----")
    )
    with pytest.raises(fuseopt.CompileError) as e:
        fuseopt.load_mlir(attention, backend="triton")
    assert ":11:3: error: dynamic sizes: an index constant depends on the size" in str(e.value)
    with pytest.raises(fuseopt.CompileError) as e:
        fuseopt.load_mlir(weight_grad, backend="triton")
    assert "the lowering does not verify (an op needs a static size" in str(e.value)


def test_the_hints_are_odd_so_every_ragged_block_keeps_its_mask() -> None:
    assert all(h % 2 == 1 for h in HINTS) and HINTS[0] != HINTS[1]


def test_a_reduction_over_the_dynamic_dim_masks_its_ragged_chunk() -> None:
    """At hints that a block divides, convert-nn-to-tile leaves out the mask of the
    last chunk of a looped reduction; the generalized kernel then read the padding as
    0 at other sizes (a max of negative numbers came out 0). Against PyTorch."""
    text = (
        "func.func @f(%x: tensor<4x?x2xf32>) -> (tensor<4xf32>, tensor<4xf32>) {\n"
        "  %m = nn.reduce_max %x [1, 2] : tensor<4x?x2xf32> -> tensor<4xf32>\n"
        "  %e = nn.exp %x : tensor<4x?x2xf32>\n"
        "  %s = nn.sum %e [1, 2] : tensor<4x?x2xf32> -> tensor<4xf32>\n"
        "  func.return %m, %s : tensor<4xf32>, tensor<4xf32>\n}\n"
    )
    compiled = fuseopt.load_mlir(text, backend="triton")
    # on the GPU where there is one: Triton 3.6's CPU interpreter cannot loop to a bound
    # known at run time (the newest Triton's can)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for n in (1, 3, 130):
        x = -torch.rand(4, n, 2, device=device) - 1
        m, s = compiled(x)
        torch.testing.assert_close(m, x.amax((1, 2)))
        torch.testing.assert_close(s, x.exp().sum((1, 2)), rtol=1e-5, atol=1e-5)


def test_a_fused_matmul_of_dynamic_rows_prints_its_block_counts() -> None:
    """A matmul kernel's grouped ordering divides the program id by the number of row
    blocks, `ceil(M / BM)`: computed in the kernel (`arith.ceildivui`), which Triton
    prints."""
    text = (
        "func.func @f(%x: tensor<?x40xbf16>, %w: tensor<300x40xbf16>) -> tensor<?x300xbf16> {\n"
        "  %y = nn.matmul %x, %w transpose_b : tensor<?x40xbf16>, tensor<300x40xbf16> "
        "-> tensor<?x300xbf16>\n"
        "  %g = nn.silu %y : tensor<?x300xbf16>\n"
        "  func.return %g : tensor<?x300xbf16>\n}\n"
    )
    compiled = fuseopt.load_mlir(text, backend="triton")
    for n in (1, 5, 130):  # (a static compile at 1 row tiles K otherwise: compare to torch)
        x, w = _inputs(text, n, seed=n)
        (got,) = compiled(x, w)
        want = torch.nn.functional.silu(x.float() @ w.float().T)
        torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)


_OPS = (
    "%{o} = nn.exp %{i} : tensor<?x{c}xf32>",
    "%{o} = nn.mul %{i}, %{i} : tensor<?x{c}xf32>",
    "%{o} = nn.softmax %{i} axis 1 : tensor<?x{c}xf32>",
    "%{o} = nn.log_softmax %{i} axis 1 : tensor<?x{c}xf32>",
    "%{o} = nn.tanh %{i} : tensor<?x{c}xf32>",
)


def test_random_row_graphs_at_random_sizes() -> None:
    """Property: chains of elementwise ops and row softmaxes over [?, C] for random C,
    compiled once, equal the static compile at random sizes (ragged and one row)."""
    rng = random.Random(20261127)
    for _ in range(4):
        c = rng.choice([1, 3, 100, 130, 1000])
        lines, last = [], "x"
        for i in range(rng.randrange(2, 5)):
            lines.append("  " + rng.choice(_OPS).format(o=f"v{i}", i=last, c=c))
            last = f"v{i}"
        text = (
            f"func.func @f(%x: tensor<?x{c}xf32>) -> tensor<?x{c}xf32> {{\n"
            + "\n".join(lines)
            + f"\n  func.return %{last} : tensor<?x{c}xf32>\n}}\n"
        )
        _same_as_static(text, (1, rng.randrange(2, 50)))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_the_gpu_one_compile_serves_every_size() -> None:
    dynamic = fuseopt.load_mlir(RMSNORM, backend="triton")
    for n in (1, 7, 1000, 8191):
        static = fuseopt.load_mlir(specialize(RMSNORM, n), backend="triton")
        xs = [x.cuda() for x in _inputs(RMSNORM, n, seed=n)]
        assert torch.equal(dynamic(*xs)[0], static(*xs)[0])
