"""fuseopt's frontends: PyTorch programs (FX/ATen graphs) into the nn dialect."""
