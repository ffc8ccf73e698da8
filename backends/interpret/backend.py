"""The "interpret" backend: fuseopt's nn-level pipeline, then the reference interpreter.

It makes the frontend testable end to end without a GPU: each region runs
`fuseopt.pipelines.FUSE` (nn-decompose, canonicalize, cse, nn-fuse) and is executed by
`fuseopt.interpret` on the nn IR, fusion groups included. Its kernel records are the
fusion groups (`nn.fusion`, one kernel each on a GPU backend) plus one record per
compute op nn-fuse left outside any group; each record's source is the group as a
standalone nn module (`func.func @<kernel name>` over the group's inputs), which
`fuse-opt` reads and `fuseopt.interpret` runs.

Options: `pipeline` (a name in `fuseopt.pipelines.PIPELINES` or a pass-pipeline spec;
default "fuse"), `precision` ("f32", the default: fusion groups compute in f32 and round
once at their outputs, as the generated kernels do, `nn-widen-intermediates` appended to a
pipeline that ends in nn-fuse; "eager": every op rounds, as eager PyTorch does;
docs/numerics.md), and `mode` (accepted and ignored).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, Operation, Region
from xdsl.passes import PassPipeline

from fuseopt import registry
from fuseopt.backends.contract import KernelRecord, check_options, check_precision
from fuseopt.diagnostics import CompileError, ConfigurationError
from fuseopt.dialects import nn
from fuseopt.dialects.dtypes import torch_dtype
from fuseopt.passes.generalize_sizes import SizedFunction, as_sized
from fuseopt.passes.nn_fuse.cost_model import is_eager_kernel
from fuseopt.pipelines import PIPELINES, PRECISION, run_pipeline

OPTIONS = ("pipeline", "precision")
"""The interpret backend's options (besides `mode`)."""


def find_func(module: ModuleOp, name: str) -> func.FuncOp:
    """The `func.func @name` of `module`, or a CompileError."""
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == name:
            return op
    raise CompileError(f"no function @{name} in the compiled module")


def group_source(op: nn.FusionOp, name: str) -> str:
    """The fusion group `op` as a module of one function `@name`: the group's inputs
    are its arguments, its yielded values its results."""
    body = op.body.clone()
    block = body.block
    terminator = block.last_op
    assert isinstance(terminator, nn.YieldOp)
    results = list(terminator.operands)
    block.insert_op_before(func.ReturnOp(*results), terminator)
    block.erase_op(terminator)
    fn = func.FuncOp(name, ([a.type for a in block.args], [v.type for v in results]), body)
    return str(ModuleOp([fn]))


def _single_op_source(op: Operation, name: str) -> str:
    """A compute op outside any group as a module of one function `@name`."""
    block = Block(arg_types=[v.type for v in op.operands])
    clone = op.clone_without_regions()
    for i, arg in enumerate(block.args):
        clone.operands[i] = arg
    block.add_ops([clone, func.ReturnOp(*clone.results)])
    fn = func.FuncOp(
        name, ([a.type for a in block.args], [r.type for r in clone.results]), Region(block)
    )
    return str(ModuleOp([fn]))


def kernel_records(fn: func.FuncOp) -> list[KernelRecord]:
    """One record per nn.fusion group of `fn`, and one per compute op outside groups
    (what a GPU backend would launch as a kernel of its own)."""
    records = []
    unfused = 0
    for op in fn.body.block.ops:
        if isinstance(op, nn.FusionOp):
            body = [o for o in op.body.block.ops if not isinstance(o, nn.YieldOp | nn.ConstantOp)]
            route = op.route_kind.value
            name = op.kernel_name.data if op.kernel_name is not None else f"fusion_{len(records)}"
            records.append(
                KernelRecord(
                    name,
                    tuple(o.name for o in body),
                    op.kind.data if op.kind is not None else "fusion",
                    group_source(op, name),
                    ".mlir",
                    f"route {route}, reference interpreter",
                )
            )
        elif op.dialect_name() == "nn" and is_eager_kernel(op):
            name = f"unfused_{unfused}_{op.name.split('.', 1)[-1]}"
            records.append(
                KernelRecord(
                    name,
                    (op.name,),
                    "unfused",
                    _single_op_source(op, name),
                    ".mlir",
                    "reference interpreter",
                )
            )
            unfused += 1
    return records


class InterpretedFunction:
    """An nn function run by the reference interpreter on torch tensors.

    `fused_module` is the IR it runs when its pipeline ended with nn-fuse (it is then
    what `fusion_report()` tabulates).
    """

    def __init__(self, module: ModuleOp, func_name: str, fused: bool):
        self.module = module
        self.func_name = func_name
        self.fused_module = module if fused else None
        fn = find_func(module, func_name)
        self.kernels = kernel_records(fn)
        types = [t for t in fn.function_type.outputs.data if isinstance(t, TensorType)]
        self.dtypes = [torch_dtype(t.element_type) for t in types]
        # a dynamic dim (`?`) is whatever size the interpreter's result has
        self.shapes = [tuple(-1 if n < 0 else n for n in t.get_shape()) for t in types]

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Interpret the function; results come back as tensors on the inputs' device."""
        from fuseopt.interpreter import interpret

        device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), None)
        outputs = interpret(self.module, self.func_name, *inputs)
        # reshape: the interpreter's bf16 rounding returns 0-d results as 1-d arrays
        return tuple(
            torch.from_numpy(np.array(o, copy=True).reshape(shape)).to(dtype=dtype, device=device)
            for o, dtype, shape in zip(outputs, self.dtypes, self.shapes, strict=True)
        )


def pipeline_spec(options: Mapping[str, Any]) -> str:
    """The pass pipeline the options ask for, checked (a ConfigurationError if not)."""
    spec = options.get("pipeline", "fuse")
    if not isinstance(spec, str):
        raise ConfigurationError(f"option 'pipeline' must be a string, got {spec!r}")
    spec = PIPELINES.get(spec, spec)
    try:
        PassPipeline.parse_spec(registry.all_passes(), spec)
    except Exception as e:  # xDSL raises several types for a bad spec
        raise ConfigurationError(
            f"option 'pipeline': bad pass pipeline {spec!r} ({e}); "
            f"named pipelines: {', '.join(PIPELINES)}"
        ) from None
    return spec


class InterpretBackend:
    """The debugging backend (see the module docstring)."""

    def compile(
        self, module: ModuleOp | SizedFunction, func_name: str, options: Mapping[str, Any]
    ) -> InterpretedFunction:
        """Run the pipeline (default `fuseopt.pipelines.FUSE`) on `module`, then wrap
        the interpreter."""
        check_options("interpret", options, OPTIONS)
        from fuseopt.backends.per_size import PerSizeFunction, parse_specialized

        sized = as_sized(module, func_name, parse_specialized)
        if sized is not None:  # the interpreter runs one size at a time
            return PerSizeFunction(  # type: ignore[return-value]
                sized, lambda m: self.compile(m, func_name, options), "interpret"
            )
        assert isinstance(module, ModuleOp)
        spec = pipeline_spec(options)
        passes = [p.strip().split("{")[0] for p in spec.split(",")]
        if check_precision(options.get("precision", "f32")) == "f32" and passes[-1] == "nn-fuse":
            spec += "," + PRECISION
        run_pipeline(module, spec)
        fused = "nn-fuse" in passes
        return InterpretedFunction(module, func_name, fused)
