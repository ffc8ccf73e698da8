"""fuseopt: an MLIR-style kernel-fusion compiler on xDSL.

PyTorch programs (or `.mlir` text in the `nn` dialect) are fused, tiled and printed as
Triton or CUDA C++ kernels. See README.md and docs/ (docs/api.md for this API).

Public API:
- `parse(text, name)`: parse and verify MLIR text into a module;
- `interpret(module, func_name, *arrays)`: run nn IR on NumPy arrays (the reference);
- `run_pipeline(module, spec)`: run a named or spelled-out pass pipeline;
- `export(model, example_inputs)`: a PyTorch model's forward as nn MLIR text;
- `load_mlir(source, func_name=None, backend="triton")`: nn IR compiled, called with
  tensors;
- `compile(model, example_inputs=None, backend="triton", mode=None)`: a PyTorch model
  compiled with fuseopt (see `fuseopt.api`; `torch.compile(backend="fuseopt")` too).
"""

from xdsl.dialects.builtin import ModuleOp

from fuseopt.diagnostics import CompileError, ConfigurationError, parse_module
from fuseopt.interpreter import interpret
from fuseopt.pipelines import run_pipeline
from fuseopt.registry import make_context

__version__ = "0.1.0"
"""fuseopt's version: the one place it is written (pyproject.toml reads it)."""


def parse(text: str, name: str = "<input>") -> ModuleOp:
    """Parse and verify MLIR text (any dialect fuse-opt knows) into a module.

    Raises `CompileError` (with `file:line:col`) on a parse or verifier error.
    """
    return parse_module(make_context(), text, name)


def __getattr__(name: str) -> object:
    # `compile` and `export` load the PyTorch frontend on first use: importing torch is
    # slow, and fuse-opt on .mlir text never needs it.
    if name in ("compile", "export"):
        from fuseopt import api

        return getattr(api, name)
    if name == "load_mlir":
        from fuseopt.load import load_mlir

        return load_mlir
    raise AttributeError(f"module 'fuseopt' has no attribute {name!r}")


__all__ = [
    "CompileError",
    "ConfigurationError",
    "__version__",
    "compile",
    "export",
    "load_mlir",
    "interpret",
    "parse",
    "run_pipeline",
]
