"""CUDA C++ backend: tile IR printed as CUDA C++ translation units, plus its runtime."""
