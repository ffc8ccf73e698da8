"""Known GPUs for the cost model: datasheet figures by device name, as `GPUSpec`s.

`KNOWN_GPUS` holds each GPU's datasheet peaks (HBM bandwidth, dense 16-bit tensor-core
and FP32 throughput, SM count) and a pattern matching the name PyTorch reports for it
(`torch.cuda.get_device_name`: "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
"NVIDIA GeForce RTX 4090", ...). `known_gpu(name)` finds a name's entry and
`spec_of(sheet)` turns it into the cost model's `GPUSpec`.

A datasheet gives peaks, while the default model (`cost_model.H100`) holds what was
measured on an H100 SXM. `spec_of` scales each peak by the fraction of it the H100 SXM
reached (HBM 3.0 of 3.35 TB/s, bf16 GEMM 686 of 989 TFLOP/s, ...), so every GPU is
modelled the same way and the H100 SXM's entry gives `H100` itself. The rest of the
model (launch overheads, a generated GEMM's tile and efficiency, what one SM streams)
is the H100's for every GPU. Nothing here needs PyTorch: the caller reads the device's
name and SM count (`fuseopt.api` does, for `compiled.fusion_report()`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from fuseopt.passes.nn_fuse.cost_model import H100, GPUSpec


@dataclass(frozen=True)
class Datasheet:
    """A GPU's datasheet peaks, and the device names that denote it."""

    name: str
    pattern: str
    """A regular expression searched in the lower-cased device name."""
    hbm_gbps: float
    """Peak memory bandwidth, GB/s."""
    tflops_16bit: float
    """Dense bf16/f16 tensor-core TFLOP/s with f32 accumulation (PyTorch's GEMMs; f16
    on the V100 and T4, which have no bf16 tensor cores)."""
    tflops_32bit: float
    """FP32 TFLOP/s on the CUDA cores (no TF32)."""
    sm_count: int


H100_SXM = Datasheet(H100.name, r"h100(?!.*(pcie|nvl))", 3350, 989, 67, 132)
"""The GPU whose measured figures are the default model (`cost_model.H100`)."""

KNOWN_GPUS: tuple[Datasheet, ...] = (
    H100_SXM,
    Datasheet("H100 PCIe 80GB", r"h100.*pcie", 2000, 756, 51, 114),
    Datasheet("H100 NVL 94GB", r"h100.*nvl", 3900, 835, 60, 132),
    Datasheet("GH200 144GB HBM3e", r"gh200.*(144|hbm3e)", 4900, 989, 67, 132),
    Datasheet("GH200 96GB", r"gh200", 4000, 989, 67, 132),
    Datasheet("H200 NVL 141GB", r"h200.*nvl", 4800, 835, 60, 132),
    Datasheet("H200 SXM 141GB", r"h200", 4800, 989, 67, 132),
    Datasheet("A100 SXM4 80GB", r"a100.*sxm.*80", 2039, 312, 19.5, 108),
    Datasheet("A100 PCIe 80GB", r"a100.*80.*pcie|a100.*pcie.*80", 1935, 312, 19.5, 108),
    Datasheet("A100 40GB", r"a100", 1555, 312, 19.5, 108),
    Datasheet("L40S", r"\bl40s\b", 864, 362, 91.6, 142),
    Datasheet("L4", r"\bl4\b", 300, 121, 30.3, 58),
    Datasheet("A10", r"\ba10\b", 600, 125, 31.2, 72),
    Datasheet("GeForce RTX 4090", r"rtx 4090", 1008, 165, 82.6, 128),
    Datasheet("GeForce RTX 3090", r"rtx 3090(?! ti)", 936, 71, 35.6, 82),
    Datasheet("V100 SXM2", r"v100", 900, 125, 15.7, 80),
    Datasheet("T4", r"\bt4\b", 320, 65, 8.1, 40),
)
"""Datasheet figures of the GPUs the cost model knows by name, most specific first."""


def known_gpu(device_name: str) -> Datasheet | None:
    """The entry of KNOWN_GPUS whose pattern `device_name` matches (the first), if any."""
    name = device_name.lower()
    return next((g for g in KNOWN_GPUS if re.search(g.pattern, name)), None)


def spec_of(sheet: Datasheet, sm_count: int | None = None) -> GPUSpec:
    """The cost model of the GPU of `sheet`: its peaks at the fractions the H100 SXM
    reached (see the module docstring), with `sm_count` (the device's own, when known)
    in place of the datasheet's."""
    return replace(
        H100,
        name=sheet.name,
        hbm_bytes_per_s=H100.hbm_bytes_per_s * (sheet.hbm_gbps / H100_SXM.hbm_gbps),
        matmul_flops_per_s_16bit=H100.matmul_flops_per_s_16bit
        * (sheet.tflops_16bit / H100_SXM.tflops_16bit),
        matmul_flops_per_s_32bit=H100.matmul_flops_per_s_32bit
        * (sheet.tflops_32bit / H100_SXM.tflops_32bit),
        vector_flops_per_s=H100.vector_flops_per_s * (sheet.tflops_32bit / H100_SXM.tflops_32bit),
        sm_count=sm_count or sheet.sm_count,
    )
