"""The reference interpreter: runs fuseopt IR on NumPy arrays.

`interpret(module, func_name, *arrays)` runs a `func.func` of nn ops (nn.fusion
included) and returns its results as a tuple of NumPy arrays. It is the oracle every
pass and backend is checked against. Storage conventions per element type are in
`fuseopt.interpreter.dtypes` (bf16 results come back as bf16-exact float32 arrays).
Errors are `InterpretError`s (`fuseopt.interpreter.errors`), never NumPy's: a max or
min over an axis of size 0 raises `EmptyReductionError`, an `nn.take` position out of
range `IndexOutOfRangeError`, as PyTorch raises.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.interpreter import Interpreter

from fuseopt.dialects import tile_host
from fuseopt.interpreter.dtypes import to_tensor
from fuseopt.interpreter.errors import EmptyReductionError, IndexOutOfRangeError, InterpretError
from fuseopt.interpreter.nn_semantics import NNFunctions


def interpret(
    module: ModuleOp,
    func_name: str,
    *arrays: Any,
    unwritten: tuple[float, int] = (math.nan, 0),
) -> tuple[np.ndarray, ...]:
    """Run `func_name` in `module` on `arrays` and return its results as a tuple.

    Inputs may be NumPy arrays, Python scalars or torch tensors; each is converted to
    the function's argument type (bf16 inputs are rounded to bf16). A host function of
    tile IR (memref arguments, launching kernels) takes the same inputs as the nn
    function it came from: its `{tile.output}` buffers are allocated here and returned.
    Fresh buffers of tile IR hold `unwritten` (float value, integer value): NaN by
    default, so a read of an element no kernel wrote shows; a test that runs a program
    under two values catches an unwritten output even where the expected value is NaN.
    """
    target = next(
        (op for op in module.ops if isinstance(op, func.FuncOp) and op.sym_name.data == func_name),
        None,
    )
    if target is None:
        names = [op.sym_name.data for op in module.ops if isinstance(op, func.FuncOp)]
        raise InterpretError(f"no function @{func_name} in the module (have: {names})")
    arg_types = target.function_type.inputs.data
    if tile_host.is_host_function(target):
        from fuseopt.interpreter.tile_semantics import run_host_function

        try:
            return run_host_function(module, target, arrays, unwritten)
        except ValueError as e:
            raise InterpretError(str(e)) from None
    if len(arrays) != len(arg_types):
        raise InterpretError(
            f"@{func_name} takes {len(arg_types)} arguments, {len(arrays)} were given"
        )
    inputs = []
    for i, (a, t) in enumerate(zip(arrays, arg_types, strict=True)):
        if not isinstance(t, TensorType):
            raise InterpretError(f"argument {i} of @{func_name} has non-tensor type {t}")
        try:
            inputs.append(to_tensor(a, t))
        except ValueError as e:
            raise InterpretError(f"argument {i} of @{func_name}: {e}") from None
    # imported here: xdsl.interpreters loads every upstream dialect (slow at startup)
    from xdsl.interpreters.arith import ArithFunctions
    from xdsl.interpreters.func import FuncFunctions

    interpreter = Interpreter(module)
    interpreter.register_implementations(FuncFunctions())
    interpreter.register_implementations(ArithFunctions())
    interpreter.register_implementations(NNFunctions())
    return tuple(interpreter.call_op(target, tuple(inputs)))


__all__ = ["EmptyReductionError", "IndexOutOfRangeError", "InterpretError", "interpret"]
