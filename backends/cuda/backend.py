"""The "cuda" backend of `fuseopt.compile`: nn IR -> tile IR -> CUDA C++ -> cubins.

`CudaBackend.compile` runs the standard pipeline to tile IR (pass objects with the CUDA
target's tile options, `backends/targets.py`), prints every kernel
(`printer.print_cuda`) and plans the host function (`HostPlan`): buffer allocations,
views, kernel launches and library GEMMs (`torch.matmul`, i.e. cuBLAS, into the
out-param). Cubins are built on first use on a GPU (the device's architecture is
known only then) and cached on disk; without a GPU, calling the result raises
`CudaUnavailableError` while `kernels` and `save()` still give the source.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from fuseopt.backends.contract import KernelRecord, partly_checked
from fuseopt.backends.cuda.printer import CudaKernel, print_cuda
from fuseopt.backends.cuda.runtime import (
    LoadedKernel,
    ParamSlot,
    check_gpu,
    check_result,
    compile_cubin,
    cu_launch_kernel,
    current_stream,
    device_arch,
)
from fuseopt.backends.cuda_graphs import CudaGraphFunction
from fuseopt.backends.host_memory import (
    contiguous_strides,
    plan_workspace,
    pointer_aliases,
    reinterpret,
)
from fuseopt.backends.library_gemm import (
    gemm_columns,
    gemm_depth,
    mm_padded,
    padded_output,
    padded_outputs,
)
from fuseopt.backends.targets import CUDA
from fuseopt.diagnostics import CompileError, error_at
from fuseopt.dialects import tile_host, torch_call
from fuseopt.dialects.dtypes import element_bytes, torch_dtype
from fuseopt.dialects.tile_host import read_host
from fuseopt.passes.generalize_sizes import SizedFunction, as_sized

if TYPE_CHECKING:
    from fuseopt.backends.cuda.autotune import CudaAutotunedFunction


def tile_pipeline(precision: str = "f32") -> str:
    """The CUDA target's pipeline from imported nn IR to promoted tile IR as `-p` text
    (`fuse-opt -p "$(...)"`, tests), derived from the pass objects the backend runs
    (`backends/targets.py` CUDA)."""
    from fuseopt.pipelines import pipeline_passes, pipeline_spec

    return pipeline_spec(pipeline_passes("standard", CUDA.lowering({"precision": precision})))


@dataclass(frozen=True)
class Launch:
    """A host step: launch kernel `kernel` over `grid` with the buffers in slots `args`."""

    kernel: CudaKernel
    grid: tuple[int, ...]
    args: list[int]


Step = Callable[[list[torch.Tensor | None], torch.device], None] | Launch


class HostPlan:
    """The host function (`dialects/tile_host.py`'s reading of it) as a list of steps
    over a slot per SSA value."""

    def __init__(self, f: func.FuncOp, kernels: dict[str, CudaKernel]):
        host = read_host(f, "the cuda backend", "run")
        if host.dynamic:
            raise error_at(
                f,
                "the cuda backend runs buffers of static size only; this function has "
                "dynamic sizes (?): use the triton backend",
            )
        self.slots: dict[object, int] = {}
        self.inputs: list[tuple[int, tuple[int, ...], torch.dtype]] = []
        self.outputs: list[tuple[int, tuple[int, ...], torch.dtype]] = []
        for p in host.params:
            spec = (self._slot(p.value), p.shape, torch_dtype(p.element))
            (self.outputs if p.output else self.inputs).append(spec)
        self.pitches = {self._slot(v): n for v, n in padded_outputs(host).items()}
        """Output slots a padded GEMM writes whole: their row pitch (`padded_output`)."""
        self.steps: list[Step] = []
        self.launches: list[str] = []
        self.workspace = plan_workspace(host)
        self.aliases = pointer_aliases(host)
        self._typed: dict[torch.dtype, int] = {}  # the workspace viewed per dtype: slots
        if self.workspace.offsets:
            s, nbytes = self._slot("workspace"), self.workspace.nbytes

            def workspace(b: list, dev: torch.device, s=s, nbytes=nbytes) -> None:
                b[s] = torch.empty(nbytes, dtype=torch.uint8, device=dev)

            self.steps.append(workspace)
        for step in host.steps:
            self._plan(step, kernels)

    def _slot(self, v: object) -> int:
        return self.slots.setdefault(v, len(self.slots))

    def _plan(self, step: tile_host.Step, kernels: dict[str, CudaKernel]) -> None:
        if isinstance(step, tile_host.Alloc):
            s, shape, dt = self._slot(step.value), step.shape, torch_dtype(step.element)
            if dt not in self._typed:
                typed, whole = self._slot(("workspace", dt)), self.slots["workspace"]

                def view_as(b: list, dev: torch.device, t=typed, w=whole, dt=dt) -> None:
                    b[t] = b[w].view(dt)

                self._typed[dt] = typed
                self.steps.append(view_as)
            typed, strides = self._typed[dt], contiguous_strides(shape)
            offset = self.workspace.offsets[step.value] // element_bytes(step.element)

            def alloc(
                b: list, dev: torch.device, s=s, t=typed, shape=shape, st=strides, o=offset
            ) -> None:
                b[s] = reinterpret(b[t], shape, st, o)

            self.steps.append(alloc)
        elif isinstance(step, tile_host.View) and step.value in self.aliases:
            self.slots[step.value] = self._slot(step.source)  # kernels read the pointer
        elif isinstance(step, tile_host.View):
            s, src, shape = self._slot(step.value), self._slot(step.source), step.shape
            if step.offset is not None:  # a run of the source's elements
                strides, offset = contiguous_strides(shape), step.offset

                def view(
                    b: list, dev: torch.device, s=s, src=src, shape=shape, st=strides, o=offset
                ) -> None:
                    b[s] = reinterpret(b[src], shape, st, o)

            else:

                def view(b: list, dev: torch.device, s=s, src=src, shape=shape) -> None:
                    b[s] = b[src].view(shape)

            self.steps.append(view)
        elif isinstance(step, tile_host.Launch):
            k = kernels[step.kernel]
            grid = k.grid or step.grid
            args = [self._slot(a) for a in step.args]
            self.launches.append(k.c_name)

            self.steps.append(Launch(k, tuple(grid), args))
        elif isinstance(step, tile_host.TorchCall):
            self.launches.append(step.target)
            self.steps.append(self._torch_call(step))
        else:
            a, bb, c = self._slot(step.lhs), self._slot(step.rhs), self._slot(step.out)
            ta, tb = step.transpose_a, step.transpose_b
            self.launches.append("library_gemm")
            if step.bias is not None:
                self.steps.append(self._bias_gemm(step, a, bb, c))
                return
            # torch.mm / torch.bmm when the ranks allow: torch.matmul's broadcasting
            # dispatch costs several microseconds of host time per call
            shapes = [tuple(v.type.get_shape()) for v in (step.lhs, step.rhs, step.out)]  # type: ignore[attr-defined]
            product = torch.matmul
            if all(len(sh) == 2 for sh in shapes) and not ta:
                columns, depth = gemm_columns(step.op), gemm_depth(step.op)
                if (columns, depth) != (shapes[2][1], shapes[0][1]):  # N, K padded
                    self.steps.append(self._padded_gemm(a, bb, c, tb, columns, depth))
                    return
            if all(len(sh) == 2 for sh in shapes):
                product = torch.mm
            elif all(len(sh) == 3 for sh in shapes) and len({sh[0] for sh in shapes}) == 1:
                product = torch.bmm

            def gemm(
                b: list, dev: torch.device, a=a, bb=bb, c=c, ta=ta, tb=tb, product=product
            ) -> None:
                x, y = b[a], b[bb]
                product(x.mT if ta else x, y.mT if tb else y, out=b[c])

            self.steps.append(gemm)

    def _bias_gemm(self, step: tile_host.Gemm, a: int, b: int, c: int) -> Step:
        """`out = lhs @ rhs + bias` (rhs rank 2, no transpose_a: the verifier's rule) as
        `torch.addmm` over the rows of lhs (cuBLAS's bias epilogue), padded when N is
        not whole 16-byte vectors."""
        assert step.bias is not None
        bias, tb = self._slot(step.bias), step.transpose_b
        sa, sc = (tuple(v.type.get_shape()) for v in (step.lhs, step.out))  # type: ignore[attr-defined]
        rows = math.prod(sa[:-1])
        columns, depth = gemm_columns(step.op), gemm_depth(step.op)

        def gemm(buffers: list, dev: torch.device) -> None:
            y = buffers[b].mT if tb else buffers[b]
            x, out = buffers[a].view(rows, sa[-1]), buffers[c].view(rows, sc[-1])
            if (columns, depth) != (sc[-1], sa[-1]):
                mm_padded(x, y, out, columns, buffers[bias], depth)
            else:
                torch.addmm(buffers[bias], x, y, out=out)

        return gemm

    @staticmethod
    def _padded_gemm(a: int, b: int, c: int, tb: bool, columns: int, depth: int) -> Step:
        """The 2-d library GEMM of slots a, b into c, run at N = `columns`, K = `depth`."""

        def gemm(buffers: list, dev: torch.device) -> None:
            y = buffers[b]
            mm_padded(buffers[a], y.mT if tb else y, buffers[c], columns, None, depth)

        return gemm

    def _torch_call(self, step: tile_host.TorchCall) -> Step:
        """The PyTorch op on its input slots, each result copied into its output slot."""
        ins = [self._slot(v) for v in step.ins]
        outs = [(self._slot(v), tuple(v.type.get_shape())) for v in step.outs]  # type: ignore[attr-defined]

        def call(b: list, dev: torch.device) -> None:
            results = torch_call.invoke(step.target, step.call, [b[i] for i in ins], dev)
            for (slot, shape), r in zip(outs, results, strict=True):
                b[slot].copy_(r.reshape(shape))

        return call


def _output(
    shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, pitch: int | None
) -> torch.Tensor:
    """An output buffer: contiguous, or with rows `pitch` apart (`padded_output`)."""
    if pitch is None:
        return torch.empty(shape, dtype=dtype, device=device)

    def empty(size: tuple[int, ...], stride: tuple[int, ...], dt: torch.dtype) -> torch.Tensor:
        return torch.empty_strided(size, stride, dtype=dt, device=device)

    return padded_output(empty, shape, pitch, dtype)


def _record(cls: type, k: CudaKernel, grid: tuple[int, ...] | None) -> Any:
    """A `fuseopt.backends.contract.KernelRecord` for `k` (with its file suffix and launch when the
    record has those fields)."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    extra: dict[str, Any] = {}
    if "suffix" in names:
        extra["suffix"] = ".cu"
    if "launch" in names:
        g = ", ".join(map(str, grid or k.grid or (1,)))
        extra["launch"] = f"grid ({g}), block ({k.threads}), shared memory {k.smem_bytes} B"
    return cls(k.c_name, k.ops, k.schedule, k.source, **extra)


class CudaFunction:
    """A compiled function: call it with CUDA tensors (see the module docstring)."""

    def __init__(self, module: ModuleOp, func_name: str, kernels: list[CudaKernel]):
        self.module = module
        self.func_name = func_name
        self.cuda_kernels = kernels
        by_ir = {k.ir_name: k for k in kernels}
        f = next(
            (o for o in module.ops if isinstance(o, func.FuncOp) and o.sym_name.data == func_name),
            None,
        )
        if f is None:
            raise CompileError(f"no function @{func_name} in the compiled module")
        self.plan = HostPlan(f, by_ir)
        by_launch = {s.kernel.c_name: s.grid for s in self.plan.steps if isinstance(s, Launch)}
        by_name = {k.c_name: k for k in kernels}
        self.kernels = []
        """One record per launch of the host function, library GEMMs and calls of
        PyTorch ops included (as the Triton backend's)."""
        for name in self.plan.launches:
            if name in by_name:
                self.kernels.append(_record(KernelRecord, by_name[name], by_launch.get(name)))
            elif name == "library_gemm":
                self.kernels.append(KernelRecord(name, ("nn.matmul",), name, None, ".cu", "cuBLAS"))
            else:
                self.kernels.append(
                    KernelRecord(name, ("nn.torch_call",), "torch_call", None, ".cu", "PyTorch")
                )
        self._signature = [(shape, dt) for _, shape, dt in self.plan.inputs]
        self._checked = self._partly_checked([False] * len(self._signature))
        self._loaded: dict[tuple[int, str], LoadedKernel] = {}
        # per (device index, host thread): `_bind`
        self._bound: dict[tuple[int, int], list[tuple | None]] = {}

    def save(self, directory: str | Path) -> list[Path]:
        """Write every kernel's `.cu` file into `directory`; return the paths."""
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        paths = []
        for k in self.cuda_kernels:
            path = root / k.file_name
            path.write_text(k.source)
            paths.append(path)
        return paths

    def compile_all(self, device: torch.device | None = None) -> None:
        """Build (in parallel: one compiler process per kernel) and load every kernel for
        `device` (the current CUDA device)."""
        check_gpu()
        dev = torch.device("cuda", torch.cuda.current_device()) if device is None else device
        arch = device_arch(dev)
        todo = [k for k in self.cuda_kernels if ((dev.index or 0), k.c_name) not in self._loaded]
        workers = max(1, min(len(todo), os.cpu_count() or 1, 16))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            cubins = list(pool.map(lambda k: compile_cubin(k.source, k.c_name, arch), todo))
        with torch.cuda.device(dev):
            for k, cubin in zip(todo, cubins, strict=True):
                self._loaded[((dev.index or 0), k.c_name)] = LoadedKernel(
                    cubin, k.c_name, k.smem_bytes
                )

    def _kernel(self, k: CudaKernel, dev: torch.device) -> LoadedKernel:
        key = (dev.index or 0, k.c_name)
        got = self._loaded.get(key)
        if got is None:
            with torch.cuda.device(dev):
                cubin = compile_cubin(k.source, k.c_name, device_arch(dev))
                got = LoadedKernel(cubin, k.c_name, k.smem_bytes)
            self._loaded[key] = got
        return got

    def check(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The inputs as contiguous CUDA tensors of the compiled shapes and dtypes."""
        check_gpu()
        if len(inputs) != len(self.plan.inputs):
            raise CompileError(
                f"@{self.func_name} takes {len(self.plan.inputs)} inputs, got {len(inputs)}"
            )
        out = []
        for i, (x, (_, shape, dt)) in enumerate(zip(inputs, self.plan.inputs, strict=True)):
            if not isinstance(x, torch.Tensor) or x.device.type != "cuda":
                raise CompileError(f"input {i} must be a CUDA tensor for the cuda backend")
            if x.numel() != math.prod(shape) or x.dtype != dt:
                raise CompileError(
                    f"input {i} must be {dt} of shape {shape}, "
                    f"got {x.dtype} of shape {tuple(x.shape)}"
                )
            out.append(x.reshape(shape).contiguous())
        return out

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Run on CUDA tensors; returns the outputs (on the inputs' device).

        The hot path does no more than: take inputs that already have the compiled
        shape, dtype and layout as they are, allocate outputs, and for each launch store
        the buffer pointers in its reusable parameter slot and call cuLaunchKernel.
        """
        return self._checked(*inputs)

    def trusting(self, trusted: Sequence[bool]) -> Callable[..., tuple[torch.Tensor, ...]]:
        """This function checking only the inputs not `trusted` (`partly_checked`)."""
        return self._partly_checked(trusted)

    def _partly_checked(self, trusted: Sequence[bool]) -> Callable[..., tuple[torch.Tensor, ...]]:
        # not `trusting`, which a subclass may override (the emulation returns itself)
        return partly_checked(
            self._signature, trusted, self.check, self._run_inputs, cuda_only=True
        )

    def _run_inputs(self, inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """Run on inputs `check` accepted: allocate the outputs, launch every step."""
        plan = self.plan
        bufs: list[torch.Tensor | None] = [None] * len(plan.slots)
        for (s, _, _), x in zip(plan.inputs, inputs, strict=True):
            bufs[s] = x
        dev = bufs[plan.inputs[0][0]].device if plan.inputs else None  # type: ignore[union-attr]
        if dev is None:
            check_gpu()
            dev = torch.device("cuda", torch.cuda.current_device())
        elif dev.type != "cuda":  # a trusted input on another device: `check` says why
            return self._run_inputs(self.check(inputs))
        for s, shape, dt in plan.outputs:
            bufs[s] = _output(shape, dt, dev, plan.pitches.get(s))
        index = dev.index or 0
        if index != torch.cuda.current_device():
            with torch.cuda.device(dev):
                self._run(bufs, dev, index)
        else:
            self._run(bufs, dev, index)
        return tuple(bufs[s] for s, _, _ in plan.outputs)  # type: ignore[misc]

    def host(self, interpret: bool = False) -> Callable[..., tuple[torch.Tensor, ...]]:
        """The host function without input checks (what `cuda_graphs.CudaGraphFunction`
        records): `host(*inputs, device=...)` takes inputs `check` returned, allocates
        the outputs, launches every step on the current stream and returns the outputs.
        `interpret` must be False (CUDA kernels run on a GPU only)."""
        if interpret:
            raise CompileError("the cuda backend has no interpreter; run on a CUDA device")
        plan = self.plan

        def run(*inputs: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, ...]:
            bufs: list[torch.Tensor | None] = [None] * len(plan.slots)
            for (s, _, _), x in zip(plan.inputs, inputs, strict=True):
                bufs[s] = x
            for s, shape, dt in plan.outputs:
                bufs[s] = _output(shape, dt, device, plan.pitches.get(s))
            self._run(bufs, device, device.index or 0)
            return tuple(bufs[s] for s, _, _ in plan.outputs)  # type: ignore[misc]

        return run

    def _run(self, bufs: list[torch.Tensor | None], dev: torch.device, index: int) -> None:
        stream = current_stream(dev)
        # per device and host thread: ctypes releases the GIL during cuLaunchKernel, so
        # two threads must not fill one parameter slot
        key = (index, threading.get_ident())
        bound = self._bound.get(key)
        if bound is None:
            bound = self._bound[key] = self._bind(dev)
        launch_kernel = cu_launch_kernel()
        for step, launch in zip(self.plan.steps, bound, strict=True):
            if launch is None:
                step(bufs, dev)  # type: ignore[operator]
                continue
            function, g0, g1, g2, threads, smem, slot, args = launch
            slot.values[: len(args)] = [bufs[a].data_ptr() for a in args]  # type: ignore[union-attr]
            result = launch_kernel(
                function, g0, g1, g2, threads, 1, 1, smem, stream, slot.kernel_params, None
            )
            if result:
                check_result(result, "cuLaunchKernel")

    def _bind(self, dev: torch.device) -> list[tuple | None]:
        """Per step of the plan, what its launch on `dev` needs (None for a host step):
        the loaded function, grid, threads, shared bytes, a reusable parameter slot and
        the argument slots, resolved once so that a launch does no lookups."""
        bound: list[tuple | None] = []
        for step in self.plan.steps:
            if not isinstance(step, Launch):
                bound.append(None)
                continue
            loaded = self._kernel(step.kernel, dev)
            g0, g1, g2 = (*step.grid, 1, 1)[:3]
            slot = ParamSlot(len(step.args))
            bound.append(
                (
                    loaded.function,
                    g0,
                    g1,
                    g2,
                    step.kernel.threads,
                    loaded.smem_bytes,
                    slot,
                    tuple(step.args),
                )
            )
        return bound


class CudaBackend:
    """`backend="cuda"`: CUDA C++ kernels compiled with NVRTC or nvcc."""

    def compile(
        self, module: ModuleOp | SizedFunction, func_name: str, options: Mapping[str, Any]
    ) -> CudaFunction | CudaGraphFunction | CudaAutotunedFunction:
        """Lower `func_name` of `module` to tile IR and print its kernels.

        Options: `precision` ("f32" or "eager": docs/numerics.md) and forced tile sizes
        by convert-nn-to-tile option name (`block-rows`, `block-m`, ...; powers of two).
        Unknown options are rejected. Modes, as on the Triton backend: "default";
        "reduce-overhead" replays CUDA graphs of the host function
        (`backends/cuda_graphs.py`) when it launches more than one kernel;
        "max-autotune-no-cudagraphs" tunes tile sizes and warps per kernel at the first
        call on a device (`backends/cuda/autotune.py`); "max-autotune" tunes and
        replays graphs."""
        from fuseopt.backends.contract import check_mode, check_options
        from fuseopt.backends.cuda.autotune import CudaAutotunedFunction
        from fuseopt.pipelines import pipeline_passes, run_passes

        mode = options.get("mode")
        check_mode(mode)
        check_options("cuda", options, CUDA.option_names())
        from fuseopt.backends.per_size import PerSizeFunction, parse_specialized

        sized = as_sized(module, func_name, parse_specialized)
        if sized is not None:  # its kernels are static: one compile per size
            return PerSizeFunction(  # type: ignore[return-value]
                sized, lambda m: self.compile(m, func_name, options), "cuda"
            )
        assert isinstance(module, ModuleOp)
        lowering = CUDA.lowering(options)
        text = str(module)
        run_passes(module, pipeline_passes("standard", lowering))
        fn: CudaFunction | CudaAutotunedFunction
        fn = CudaFunction(module, func_name, print_cuda(module))
        if torch.cuda.is_available():
            fn.compile_all()
        launches = sum(isinstance(s, Launch) for s in fn.plan.steps)
        if mode in ("max-autotune", "max-autotune-no-cudagraphs"):
            fn = CudaAutotunedFunction(fn, text, func_name, lowering)
        if mode in ("reduce-overhead", "max-autotune") and launches > 1:
            # one launch: replaying a graph costs more host time than the direct launch
            return CudaGraphFunction(fn)
        return fn
