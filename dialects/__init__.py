"""fuseopt's dialects: `nn` (high-level tensors) and, later, `tile`. One file per dialect."""
