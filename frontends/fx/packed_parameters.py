"""Parameters moved into one buffer, so that `cat(parameters)` costs no copy.

`merged_linears` runs linear layers of one input as one GEMM over their concatenated
weights. Concatenating them every call would copy the weights; `PackedParameters`
instead moves the parameters themselves into one buffer at the first call
(`param.data` becomes a slice of it: no memory is added, and in-place updates of the
parameters, `load_state_dict` and optimizer steps, reach the buffer) and later calls
return a view of that buffer after comparing the parameters' addresses with the ones
it packed. A parameter replaced since (a new tensor assigned, the model moved with
`.to()`) is packed again. Only a plain `nn.Parameter` that is the sole user of its
whole storage moves (`owns_storage`): a parameter viewing another tensor, or whose
storage another tensor shares (a second parameter built on its data, a detached
alias kept by the user), would be cut off from it; such parameters are concatenated
for each call instead (correct, logged once).

Nothing here holds the buffer: the parameters do. A model deleted or moved off the
device frees its packed buffers while the compiled graph stays cached.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from fuseopt.backends.host_memory import contiguous_strides, storage_uses

logger = logging.getLogger("fuseopt")


def owns_storage(t: torch.Tensor) -> bool:
    """Whether `t` is a plain, contiguous `nn.Parameter` that is the whole of its storage
    and its only user: moving it into a packed buffer (`t.data = slice`) changes no other
    tensor."""
    return (
        type(t) is torch.nn.Parameter
        and t.device.type != "meta"
        and t.is_contiguous()
        and t.storage_offset() == 0
        and t.untyped_storage().nbytes() == t.numel() * t.element_size()
        and storage_uses(t) == 1
    )


def packed_view(ts: Sequence[torch.Tensor]) -> torch.Tensor | None:
    """The tensor `cat(ts)` already is, when `ts` are contiguous, consecutive slices of
    one storage in this order (packed before, by this graph or another compiled graph
    over the same parameters); else None."""
    first = ts[0]
    storage = first.untyped_storage().data_ptr()
    offset = first.storage_offset()
    for t in ts:
        if (
            not t.is_contiguous()
            or t.dtype != first.dtype
            or t.shape[1:] != first.shape[1:]
            or t.untyped_storage().data_ptr() != storage
            or t.storage_offset() != offset
        ):
            return None
        offset += t.numel()
    rows = sum(t.shape[0] for t in ts)
    shape = (rows, *first.shape[1:])
    return first.as_strided(shape, contiguous_strides(shape))


def packable(ts: Sequence[object], buffer: int | None = None) -> bool:
    """Whether parameters `ts` (distinct, one dtype and device) can be packed: each owns
    its storage, or they are all the users of the packed buffer whose storage address is
    `buffer` (packed again when one of them was replaced), or together they already are
    one packed buffer."""
    if not all(isinstance(t, torch.Tensor) for t in ts) or len({id(t) for t in ts}) < len(ts):
        return False
    tensors: list[torch.Tensor] = list(ts)  # type: ignore[arg-type]
    if len({(t.dtype, t.device) for t in tensors}) != 1:
        return False
    if not all(type(t) is torch.nn.Parameter for t in tensors):
        return False
    mine = [t for t in tensors if t.untyped_storage().data_ptr() == buffer]
    ours = {id(t) for t in mine}
    if all(owns_storage(t) or id(t) in ours for t in tensors) and all(
        t.is_contiguous() and storage_uses(t) == len(mine) for t in mine
    ):
        return True
    return packed_view(tensors) is not None


class PackedParameters:
    """At run time, `cat(parameters)` without copying (module doc). Called with the
    parameters (one graph node's arguments).

    `pointers` are their addresses when packed and `extent` the bytes from the first
    one's storage start to the buffer's end: equal addresses, in a storage of the first
    parameter that reaches that far, are the buffer's memory, whatever replaced what."""

    host_step = True
    """Not work to report when the partitioner runs it in PyTorch (it launches nothing)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.__name__ = self.__qualname__ = "packed_parameters"  # FX names call targets
        self.pointers: tuple[int, ...] = ()
        self.shape: tuple[int, ...] = ()
        self.strides: tuple[int, ...] = ()
        self.extent = 0
        self.storage: int | None = None
        self.copied = False

    def __call__(self, *ts: torch.Tensor) -> torch.Tensor:
        """The packed buffer of `ts`: `cat(ts)` in value."""
        first = ts[0]
        if (
            tuple(t.data_ptr() for t in ts) == self.pointers
            and first.untyped_storage().nbytes() >= self.extent
        ):
            return first.as_strided(self.shape, self.strides)
        return self.pack(ts)

    def pack(self, ts: Sequence[torch.Tensor]) -> torch.Tensor:
        """Move `ts` into one buffer (or find them already in one) and remember where; a
        concatenated copy for this call when they cannot be moved."""
        can_pack = packable(ts, self.storage)
        packed = packed_view(ts) if can_pack else None
        if packed is None and can_pack:
            with torch.inference_mode(False), torch.no_grad():
                packed = torch.cat([t.detach() for t in ts])
                for t, piece in zip(ts, packed.split([t.shape[0] for t in ts]), strict=True):
                    t.data = piece
        if packed is None:
            if not self.copied:
                self.copied = True
                logger.info(
                    "fuseopt: %s: the weights of linear layers merged into one GEMM cannot "
                    "move into one buffer (not parameters that alone use their whole "
                    "storage): concatenated each call",
                    self.name,
                )
            return torch.cat(list(ts))
        self.pointers = tuple(t.data_ptr() for t in ts)
        self.shape, self.strides = tuple(packed.shape), tuple(packed.stride())
        self.extent = (packed.storage_offset() + packed.numel()) * packed.element_size()
        self.storage = packed.untyped_storage().data_ptr()
        logger.debug("fuseopt: %s: packed %d parameters into one buffer", self.name, len(ts))
        return packed

    def __repr__(self) -> str:
        return f"PackedParameters({self.name!r})"
