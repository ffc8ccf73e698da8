"""Triton backend: tile IR printed as a Triton Python module, plus its runtime.

`fuseopt.compile(model, inputs, backend="triton")` reaches `make_backend()`; the
printer is `-t triton` (`printer.TritonTarget`).
"""

from __future__ import annotations

from typing import Any


def make_backend() -> Any:
    """The Triton backend object for `fuseopt.backends.contract.BACKENDS`."""
    from fuseopt.backends.triton.backend import TritonBackend

    return TritonBackend()
