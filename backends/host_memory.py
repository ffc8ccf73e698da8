"""Memory planning for a host function's temporaries: one workspace, reused by lifetime.

A host function allocates a buffer per temporary (`tile.alloc`). Allocating each one
per call costs a trip through PyTorch's caching allocator (several microseconds on the
host, per buffer, per call: in a decode step that was a hundred allocations). The plan
gives every temporary a byte offset in one workspace, allocated once per call, and lets
a temporary reuse the bytes of one whose last use came before it is allocated: kernels
and library calls of a host function run in order on one stream, so a later kernel
writes those bytes only after the earlier ones read them (the rule PyTorch's own
caching allocator follows). Views (`tile.view`) share their source's bytes and extend
its lifetime. Outputs are not planned: they are returned to the caller.

Offsets are aligned to `ALIGNMENT` bytes (Triton specializes kernels on 16-byte
aligned pointers; vector loads want more).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import torch
from xdsl.ir import SSAValue

from fuseopt.dialects.dtypes import element_bytes
from fuseopt.dialects.tile_host import Alloc, HostFunction, Launch, View, step_buffers

ALIGNMENT = 256
"""Every temporary starts at a multiple of this many bytes in the workspace."""


@dataclass(frozen=True)
class WorkspacePlan:
    """Where each temporary lives: `offsets[value]` bytes into a workspace of `nbytes`."""

    nbytes: int
    offsets: dict[SSAValue, int]


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def plan_workspace(host: HostFunction) -> WorkspacePlan:
    """Offsets for every `Alloc` of `host` some step uses (see the module doc): each
    temporary lives from its allocation to its last use, directly or through views; a
    new temporary takes the lowest aligned gap between the live ones that fits it. A
    temporary nothing uses gets no bytes."""
    root: dict[SSAValue, SSAValue] = {}
    born: dict[SSAValue, int] = {}
    size: dict[SSAValue, int] = {}
    last: dict[SSAValue, int] = {}
    for i, step in enumerate(host.steps):
        if isinstance(step, Alloc) and step.sizes:
            continue  # a size known per call: allocated on its own, not in the workspace
        if isinstance(step, Alloc):
            root[step.value] = step.value
            born[step.value] = last[step.value] = i
            size[step.value] = _aligned(max(1, math.prod(step.shape)) * element_bytes(step.element))
        elif isinstance(step, View) and step.source in root:
            root[step.value] = root[step.source]
        for v in step_buffers(step):
            if v in root:
                last[root[v]] = i
    used = [v for v in born if last[v] > born[v]]  # a use comes after the allocation
    offsets: dict[SSAValue, int] = {}
    live: list[tuple[int, int, SSAValue]] = []  # (offset, bytes, value), by offset
    end = 0
    for value in sorted(used, key=born.__getitem__):
        live = [block for block in live if last[block[2]] >= born[value]]
        cursor = 0
        for offset, nbytes, _ in live:
            if offset - cursor >= size[value]:
                break
            cursor = max(cursor, offset + nbytes)
        offsets[value] = cursor
        live = sorted([*live, (cursor, size[value], value)], key=lambda block: block[0])
        end = max(end, cursor + size[value])
    return WorkspacePlan(end, offsets)


def storage_uses(t: torch.Tensor) -> int:
    """How many tensors (views included) share `t`'s storage now."""
    return int(torch._C._storage_Use_Count(t.untyped_storage()._cdata)) - 1  # the temporary


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides of `shape`."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


try:
    from torch._C._dynamo.guards import _reinterpret_tensor as reinterpret
except ImportError:  # a PyTorch without it: the same view, one call slower

    def reinterpret(
        base: torch.Tensor, size: Sequence[int], stride: Sequence[int], offset: int
    ) -> torch.Tensor:
        return base.as_strided(size, stride, base.storage_offset() + offset)


"""A view of a buffer: ``reinterpret(base, size, stride, offset)``, `offset` elements from
the base's start (a workspace's temporary, a `tile.view` at an offset; the one C call
Inductor's generated code uses for the same purpose)."""


