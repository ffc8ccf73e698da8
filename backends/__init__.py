"""fuseopt's backends: printers from tile IR to Triton and CUDA C++, with runtimes."""
