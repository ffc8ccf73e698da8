"""The model suite: Hugging Face models from configs, in prefill, decode and training.

``python -m benchmarks.models`` (see `benchmarks.models.__main__`). Each row is one
model in one scenario, a `Workload` whose module is the scenario's (`benchmarks.models.hf`)
and whose shape carries the model's sizes and the scenario's batch and sequence:

| model | hidden | layers | heads / kv | intermediate | vocab |
|---|---|---|---|---|---|
| llama | 2048 | 4 | 16 / 4 | 5632 | 32000 |
| qwen2 | 1536 | 4 | 12 / 2 | 8960 | 151936 |
| mistral | 4096 | 4 | 32 / 8 | 14336 | 32000 |
| gpt2 | 1024 | 4 | 16 | 4096 | 50257 |
| bert | 1024 | 4 | 16 | 4096 | 30522 |

Scenarios: ``prefill`` (1 x 2048 tokens; BERT 16 x 512 with a padding attention mask),
``decode`` (batch 8, one new token after a KV cache of 512; decoders only), ``train``
(forward with labels, backward, AdamW; 1 x 2048, BERT 16 x 512 masked-LM). The
reference is the same module in float32 (same weights, same inputs); ``--quick`` runs
two-layer models of hidden 64 on tiny inputs.

The cost model (for % of roofline, a rough floor): bytes are every weight read once
(a training step: weights, gradients and AdamW's two moments read and written, eight
weight-sized passes), plus the KV cache for decode and the inputs and outputs; FLOPs
are two per multiplied weight and token (three times that for training) plus the
attention products.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from benchmarks.workloads import Dims, Shape, Workload, element_size

SCENARIOS = ("prefill", "decode", "train")
"""The scenarios, in table order."""

MODEL_SANITY_REL_L2 = 0.25
"""Eager bf16 against the float32 run may differ this much (rel_l2) before the reference
is suspect: four layers of bf16 rounding, and bf16 gradients, are far from float32."""


@dataclass(frozen=True)
class ModelSpec:
    """One model of the suite: its family and sizes, full and quick."""

    name: str
    full: Dims
    quick: Dims

    @property
    def decoder(self) -> bool:
        """Whether it has a KV cache (and so a decode scenario)."""
        from benchmarks.models.hf import ARCHITECTURES

        return ARCHITECTURES[self.name].decoder


QUICK_SIZES: Dims = {
    "hidden": 64,
    "layers": 2,
    "heads": 4,
    "kv_heads": 2,
    "intermediate": 128,
    "vocab": 256,
}

MODELS = (
    ModelSpec(
        "llama",
        {
            "hidden": 2048,
            "layers": 4,
            "heads": 16,
            "kv_heads": 4,
            "intermediate": 5632,
            "vocab": 32000,
        },
        QUICK_SIZES,
    ),
    ModelSpec(
        "qwen2",
        {
            "hidden": 1536,
            "layers": 4,
            "heads": 12,
            "kv_heads": 2,
            "intermediate": 8960,
            "vocab": 151936,
        },
        QUICK_SIZES,
    ),
    ModelSpec(
        "mistral",
        {
            "hidden": 4096,
            "layers": 4,
            "heads": 32,
            "kv_heads": 8,
            "intermediate": 14336,
            "vocab": 32000,
        },
        QUICK_SIZES,
    ),
    ModelSpec(
        "gpt2",
        {
            "hidden": 1024,
            "layers": 4,
            "heads": 16,
            "kv_heads": 16,
            "intermediate": 4096,
            "vocab": 50257,
        },
        {**QUICK_SIZES, "kv_heads": 4},
    ),
    ModelSpec(
        "bert",
        {
            "hidden": 1024,
            "layers": 4,
            "heads": 16,
            "kv_heads": 16,
            "intermediate": 4096,
            "vocab": 30522,
        },
        {**QUICK_SIZES, "kv_heads": 4},
    ),
)
"""The suite's models (sizes of the full runs; quick runs use `QUICK_SIZES`)."""


def scenario_dims(spec: ModelSpec, scenario: str, quick: bool) -> Dims:
    """Batch and sequence sizes of one scenario (decode: batch and cached context)."""
    if scenario == "decode":
        return {"batch": 2, "context": 8} if quick else {"batch": 8, "context": 512}
    if spec.name == "bert":
        return {"batch": 2, "seq": 16} if quick else {"batch": 16, "seq": 512}
    return {"batch": 1, "seq": 16} if quick else {"batch": 1, "seq": 2048}


def _make_model(spec: ModelSpec, scenario: str):  # noqa: ANN202 - a Workload.make_model
    def make(dims: Dims, dtype: torch.dtype, device: torch.device, seed: int) -> torch.nn.Module:
        from benchmarks.models import hf

        model = hf.build_model(spec.name, dims, scenario == "train", dtype, device, seed)
        if scenario == "prefill":
            return hf.Prefill(model, spec.decoder)
        if scenario == "decode":
            return hf.DecodeStep(model)
        return hf.TrainStep(model)

    return make


