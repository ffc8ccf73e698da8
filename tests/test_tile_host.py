"""The one reader of tile host functions (dialects/tile_host.py) and its two users."""

from __future__ import annotations

from pathlib import Path

import pytest

import fuseopt
from fuseopt.backends.cuda.backend import CudaFunction
from fuseopt.backends.cuda.printer import print_cuda
from fuseopt.dialects import tile_host

HOST = (Path(__file__).resolve().parents[1] / "filecheck/backends/host-functions.mlir").read_text()
"""A host function with an allocation, a view, two launches and a stray constant."""

CLEAN = HOST.replace("  %c = arith.constant 0.0 : f32\n", "")


def _main(text: str):  # noqa: ANN202
    module = fuseopt.parse(text, "host.mlir")
    (f,) = [op for op in module.ops if getattr(op, "sym_name", None) and op.name == "func.func"]
    return module, f


def test_read_host_gives_params_and_steps_in_order() -> None:
    _, f = _main(CLEAN)
    host = tile_host.read_host(f, "a test", "read")
    assert [(p.shape, p.output) for p in host.params] == [((64,), False), ((64,), True)]
    kinds = [type(s).__name__ for s in host.steps]
    assert kinds == ["Alloc", "View", "Launch", "Launch"]
    view = host.steps[1]
    assert isinstance(view, tile_host.View) and view.shape == (8, 8)
    assert view.source is host.steps[0].value  # type: ignore[union-attr]


def test_the_cuda_backend_reads_host_functions_through_it() -> None:
    module, _ = _main(CLEAN)
    fn = CudaFunction(module, "main", print_cuda(module))
    assert fn.host_code.info.launches == ["k", "k"]
    module, _ = _main(HOST)
    with pytest.raises(fuseopt.CompileError) as e:
        CudaFunction(module, "main", print_cuda(module))
    message = str(e.value)
    assert "host.mlir:" in message
    assert "the cuda backend cannot print arith.constant in a host function" in message


def test_the_tile_interpreter_reads_host_functions_through_it() -> None:
    """The reference interpreter rejects what the printers reject, located; a clean
    host function runs (exp through a temporary and a view)."""
    import numpy as np

    module, _ = _main(CLEAN)
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    (y,) = fuseopt.interpret(module, "main", x)
    np.testing.assert_allclose(np.asarray(y).reshape(-1), np.exp(np.exp(x)), rtol=1e-6)
    module, _ = _main(HOST)
    with pytest.raises(
        fuseopt.CompileError, match="the tile interpreter cannot run arith.constant"
    ):
        fuseopt.interpret(module, "main", x)


NO_PARAMETERS = """
func.func @positions() -> (tensor<1x16xi64>, tensor<1x16xi1>) {
  %0 = nn.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]> : tensor<16xi64>
  %1 = nn.constant 3 : tensor<16xi64>
  %2 = nn.add %0, %1 : tensor<16xi64>
  %3 = nn.reshape %2 : tensor<16xi64> -> tensor<1x16xi64>
  %4 = nn.constant 9 : tensor<1x16xi64>
  %5 = nn.compare gt, %3, %4 : tensor<1x16xi64>
  func.return %3, %5 : tensor<1x16xi64>, tensor<1x16xi1>
}
"""
"""An nn function without parameters, as Dynamo cuts from a Hugging Face model between
graph breaks: only constants (`arange` positions) and what is computed from them."""


def test_an_nn_function_without_parameters_is_not_tile_ir(tmp_path: Path) -> None:
    """A function with no parameters has vacuously "only memref parameters"; it is still
    nn IR (it returns tensors): every reader lowers or interprets it as nn, and the
    Triton backend compiles it (it used to skip lowering and fail printing nn.constant)."""
    import torch

    from fuseopt.backends.kernel_cache import KernelCache
    from fuseopt.backends.triton.backend import compile_module

    module = fuseopt.parse(NO_PARAMETERS, "positions.mlir")
    (f,) = [op for op in module.ops if op.name == "func.func"]
    assert not tile_host.is_host_function(f) and not tile_host.is_tile_module(module)
    expected = torch.arange(16).view(1, 16) + 3
    positions, above = fuseopt.interpret(module, "positions")
    assert (torch.as_tensor(positions) == expected).all()
    assert (torch.as_tensor(above) == (expected > 9)).all()
    fn = compile_module(module, "positions", {}, KernelCache(str(tmp_path)))
    positions, above = fn()
    assert torch.equal(positions, expected) and torch.equal(above, expected > 9)
    lowered = fuseopt.parse(NO_PARAMETERS, "positions.mlir")
    fuseopt.run_pipeline(lowered, "standard")
    assert tile_host.is_tile_module(lowered)