def pointer_aliases(host: HostFunction) -> dict[SSAValue, SSAValue]:
    """Views that need no tensor of their own: `aliases[view]` is the buffer whose
    tensor a backend may pass in its place.

    A kernel reads a buffer through its data pointer and the shape it was printed with
    (buffers are contiguous and row-major), so a `tile.view` used only as kernel launch
    arguments (or by other such views) names the same bytes as its source: the host code
    can skip making a view tensor per call. Views a library GEMM, a PyTorch call or a
    shape-reading step uses keep their own tensor, as do views at an offset into their
    source (their data pointer is not the source's)."""
    users: dict[SSAValue, list[object]] = {}
    for step in host.steps:
        for v in step_buffers(step):
            users.setdefault(v, []).append(step)
    views = {step.value: step for step in host.steps if isinstance(step, View)}

    def launch_only(value: SSAValue) -> bool:
        return all(
            isinstance(u, Launch) or (isinstance(u, View) and launch_only(u.value))
            for u in users.get(value, [])
        )

    aliases: dict[SSAValue, SSAValue] = {}
    for value, view in views.items():  # in program order: a view's source comes first
        dynamic = any(n < 0 for n in view.shape)  # a launch reads its sizes: keep its tensor
        if launch_only(value) and not view.offset and not dynamic:
            aliases[value] = aliases.get(view.source, view.source)
    return aliases


@dataclass(frozen=True)
class WorkspaceUses:
    """How a host function uses the bytes of its workspace (`workspace_uses`):
    `offsets[value]`, the byte offset of each temporary and of each view of one (of a
    static shape), so every one of them is made straight from the workspace when a
    tensor is needed, and its data pointer is the workspace's plus the offset;
    `tensors`, those some step reads as a tensor; `pointers`, those a kernel launch
    reads through their data pointer (a value in both has a tensor and its pointer is
    still the workspace's plus its offset)."""

    offsets: dict[SSAValue, int]
    tensors: set[SSAValue]
    pointers: set[SSAValue]


def workspace_uses(
    host: HostFunction,
    plan: WorkspacePlan,
    aliases: dict[SSAValue, SSAValue],
    tensor_args: Callable[[Launch], Collection[int]],
) -> WorkspaceUses:
    """The workspace values of `host` (planned by `plan`) and how its steps read them.

    A view of a temporary is the bytes at the temporary's offset (plus its own offset
    in elements), so making it needs no tensor of its source: a view of the workspace
    serves. A pointer alias (`pointer_aliases`) is printed as its source: what reads
    it reads the source. `tensor_args(launch)` gives the argument positions a
    backend's launch reads as tensors (a launcher call, a size read from a shape); a
    library GEMM, a PyTorch call and a shape-reading step read tensors. A temporary
    only kernels read through pointers then needs no tensor at all (a view through
    PyTorch costs a microsecond or two of host time, per temporary, per call)."""
    offsets = dict(plan.offsets)
    for step in host.steps:  # a view has its source's element type and, here, static dims
        if isinstance(step, View) and step.source in offsets:
            offsets[step.value] = offsets[step.source] + (step.offset or 0) * element_bytes(
                step.element
            )
    tensors: set[SSAValue] = set()
    pointers: set[SSAValue] = set()
    for step in host.steps:
        if isinstance(step, Launch):
            read = tensor_args(step)
            tensors.update(a for i, a in enumerate(step.args) if i in read)
            pointers.update(a for i, a in enumerate(step.args) if i not in read)
        elif not isinstance(step, View):  # a view of a temporary is made from the workspace
            tensors.update(step_buffers(step))
    # a pointer alias is printed as its source (no view): reading it reads the source
    tensors |= {aliases[v] for v in tensors if v in aliases}
    pointers |= {aliases[v] for v in pointers if v in aliases}
    return WorkspaceUses(
        offsets,
        {v for v in tensors if v in offsets},
        {v for v in pointers if v in offsets},
    )
