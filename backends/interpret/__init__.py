"""The "interpret" backend: runs fused nn IR through the reference interpreter on NumPy
(no device, no generated source); `fuseopt.compile(..., backend="interpret")`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fuseopt.backends.interpret.backend import InterpretBackend


def make_backend() -> InterpretBackend:
    """The "interpret" backend for `fuseopt.backends.contract.BACKENDS`."""
    from fuseopt.backends.interpret.backend import InterpretBackend

    return InterpretBackend()
