"""CUDA-graph replay of a compiled function (mode="reduce-overhead"), for every backend.

`CudaGraphFunction(fn)` wraps any compiled function that offers `check(inputs)` (the
inputs as the compiled shapes and dtypes, on their device) and `host(interpret)` (a
callable `host(*inputs, device=...)` that allocates the outputs, launches every kernel
on the current stream and returns the outputs, with no per-call checks): the Triton
backend's TritonFunction and the CUDA backend's CudaFunction. A graph reads the inputs
whose address held from one call to the next (weights, a static cache) in place and
copies the others (activations, made fresh every call) into buffers of its own; outputs
are returned as aliases of the graph's buffers (see the class for how results are never
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
    """One recorded CUDA graph: the output tensors its replays write, the inputs it
    reads in place (`pinned`: their positions and addresses) and the buffers it reads
    the others from (`copied`: their positions; `buffers`: one per position)."""

    def __init__(
        self,
        graph: Any,
        outputs: tuple[torch.Tensor, ...],
        pinned: tuple[tuple[int, int], ...],
        copied: tuple[int, ...],
        buffers: list[torch.Tensor],
    ):
        self.graph, self.outputs = graph, outputs
        self.pinned, self.copied, self.buffers = pinned, copied, buffers
        self.idle = tuple(_storage_uses(o) for o in outputs)

    def matches(self, pointers: tuple[int, ...]) -> bool:
        """Are the inputs it reads in place at the addresses it was recorded on?"""
        return all(pointers[i] == p for i, p in self.pinned)

    def free(self) -> bool:
        """Are the outputs of the last replay no longer referenced outside this object?"""
        return all(_storage_uses(o) <= n for o, n in zip(self.outputs, self.idle, strict=True))

    def replay(self, xs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """Copy the inputs it does not pin, replay; the caller gets fresh aliases of
        the outputs (tracked by use count)."""
        if self.copied:
            torch._foreach_copy_(self.buffers, [xs[i] for i in self.copied])
        self.graph.replay()
        return tuple(o.view(o.shape) for o in self.outputs)


class CudaGraphFunction:
    """mode="reduce-overhead": replay CUDA graphs of a compiled function `fn`.

    - Graphs are kept per input shapes (one set for a function of static size; per
      shapes for one of dynamic size: a graph runs the sizes it was recorded with).
    - Shapes met for the first time run plainly: that call compiles the kernels (and
      autotunes) outside any capture, and a decode step over a growing cache, which
      meets each length once, never pays for a recording it would not replay.
    - At the second call with those shapes a graph is recorded: an input at the
      address it had in the call before is read in place (weights, a static KV
      cache: nothing copied, no second copy in memory); the others are copied into
      the graph's own buffers at every replay. A graph replays while its in-place
      inputs stay where they were; when one moves, a new graph is recorded.
    - Outputs are returned without a copy, as aliases of the graph's buffers; a graph
      replays only when no alias of its previous outputs is still alive (storage use
      counts), else another instance is recorded (up to `instances` per shapes) or
      the plain launches run, so results are never overwritten under the caller.
    - Recording stops for shapes re-recorded `MAX_RECORDS` times (inputs that keep
      moving), and for new shapes once `max_graphs` graphs have been dropped to make
      room (shapes that vary more than the graphs kept: a decode step's cache length):
      they run plainly from then on, logged once.
    A capture that fails falls back to plain launches; CPU inputs run the plain
    function.
    """

    MAX_SEEN = 1024
    """Input shapes remembered before the memory is cleared."""
    MAX_RECORDS = 8
    """Recordings per input shapes before they run plainly."""

    def __init__(self, fn: Any, max_graphs: int = 8, instances: int = 2):
        self.fn, self.max_graphs, self.instances = fn, max_graphs, instances
        self.graphs: OrderedDict[tuple[Any, ...], list[GraphInstance]] = OrderedDict()
        """The graphs recorded per input shapes (and device), most recent last."""
        self.previous: dict[tuple[Any, ...], tuple[int, ...]] = {}
        """The input addresses of the last call per input shapes."""
        self.records: dict[tuple[Any, ...], int] = {}
        self.sized = any(d < 0 for shape, _ in getattr(fn, "inputs", ()) for d in shape)
        self.said_cpu = False
        self.said_moving = False
        self.said_varying = False
        self.evictions = 0
        """Graphs dropped to keep `max_graphs`: once as many as it keeps, new shapes
        run plainly (a decode step meets a new length every token, every call of
        `generate`: recorded graphs would be dropped before they replay)."""
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
        key: tuple[Any, ...] = (torch.cuda.current_device(),)
        if self.sized:
            key += tuple(tuple(x.shape) for x in xs)
        pointers = tuple(x.data_ptr() for x in xs)
        previous = self.previous.get(key)
        if previous is None and len(self.previous) >= self.MAX_SEEN:
            self.previous.clear()
        self.previous[key] = pointers
        pool = self.graphs.get(key)
        if pool is not None:
            self.graphs.move_to_end(key)
            for instance in pool:
                if instance.matches(pointers) and instance.free():
                    return instance.replay(xs)
            pool[:] = [g for g in pool if g.matches(pointers)]  # inputs moved: stale
        if previous is None or self.records.get(key, 0) >= self.MAX_RECORDS:
            return self.fn(*xs)
        if pool is None:
            if self.evictions >= self.max_graphs:  # more recurring shapes than graphs kept
                if not self.said_varying:
                    self.said_varying = True
                    log.info(
                        "reduce-overhead: input shapes vary more than %d graphs can keep; "
                        "new shapes run plain launches",
                        self.max_graphs,
                    )
                return self.fn(*xs)
            pool = self.graphs[key] = []
            if len(self.graphs) > self.max_graphs:
                self.graphs.popitem(last=False)
                self.evictions += 1
        if len(pool) >= self.instances:
            return self.fn(*xs)
        self.records[key] = self.records.get(key, 0) + 1
        if self.records[key] == self.MAX_RECORDS and not self.said_moving:
            self.said_moving = True
            log.info("reduce-overhead: inputs keep moving; these shapes run plain launches")
        stable = tuple(p == q for p, q in zip(pointers, previous, strict=True))
        instance = self._record(xs, stable)
        if instance is None:
            return self.fn(*xs)
        pool.append(instance)
        return instance.replay(xs)

    def _record(self, xs: Sequence[torch.Tensor], stable: tuple[bool, ...]) -> GraphInstance | None:
        """A graph of the host function reading the inputs marked `stable` in place and
        copies of the others."""
        host = self.fn.host(False)
        device = xs[0].device
        copied = tuple(i for i, s in enumerate(stable) if not s)
        buffers = [xs[i].clone() for i in copied]
        inputs = list(xs)
        for i, b in zip(copied, buffers, strict=True):
            inputs[i] = b
        try:
            with torch.cuda.device(device):  # the host allocates on the current device
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
        pinned = tuple(
            (i, x.data_ptr()) for i, (x, s) in enumerate(zip(xs, stable, strict=True)) if s
        )
        return GraphInstance(graph, tuple(outputs), pinned, copied, buffers)


__all__ = ["CudaGraphFunction", "GraphInstance"]
