"""Every printed kernel against the tile interpreter, one kernel at a time.

`single_kernel_modules` cuts a tiled module into one module per launch: the kernel and a
host function that launches it on fresh buffers (inputs random, outputs marked
`{tile.output}`). The tile interpreter (the reference semantics of tile IR) and the
printed Triton source (in Triton's interpreter) must agree on each, which pins a wrong
result to the one kernel that computes it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch
from test_triton_helpers import workload
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, UnitAttr
from xdsl.ir import Block, Region

import fuseopt
from fuseopt.backends.kernel_cache import KernelCache
from fuseopt.backends.triton.backend import compile_module
from fuseopt.dialects import tile
from fuseopt.dialects.dtypes import torch_dtype
from fuseopt.pipelines import STANDARD, run_pipeline


def single_kernel_modules(tiled: ModuleOp) -> Iterator[tuple[str, ModuleOp]]:
    """(kernel name, module with that kernel and a host `@main` launching it)."""
    kernels = {op.sym_name.data: op for op in tiled.ops if isinstance(op, tile.KernelOp)}
    for launch in [op for op in tiled.walk() if isinstance(op, tile.LaunchOp)]:
        kernel = kernels[launch.kernel.root_reference.data]
        stored = {o.buffer for o in kernel.walk() if isinstance(o, tile.StoreOp)}
        outputs = [a in stored for a in kernel.body.block.args]
        types = [a.type for a in launch.args]
        order = [i for i, o in enumerate(outputs) if not o] + [
            i for i, o in enumerate(outputs) if o
        ]
        block = Block(arg_types=[types[i] for i in order])
        args = [block.args[order.index(i)] for i in range(len(types))]
        block.add_op(tile.LaunchOp(kernel.sym_name.data, launch.grid_sizes, args))
        block.add_op(func.ReturnOp())
        host = func.FuncOp("main", ([types[i] for i in order], []), Region(block))
        host.arg_attrs = ArrayAttr(
            [DictionaryAttr({tile.OUTPUT_ATTR: UnitAttr()} if outputs[i] else {}) for i in order]
        )
        yield kernel.sym_name.data, ModuleOp([kernel.clone(), host])


def random_input(t: object, gen: torch.Generator) -> torch.Tensor:
    """A random tensor for a memref/tensor type: normal floats, small non-negative ints."""
    dtype = torch_dtype(t.element_type)  # type: ignore[attr-defined]
    shape = tuple(t.get_shape())  # type: ignore[attr-defined]
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    return torch.randint(0, 8, shape, generator=gen).to(dtype)


def check_each_kernel(tiled: ModuleOp, tmp_path: object, seed: int = 0) -> None:
    """Assert every kernel of `tiled` prints to Triton that matches the tile interpreter."""
    gen = torch.Generator().manual_seed(seed)
    for name, module in single_kernel_modules(tiled):
        (host,) = [o for o in module.ops if isinstance(o, func.FuncOp)]
        is_out = tile.output_params(host)
        ins = [
            random_input(t, gen)
            for t, o in zip(host.function_type.inputs.data, is_out, strict=True)
            if not o
        ]
        want = fuseopt.interpret(module, "main", *ins)
        fn = compile_module(module, "main", {}, KernelCache(str(tmp_path)))
        got = fn(*ins)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            w = np.asarray(w, dtype=np.float64).reshape(tuple(g.shape))
            np.testing.assert_allclose(
                g.double().numpy(), w, rtol=1e-2, atol=1e-2, err_msg=f"kernel {name}, output {i}"
            )


TINY = {
    "rmsnorm_silu_gate": {"batch": 1, "seq": 3, "hidden": 48},
    "softmax": {"rows": 5, "cols": 40},
    "layernorm": {"rows": 5, "hidden": 40},
    "rmsnorm_rope": {"batch": 1, "seq": 3, "heads": 2, "head_dim": 16},
    "gated_mlp": {"m": 16, "d": 32, "di": 64},
}
"""The workloads with the most kernels (llama_block's pieces are rmsnorm_rope and
gated_mlp; its attention has no nn lowering, so it cannot be exported whole)."""


@pytest.mark.parametrize("name", list(TINY))
def test_each_kernel_matches_the_tile_interpreter(name: str, tmp_path: object) -> None:
    w = workload(name)
    dims = TINY[name]
    model = w.make_model(dims, torch.bfloat16, torch.device("cpu"), 0)
    inputs = w.make_inputs(dims, torch.bfloat16, torch.device("cpu"), 1)
    with torch.no_grad():
        text = fuseopt.export(model, inputs)
    check_each_kernel(run_pipeline(fuseopt.parse(text), STANDARD), tmp_path)
