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

Graphs nest: a function wrapped with `encloses=True` (a whole compiled ATen graph,
`frontends/fx/whole_graph.py`) records one graph over everything it runs, and the
CudaGraphFunctions called inside it (its regions) run plainly while it records and
in its plain runs before that, so they record nothing of their own; if its capture
fails, or when it runs plainly after recording (its results still held by the
caller), they replay their own graphs.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from fuseopt.backends.host_memory import storage_uses

log = logging.getLogger("fuseopt")

_ENCLOSING = threading.local()
"""`depth`: how many enclosing functions (`encloses=True`) run on this thread now."""


def _enclosed() -> bool:
    """Does an enclosing function run on this thread (inner graphs run plainly)?"""
    return getattr(_ENCLOSING, "depth", 0) > 0


@contextmanager
def _enclosing() -> Iterator[None]:
    """Mark the calls inside as run by an enclosing function."""
    _ENCLOSING.depth = getattr(_ENCLOSING, "depth", 0) + 1
    try:
        yield
    finally:
        _ENCLOSING.depth -= 1


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
        self.idle = tuple(storage_uses(o) for o in outputs)

    def matches(self, pointers: tuple[int, ...]) -> bool:
        """Are the inputs it reads in place at the addresses it was recorded on?"""
        return all(pointers[i] == p for i, p in self.pinned)

    def free(self) -> bool:
        """Are the outputs of the last replay no longer referenced outside this object?"""
        return all(storage_uses(o) <= n for o, n in zip(self.outputs, self.idle, strict=True))

    def replay(self, xs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """Copy the inputs it does not pin, replay; the caller gets fresh aliases of
        the outputs (tracked by use count)."""
        if self.copied:
            torch._foreach_copy_(self.buffers, [xs[i] for i in self.copied])
        self.graph.replay()
        return tuple(o.view(o.shape) for o in self.outputs)


@dataclass
class Decision:
    """What a call does: "replay" `instance`, run "plain", or "record" a graph that
    reads the inputs marked `stable` in place."""

    kind: str
    instance: Any = None
    stable: tuple[bool, ...] = ()


class GraphBook:
    """The policy of `CudaGraphFunction`, free of CUDA: per key (device and input
    shapes) the graphs kept and, per call, whether one replays, one is recorded or the
    plain launches run (see `CudaGraphFunction` for the rules). An instance needs
    `matches(pointers)`, `free()` and `pinned` ((position, address) pairs)."""

    def __init__(
        self,
        max_graphs: int,
        instances: int,
        max_records: int,
        max_seen: int,
        packed_inputs: frozenset[int] = frozenset(),
    ):
        self.max_graphs, self.instances = max_graphs, instances
        self.max_records, self.max_seen = max_records, max_seen
        self.packed_inputs = packed_inputs
        """Input positions a plain run moves into a buffer of its own (parameters packed
        for merged linear layers): when one has moved since the last call (a parameter
        replaced), the call runs plainly, which packs it again, and the next call
        records reading it in place; never copied. Each such recording counts toward
        `max_records`."""
        self.graphs: OrderedDict[tuple[Any, ...], list[Any]] = OrderedDict()
        """The graphs recorded per key, most recently used last."""
        self.previous: dict[tuple[Any, ...], tuple[int, ...]] = {}
        """The input addresses of the last call per key."""
        self.moved: dict[tuple[Any, ...], set[int]] = {}
        """Per key, the input positions a graph pinned and then saw move: copied from
        then on, so re-recordings stop once every moving input is known."""
        self.records: dict[tuple[Any, ...], int] = {}
        self.evictions = 0
        """Graphs dropped to keep `max_graphs`: once as many as it keeps, new keys run
        plainly (a decode step meets a new length every token, every call of
        `generate`: recorded graphs would be dropped before they replay)."""
        self.said_moving = self.said_varying = False

    def choose(self, key: tuple[Any, ...], pointers: tuple[int, ...]) -> Decision:
        """What the call with input addresses `pointers` under `key` does."""
        previous = self.previous.get(key)
        if previous is None and len(self.previous) >= self.max_seen:
            self.previous.clear()
        self.previous[key] = pointers
        pool = self.graphs.get(key)
        if pool is not None:
            self.graphs.move_to_end(key)
            for instance in pool:
                if instance.matches(pointers) and instance.free():
                    return Decision("replay", instance)
            stale = [g for g in pool if not g.matches(pointers)]
            moved = self.moved.setdefault(key, set())
            repack = False
            for g in stale:  # inputs it read in place moved: copy them from now on
                gone = {i for i, p in g.pinned if pointers[i] != p}
                repack |= bool(gone & self.packed_inputs)
                moved.update(gone - self.packed_inputs)
            pool[:] = [g for g in pool if g.matches(pointers)]
            if repack:
                return Decision("plain")
        if previous is None or self.records.get(key, 0) >= self.max_records:
            return Decision("plain")
        if pool is None:
            if self.evictions >= self.max_graphs:  # more recurring keys than graphs kept
                if not self.said_varying:
                    self.said_varying = True
                    log.info(
                        "reduce-overhead: input shapes vary more than %d graphs can keep; "
                        "new shapes run plain launches",
                        self.max_graphs,
                    )
                return Decision("plain")
            pool = self.graphs[key] = []
            if len(self.graphs) > self.max_graphs:
                self.graphs.popitem(last=False)
                self.evictions += 1
        if len(pool) >= self.instances:
            return Decision("plain")
        moved = self.moved.get(key, set())
        stable = tuple(
            p == q and i not in moved
            for i, (p, q) in enumerate(zip(pointers, previous, strict=True))
        )
        if any(not stable[i] for i in self.packed_inputs):  # replaced: packed again first
            return Decision("plain")
        self.records[key] = self.records.get(key, 0) + 1
        if self.records[key] == self.max_records and not self.said_moving:
            self.said_moving = True
            log.info("reduce-overhead: inputs keep moving; these shapes run plain launches")
        return Decision("record", stable=stable)

    def ran(self, key: tuple[Any, ...], pointers: tuple[int, ...]) -> None:
        """The input addresses after a plain run under `key`, where the function may
        have moved an input (packed parameters move theirs at the first call): the next
        call compares its addresses with these."""
        if key in self.previous:
            self.previous[key] = pointers

    def add(self, key: tuple[Any, ...], instance: Any) -> None:
        """Keep `instance`, recorded for a "record" decision under `key`."""
        self.graphs.setdefault(key, []).append(instance)


class CudaGraphFunction:
    """mode="reduce-overhead": replay CUDA graphs of a compiled function `fn`.

    - Graphs are kept per input shapes (one set for a function of static size; per
      shapes for one of dynamic size: a graph runs the sizes it was recorded with).
    - Shapes met for the first time run plainly: that call compiles the kernels (and
      autotunes) outside any capture, and a decode step over a growing cache, which
      meets each length once, never pays for a recording it would not replay.
    - At the second call with those shapes a graph is recorded: an input at the
      address it had at the end of the call before (a plain run may move one: packed
      parameters) is read in place (weights, a static KV cache: nothing copied, no
      second copy in memory); the others are copied into the graph's own buffers at
      every replay. A graph replays while its in-place inputs stay where they were;
      when one moves, a new graph is recorded that copies that input from then on
      (a packed parameter is packed again by a plain run instead: `GraphBook`).
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

    `encloses`: `fn` calls other CudaGraphFunctions (a whole graph calling its
    regions); they run plainly inside its recordings and the plain runs before its
    first one (module doc).
    """

    MAX_SEEN = 1024
    """Input shapes remembered before the memory is cleared."""
    MAX_RECORDS = 8
    """Recordings per input shapes before they run plainly."""

    def __init__(self, fn: Any, max_graphs: int = 8, instances: int = 2, encloses: bool = False):
        self.fn = fn
        self.encloses = encloses
        packed = frozenset(getattr(fn, "packed_inputs", ()))
        self.book = GraphBook(max_graphs, instances, self.MAX_RECORDS, self.MAX_SEEN, packed)
        self.sized = any(d < 0 for shape, _ in getattr(fn, "inputs", ()) for d in shape)
        self.said_cpu = False
        self.broken = False

    @property
    def graphs(self) -> OrderedDict[tuple[Any, ...], list[Any]]:
        """The graphs recorded per device and input shapes (`GraphBook.graphs`)."""
        return self.book.graphs

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
        if torch.cuda.is_current_stream_capturing() or self.broken or _enclosed():
            return self.fn(*xs)
        key: tuple[Any, ...] = (torch.cuda.current_device(),)
        if self.sized:
            key += tuple(tuple(x.shape) for x in xs)
        decision = self.book.choose(key, tuple(x.data_ptr() for x in xs))
        if decision.kind == "replay":
            return decision.instance.replay(xs)
        if decision.kind == "plain":
            outputs = self._plain(xs, key)
            self.book.ran(key, tuple(x.data_ptr() for x in xs))
            return outputs
        instance = self._record(xs, decision.stable)
        if instance is None:
            return self.fn(*xs)  # broken: inner functions replay their own graphs
        self.book.add(key, instance)
        self.book.ran(key, tuple(x.data_ptr() for x in xs))  # its warm-up may have packed
        return instance.replay(xs)

    def _plain(self, xs: Sequence[torch.Tensor], key: tuple[Any, ...]) -> tuple[torch.Tensor, ...]:
        """The plain launches. When this function encloses others, they run plainly too
        until its first recording for `key` (the calls before it need no graph of
        theirs); later plain runs (its graphs' results still held by the caller, inputs
        that keep moving) let them replay their own."""
        if not self.encloses or self.book.records.get(key, 0):
            return self.fn(*xs)
        with _enclosing():
            return self.fn(*xs)

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
            with torch.cuda.device(device), _enclosing() if self.encloses else nullcontext():
                side = torch.cuda.Stream(device)
                side.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.stream(side):
                    host(*inputs, device=device)  # warm-up on a side stream, as torch asks
                torch.cuda.current_stream(device).wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    outputs = host(*inputs, device=device)
        except Exception as e:  # an op that cannot be captured (a host copy, say)
            if self.encloses:
                log.warning(
                    "reduce-overhead: the graph cannot be captured whole (%s); its compiled "
                    "regions replay graphs of their own",
                    str(e).strip().split("\n", 1)[0],
                )
            else:
                log.warning("reduce-overhead: CUDA graph capture failed, launching plainly: %s", e)
            self.broken = True
            torch.cuda.synchronize(device)
            return None
        pinned = tuple(
            (i, x.data_ptr()) for i, (x, s) in enumerate(zip(xs, stable, strict=True)) if s
        )
        return GraphInstance(graph, tuple(outputs), pinned, copied, buffers)


__all__ = ["CudaGraphFunction", "Decision", "GraphBook", "GraphInstance"]
