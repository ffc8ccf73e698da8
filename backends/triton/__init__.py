"""Triton backend: tile IR printed as a Triton Python module, plus its runtime."""
