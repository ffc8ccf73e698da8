"""CUDA-graph replay of a compiled function (mode="reduce-overhead"), for every backend.

`CudaGraphFunction(fn)` wraps any compiled function that offers `check(inputs)` (the
inputs as the compiled shapes and dtypes, on their device) and `host(interpret)` (a
callable `host(*inputs, device=...)` that allocates the outputs, launches every kernel
on the current stream and returns the outputs, with no per-call checks): the Triton
backend's TritonFunction and the CUDA backend's CudaFunction. Graphs are recorded on
the caller's buffers for input addresses seen before (nothing copied), or on static
buffers the inputs are copied into when addresses change every call; outputs are
returned as aliases of the graph's buffers (see the class for how results are never
overwritten under the caller).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import torch

log = logging.getLogger("fuseopt")


def _storage_uses(t: torch.Tensor) -> int:
    """How many tensors (views included) share `t`'s storage now."""
    return int(torch._C._storage_Use_Count(t.untyped_storage()._cdata))


class GraphInstance:
    """One recorded CUDA graph, the output tensors its replays write and, for a graph
    recorded on static input buffers, those buffers."""

    def __init__(
        self,
        graph: Any,
        outputs: tuple[torch.Tensor, ...],
        inputs: Sequence[torch.Tensor] | None = None,
    ):
        self.graph, self.outputs, self.inputs = graph, outputs, inputs
        self.idle = tuple(_storage_uses(o) for o in outputs)

    def free(self) -> bool:
        """Are the outputs of the last replay no longer referenced outside this object?"""
        return all(_storage_uses(o) <= n for o, n in zip(self.outputs, self.idle, strict=True))

    def replay(self) -> tuple[torch.Tensor, ...]:
        """Replay; the caller gets fresh aliases of the outputs (tracked by use count)."""
        self.graph.replay()
        return tuple(o.view(o.shape) for o in self.outputs)


class CudaGraphFunction:
    """mode="reduce-overhead": replay CUDA graphs of a compiled function `fn`.

    - Input addresses seen before: a graph recorded on those very buffers replays
      (inputs read in place, nothing copied).
    - New input addresses (fresh tensors every call): the inputs are copied into the
      static buffers of one graph recorded on them, which replays.
    - The very first call runs plainly (it compiles the kernels, and autotunes).
    Outputs are returned without a copy, as aliases of the graph's buffers; a graph
    replays only when no alias of its previous outputs is still alive (storage use
    counts), else another instance is recorded (up to `instances` per address set) or
    the plain launches run, so results are never overwritten under the caller. A capture
    that fails falls back to plain launches; CPU inputs run the plain function.
    A function of dynamic size (an input spec with a dim of -1) records its graphs per
    input shapes too: a graph runs the sizes it was recorded with. Shapes met for the
    first time run plainly: a graph is recorded only for shapes seen before, so a decode
    step over a growing cache (new shapes every token) never pays for a recording it
    would not replay.
    """

    MAX_SEEN = 1024
    """Address sets remembered before the memory is cleared."""

    def __init__(self, fn: Any, max_graphs: int = 8, instances: int = 2):
        self.fn, self.max_graphs, self.instances = fn, max_graphs, instances
        self.graphs: OrderedDict[tuple[Any, ...], list[GraphInstance]] = OrderedDict()
        self.seen: set[tuple[Any, ...]] = set()
        self.statics: OrderedDict[tuple[Any, ...], GraphInstance | None] = OrderedDict()
        self.shapes_seen: set[tuple[Any, ...]] = set()
        self.sized = any(d < 0 for shape, _ in getattr(fn, "inputs", ()) for d in shape)
        self.said_cpu = False
        self.broken = False

    def __getattr__(self, name: str) -> Any:
        """Everything else (`kernels`, `check`, `save`, ...) is the wrapped function's."""
        if name.startswith("_") or name == "fn":
            raise AttributeError(name)
        return getattr(self.fn, name)

    def trusting(self, trusted: Sequence[bool]) -> CudaGraphFunction:  # noqa: ARG002
        """This object itself: a replay checks every input (the wrapped function's
        `trusting` would launch plainly, without the graphs)."""
        return self

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Replay a graph for these inputs (see the class docstring)."""
        xs = self.fn.check(inputs)
        if not xs or xs[0].device.type != "cuda":
            if not self.said_cpu:
                self.said_cpu = True
                log.info("reduce-overhead: CUDA graphs need CUDA inputs; running plain launches")
            return self.fn(*xs)
        if torch.cuda.is_current_stream_capturing() or self.broken:
            return self.fn(*xs)
        key: tuple[Any, ...] = (torch.cuda.current_device(), *(x.data_ptr() for x in xs))
        if self.sized:
            key += tuple(tuple(x.shape) for x in xs)
        if key in self.seen:
            return self._in_place(key, xs)
        first = not self.seen
        if len(self.seen) >= self.MAX_SEEN:
            self.seen.clear()
        self.seen.add(key)
        if first:  # compiles the kernels (and autotunes) outside any capture
            return self.fn(*xs)
        return self._static(xs)

    def _in_place(
        self, key: tuple[Any, ...], xs: Sequence[torch.Tensor]
    ) -> tuple[torch.Tensor, ...]:
        pool = self.graphs.get(key)
        if pool is None:
            pool = self.graphs[key] = []
            if len(self.graphs) > self.max_graphs:
                self.graphs.popitem(last=False)
        self.graphs.move_to_end(key)
        for instance in pool:
            if instance.free():
                return instance.replay()
        if len(pool) >= self.instances:
            return self.fn(*xs)
        instance = self._record(xs, static=False)
        if instance is None:
            return self.fn(*xs)
        pool.append(instance)
        return instance.replay()

    def _static(self, xs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        shapes = tuple(tuple(x.shape) for x in xs) if self.sized else ()
        if shapes not in self.statics:
            if self.sized and shapes not in self.shapes_seen:  # recorded at a second sight
                if len(self.shapes_seen) >= self.MAX_SEEN:
                    self.shapes_seen.clear()
                self.shapes_seen.add(shapes)
                return self.fn(*xs)
            self.statics[shapes] = self._record(xs, static=True)
            if len(self.statics) > self.max_graphs:
                self.statics.popitem(last=False)
        static = self.statics[shapes]
        if static is None or not static.free():
            return self.fn(*xs)
        assert static.inputs is not None
        torch._foreach_copy_(list(static.inputs), list(xs))
        return static.replay()

    def _record(self, xs: Sequence[torch.Tensor], static: bool) -> GraphInstance | None:
        """A graph of the host function on `xs` (on copies of them when `static`)."""
        host = self.fn.host(False)
        device = xs[0].device
        inputs = [x.clone() for x in xs] if static else list(xs)
        try:
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                host(*inputs, device=device)  # warm-up on a side stream, as torch asks
            torch.cuda.current_stream(device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                outputs = host(*inputs, device=device)
        except RuntimeError as e:  # an op that cannot be captured (a host copy, say)
            log.warning("reduce-overhead: CUDA graph capture failed, launching plainly: %s", e)
            self.broken = True
            torch.cuda.synchronize(device)
            return None
        return GraphInstance(graph, tuple(outputs), inputs if static else None)


__all__ = ["CudaGraphFunction", "GraphInstance"]