def _make_inputs(spec: ModelSpec, scenario: str):  # noqa: ANN202 - a Workload.make_inputs
    def make(
        dims: Dims, dtype: torch.dtype, device: torch.device, seed: int
    ) -> tuple[torch.Tensor, ...]:
        from benchmarks.models import hf

        vocab = dims["vocab"]
        if scenario == "decode":
            ids = hf.tokens(vocab, (dims["batch"], 1), device, seed)
            return (ids, *hf.kv_cache(dims, dtype, device, seed + 1))
        ids = hf.tokens(vocab, (dims["batch"], dims["seq"]), device, seed)
        mask = () if spec.decoder else (hf.padding_mask(dims["batch"], dims["seq"], device, seed),)
        if scenario == "prefill":
            return (ids, *mask)
        labels = hf.tokens(vocab, (dims["batch"], dims["seq"]), device, seed + 2)
        return (ids, labels, *mask)

    return make


def _counts(spec: ModelSpec, scenario: str, dims: Dims) -> dict:
    from benchmarks.models.hf import weight_counts

    sizes = {k: dims[k] for k in spec.full}
    return weight_counts(spec.name, tuple(sorted(sizes.items())), scenario == "train")


def _tokens(dims: Dims) -> int:
    return dims["batch"] * (1 if "context" in dims else dims["seq"])


def _min_bytes(spec: ModelSpec, scenario: str):  # noqa: ANN202 - a Workload.min_bytes
    def min_bytes(dims: Dims, dtype: torch.dtype) -> int:
        from benchmarks.models.hf import cache_bytes

        params = _counts(spec, scenario, dims)["params"] * element_size(dtype)
        passes = 8 if scenario == "train" else 1
        out = _tokens(dims) * (dims["vocab"] if spec.decoder else dims["hidden"])
        cache = cache_bytes(dims, dtype) if scenario == "decode" else 0
        return passes * params + cache + out * element_size(dtype) + 8 * _tokens(dims)

    return min_bytes


def _flops(spec: ModelSpec, scenario: str):  # noqa: ANN202 - a Workload.flops
    def flops(dims: Dims) -> int:
        matmul = 2 * _counts(spec, scenario, dims)["matmul_params"] * _tokens(dims)
        if scenario == "decode":
            attention = 4 * dims["layers"] * dims["batch"] * dims["context"] * dims["hidden"]
        else:
            causal = 2 if spec.decoder else 1
            seq = dims["seq"]
            attention = 4 * dims["layers"] * dims["batch"] * seq * seq * dims["hidden"] // causal
        return (3 if scenario == "train" else 1) * (matmul + attention)

    return flops


def model_workload(spec: ModelSpec, scenario: str) -> Workload:
    """The `Workload` of one model in one scenario (shape label: the scenario; decode is
    launch-bound, so its launch-inclusive time is measured too)."""
    tiny = scenario == "decode"
    return Workload(
        name=spec.name,
        computation=f"{spec.name} {scenario}",
        shapes=(Shape(scenario, {**spec.full, **scenario_dims(spec, scenario, False)}, tiny),),
        quick_shape=Shape(scenario, {**spec.quick, **scenario_dims(spec, scenario, True)}, tiny),
        make_model=_make_model(spec, scenario),
        make_inputs=_make_inputs(spec, scenario),
        min_bytes=_min_bytes(spec, scenario),
        flops=_flops(spec, scenario),
        reference_dtype=torch.float32,
        training=scenario == "train",
        sanity_rel_l2=MODEL_SANITY_REL_L2,
    )


def model_instances() -> list[tuple[Workload, str]]:
    """Every (workload, scenario) row of the suite, by model, then scenario."""
    return [
        (model_workload(spec, scenario), scenario)
        for spec in MODELS
        for scenario in SCENARIOS
        if scenario != "decode" or spec.decoder
    ]


def select_models(only: list[str]) -> list[Workload]:
    """The rows ``--only`` names (``MODEL`` or ``MODEL:SCENARIO``; empty: all).

    Raises ValueError naming the unknown entry and the valid names.
    """
    rows = model_instances()
    if not only:
        return [w for w, _ in rows]
    chosen: list[Workload] = []
    for entry in only:
        name, _, scenario = entry.partition(":")
        matches = [w for w, s in rows if w.name == name and scenario in ("", s)]
        if not matches:
            known = ", ".join(f"{w.name}:{s}" for w, s in rows)
            raise ValueError(f"unknown model row {entry!r}; known: {known}")
        chosen += [w for w in matches if w not in chosen]
    return chosen
