"""`fuseopt.load_mlir`: a function of nn IR (text or a `.mlir` file) compiled by a
backend and called with tensors, so that what `fuseopt.export` or `fuse-opt` wrote runs
again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xdsl.dialects import func

from fuseopt.backends.contract import CompiledFunction, check_mode, resolve_backend
from fuseopt.diagnostics import CompileError, parse_module
from fuseopt.registry import make_context


def load_mlir(
    source: str | Path,
    func_name: str | None = None,
    backend: str = "triton",
    mode: str | None = None,
    **options: Any,
) -> CompiledFunction:
    """Compile function `func_name` (the only one when None) of the nn IR in `source` (a
    path to a `.mlir` file, or the text itself) with `backend`; call the result with
    tensors, one per function argument (parameters first, as `fuseopt.export` orders
    them), to get the results as a tuple. `nn.torch_call` ops run in PyTorch.

        text = fuseopt.export(model, (x,))
        forward = fuseopt.load_mlir(text, backend="triton")
        (y,) = forward(*model.parameters(), x)
    """
    path = Path(source) if isinstance(source, Path) or str(source).endswith(".mlir") else None
    if path is not None:
        try:
            text, name = path.read_text(), str(path)
        except OSError as e:
            raise CompileError(f"cannot read {path}: {e.strerror}") from None
    else:
        text, name = str(source), "<text>"
    module = parse_module(make_context(), text, name)
    names = [op.sym_name.data for op in module.ops if isinstance(op, func.FuncOp)]
    if func_name is None:
        if len(names) != 1:
            raise CompileError(f"{name} has functions {names}: name the one to load")
        func_name = names[0]
    elif func_name not in names:
        raise CompileError(f"no function @{func_name} in {name} (it has {names})")
    check_mode(mode)
    settings = dict(options)
    if mode is not None:
        settings["mode"] = mode
    return resolve_backend(backend).compile(module, func_name, settings)
