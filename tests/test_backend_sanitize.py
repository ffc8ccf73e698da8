"""No input text reaches generated source, and no input name shadows the printers' own
(issue 14), in both backends:

- a `schedule` attribute with newlines stays out of the CUDA and Triton sources (only
  its identifier characters reach a comment or docstring);
- a function, kernel or value named like a Triton helper (`fuseopt_bf16`,
  `fuseopt_add`), like a launcher's parameter (`buf0`, `grid`) or `INTERPRETED` is
  renamed, and the module runs and computes the function;
- a CUDA kernel named like a C library function (`expf`) or like another kernel's
  launcher (`launch_<name>`) is renamed, and the translation unit builds and runs (in
  the CPU emulation, skipped without g++).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

import fuseopt
from fuseopt.backends import python_names as triton_names
from fuseopt.backends.cuda import names as cuda_names
from fuseopt.backends.cuda import op_table as cuda_op_table
from fuseopt.backends.cuda.prelude import CP_ASYNC, PRELUDE
from fuseopt.backends.cuda.printer import print_cuda
from fuseopt.backends.kernel_cache import KernelCache
from fuseopt.backends.triton import op_table as triton_op_table
from fuseopt.backends.triton.backend import compile_module
from fuseopt.backends.triton.printer import print_triton

INJECTED = 'pointwise\\n#include <stdlib.h>\\nint evil = system(\\"id\\");\\n\\"\\"\\"\\n//'
"""A schedule attribute (MLIR string escapes) whose lines would be C++ or close a docstring."""

EXP_KERNEL = """
tile.kernel @NAME grid 1 (%x: memref<64xf32>, %y: memref<64xf32>) attributes {schedule = "SCHEDULE", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %p = tile.program_id 0
  %c16 = arith.constant 16 : index
  %o = arith.muli %p, %c16 : index
  %t = tile.load %x[%o] : memref<64xf32> -> tensor<16xf32>
  %e = nn.OP %t : tensor<16xf32>
  tile.store %e, %y[%o] : tensor<16xf32>, memref<64xf32>
  tile.return
}
"""
"""A four-program elementwise kernel (`NAME`, `SCHEDULE`, `OP` filled in)."""


def kernel(name: str, op: str = "exp", schedule: str = "pointwise") -> str:
    """EXP_KERNEL with its name, op and schedule attribute."""
    return EXP_KERNEL.replace("NAME", name).replace("SCHEDULE", schedule).replace("OP", op)


def host(*kernels: str) -> str:
    """`@main(%x, outputs...)` launching each kernel on `%x` into its own output."""
    outs = [f"%y{i}: memref<64xf32> {{tile.output}}" for i in range(len(kernels))]
    lines = [f"func.func @main(%x: memref<64xf32>, {', '.join(outs)}) {{"]
    for i, k in enumerate(kernels):
        lines.append(f"  tile.launch @{k} grid [4] (%x, %y{i}) : memref<64xf32>, memref<64xf32>")
    return "\n".join([*lines, "  func.return", "}"])


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(cache))
    return cache


def test_schedule_text_never_reaches_a_printer() -> None:
    """A schedule is one of the tiler's names: the verifier rejects any other text (an
    injection attempt here) with a located error, so neither printer ever sees it."""
    with pytest.raises(fuseopt.CompileError, match="schedule must be one of") as e:
        fuseopt.parse(kernel("k", schedule=INJECTED), "inj.mlir")
    assert "inj.mlir:2:1" in str(e.value)


def triton_run(text: str, cache: Path) -> tuple[torch.Tensor, ...]:
    """Print tile IR `text` (with `@main`) as Triton and run it on 0..63 / 8."""
    fn = compile_module(fuseopt.parse(text), "main", {}, KernelCache(str(cache)))
    return tuple(fn(torch.arange(64.0) / 8))


@pytest.mark.parametrize(
    "name", ["fuseopt_bf16", "fuseopt_add", "fuseopt_tanh", "buf0", "buf1", "grid", "INTERPRETED"]
)
def test_triton_kernel_names_never_shadow_the_printers(name: str, _private_cache: Path) -> None:
    text = kernel(name, op="tanh") + kernel("launch_" + name, op="neg")
    text += host(name, "launch_" + name)
    source = print_triton(fuseopt.parse(text)).source
    defs = [n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
    assert len(defs) == len(set(defs)), defs
    x = torch.arange(64.0) / 8
    tanh, neg = triton_run(text, _private_cache)
    torch.testing.assert_close(tanh, torch.tanh(x))
    torch.testing.assert_close(neg, -x)


NN_SOFTMAX = """
func.func @FUNC(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %fuseopt_max = nn.reduce_max %x [1] keepdim : tensor<4x8xbf16> -> tensor<4x1xbf16>
  %fuseopt_bf16 = nn.broadcast %fuseopt_max : tensor<4x1xbf16> -> tensor<4x8xbf16>
  %grid = nn.sub %x, %fuseopt_bf16 : tensor<4x8xbf16>
  %INTERPRETED = nn.exp %grid : tensor<4x8xbf16>
  %fuseopt_add = nn.sum %INTERPRETED [1] keepdim : tensor<4x8xbf16> -> tensor<4x1xbf16>
  %b = nn.broadcast %fuseopt_add : tensor<4x1xbf16> -> tensor<4x8xbf16>
  %d = nn.div %INTERPRETED, %b : tensor<4x8xbf16>
  func.return %d : tensor<4x8xbf16>
}
"""
"""A bf16 softmax (calls fuseopt_max, fuseopt_add and fuseopt_bf16) whose function and
values are named like the helpers the Triton module needs."""


@pytest.mark.parametrize("func_name", ["fuseopt_bf16", "fuseopt_max", "fuseopt_add"])
def test_triton_function_and_value_names_never_shadow_the_helpers(
    func_name: str, _private_cache: Path
) -> None:
    text = NN_SOFTMAX.replace("FUNC", func_name)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    fn = compile_module(fuseopt.parse(text), func_name, {}, KernelCache(str(_private_cache)))
    (y,) = fn(x)
    torch.testing.assert_close(y, torch.softmax(x.float(), -1).to(torch.bfloat16))


def test_triton_kernel_name_from_a_fusion_cannot_shadow_a_helper(_private_cache: Path) -> None:
    text = NN_SOFTMAX.replace("FUNC", "main")
    fused = fuseopt.run_pipeline(fuseopt.parse(text), "nn-decompose,canonicalize,cse,nn-fuse")
    renamed = re.sub(r'kernel_name = "[^"]*"', 'kernel_name = "fuseopt_add"', str(fused))
    assert 'kernel_name = "fuseopt_add"' in renamed
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    fn = compile_module(fuseopt.parse(renamed), "main", {}, KernelCache(str(_private_cache)))
    (y,) = fn(x)
    torch.testing.assert_close(y, torch.softmax(x.float(), -1).to(torch.bfloat16))


def test_triton_helpers_are_reserved() -> None:
    for helper in triton_op_table.HELPERS:
        assert triton_names.sanitize(helper) != helper


def _identifiers_called(text: str) -> set[str]:
    """Names C++ code calls or instantiates (`name(` or `name<`; comments, strings and
    preprocessor lines left out)."""
    code = "\n".join(line.split("//")[0] for line in text.splitlines() if not line.startswith("#"))
    code = re.sub(r'"[^"]*"', "", code)
    return set(re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)(?:\s*\(|<[A-Za-z_])", code))


def test_cuda_names_the_printer_calls_are_reserved() -> None:
    """Every function the CUDA op table and prelude call is out of a kernel's reach
    (members, keywords and casts called with parentheses aside)."""
    tables = [
        cuda_op_table.FLOAT_UNARY,
        cuda_op_table.INT_UNARY,
        cuda_op_table.FLOAT_BINARY,
        cuda_op_table.INT_BINARY,
    ]
    text = PRELUDE + CP_ASYNC + " ".join(t for table in tables for t in table.values())
    not_file_scope = {"of", "op", "if", "for", "return", "operator", "sizeof", "decltype"}
    called = _identifiers_called(text) - not_file_scope
    assert called, "no identifiers found"
    unreserved = sorted(n for n in called if cuda_names.sanitize(n) == n)
    assert not unreserved, unreserved


def test_cuda_kernel_names_never_clash_with_launchers_or_library() -> None:
    text = kernel("expf") + kernel("launch_u_expf", op="neg") + kernel("k") + kernel("launch_k")
    printed = print_cuda(fuseopt.parse(text))
    names = [k.c_name for k in printed]
    launchers = [f"launch_{n}" for n in names]
    assert len(set(names + launchers)) == 2 * len(names), names
    assert "expf" not in names


@pytest.mark.skipif(
    not __import__("fuseopt.backends.cuda.emulation", fromlist=["x"]).emulator_available(),
    reason="g++ is not installed",
)
def test_cuda_kernel_named_like_a_math_function_builds_and_runs(tmp_path: Path) -> None:
    from fuseopt.backends.cuda.backend import CudaBackend
    from fuseopt.backends.cuda.emulation import EmulatedFunction

    text = kernel("expf") + kernel("launch_expf", op="neg")
    fn = CudaBackend().compile(fuseopt.parse(text + host("expf", "launch_expf")), "main", {})
    x = torch.arange(64.0) / 8
    y, z = EmulatedFunction(fn, tmp_path)(x)
    torch.testing.assert_close(y, torch.exp(x))
    assert torch.equal(z, -x)
