"""CUDA C++ backend: tile IR printed as CUDA C++ translation units, plus its runtime.

`fuse-opt -t cuda` prints (`printer.CudaTarget`); `fuseopt.compile(..., backend="cuda")`
uses `make_backend()` (`backend.CudaBackend`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fuseopt.backends.cuda.backend import CudaBackend


def make_backend() -> CudaBackend:
    """The "cuda" backend for `fuseopt.compile` (see fuseopt/api.py)."""
    from fuseopt.backends.cuda.backend import CudaBackend

    return CudaBackend()
