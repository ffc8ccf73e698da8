"""fuseopt's benchmark suite: the PERFORMANCE.md workloads, harness and results."""
