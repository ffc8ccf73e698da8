"""fuseopt's benchmark suite: the workload suite, harness and results."""
