"""Distributed benchmark: DDP, FSDP2 and tensor parallelism on the model suite's Llama.

``python -m benchmarks.distributed`` (see `benchmarks.distributed.__main__`) times a
training step (DDP, FSDP2) and a prefill (tensor parallel) of the model suite's Llama
(`benchmarks.models`: hidden 2048, 4 layers, 16 query / 4 key-value heads) for eager,
torch.compile and fuseopt per backend, at any world size. The pieces:

- `benchmarks.distributed.launch`: process groups (torchrun's, or its own spawn);
- `benchmarks.distributed.parallel`: the three ways of spreading the model over ranks;
- `benchmarks.distributed.measure`: one rank's run, cell by cell (strategy, system);
- `benchmarks.distributed.report`: results.json and results.md (rank 0 writes them).

docs/distributed.md says how to run it and what it measures.

`tests/test_distributed.py` runs the same parallelizations on CPU (gloo, two processes)
and checks fuseopt's gradients and outputs against eager.
"""

from __future__ import annotations

import torch
from torch import nn

from benchmarks.workloads import Dims


def llama_dims(quick: bool, training: bool) -> Dims:
    """The suite's Llama sizes with its prefill / training batch and sequence
    (1 x 2048; ``quick``: two layers of hidden 64, 1 x 16)."""
    from benchmarks.models import MODELS, scenario_dims

    spec = next(s for s in MODELS if s.name == "llama")
    sizes = spec.quick if quick else spec.full
    return {**sizes, **scenario_dims(spec, "train" if training else "prefill", quick)}


def build_llama(
    dims: Dims,
    training: bool,
    dtype: torch.dtype,
    device: torch.device,
    seed: int,
    attention: str = "sdpa",
) -> nn.Module:
    """The model suite's Llama (`benchmarks.models.hf.build_model`: random weights from
    `seed`, the same on every rank) with the attention implementation `attention`
    (``"sdpa"``, as the suite; ``"eager"``: attention as plain matmuls and softmax)."""
    from benchmarks.models.hf import build_model

    model = build_model("llama", dims, training, dtype, device, seed)
    model.set_attn_implementation(attention)
    return model
