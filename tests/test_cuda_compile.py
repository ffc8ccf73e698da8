"""Every generated `.cu` compiles with `nvcc -arch=sm_90 -c` (skipped without nvcc).

Sources come from every workload of the workload suite at its benchmark shape (and a few
at a tiny shape: other tile sizes and masks), from matmuls in each operand staging
tile-promote can choose, and from random nn graphs (tests/random_nn_graphs.py). Identical translation units are compiled once; the rest
go to nvcc in a few batched invocations running in parallel, so the file stays
within a couple of minutes on two cores.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import fuseopt
from fuseopt.backends.cuda.backend import CudaBackend, tile_pipeline
from fuseopt.backends.cuda.printer import print_cuda
from fuseopt.backends.cuda.runtime import find_nvcc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from random_nn_graphs import RandomGraph, nn_graphs  # noqa: E402
from test_nn_fuse_workloads import WORKLOADS, gated_mlp, mlp  # noqa: E402

NVCC = find_nvcc()
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")

RANDOM_GRAPHS = 8
"""Random graphs whose kernels are compile-checked."""

TINY_TOO = ("softmax", "mlp", "rmsnorm_rope")
"""Workloads also checked at their tiny shape (ragged masks, other tile sizes)."""


def kernel_sources(text: str) -> dict[str, str]:
    """`.cu` file name -> source for every kernel of `@main` in `text`."""
    fn = CudaBackend().compile(fuseopt.parse(text), "main", {})
    return {k.file_name: k.source for k in fn.cuda_kernels}


def nvcc_failures(sources: list[str], workdir: Path, batches: int = 2) -> list[str]:
    """Compile each distinct source with `nvcc -arch=sm_90 -c`; return the failures
    (the file and nvcc's message)."""
    files = []
    for i, src in enumerate(dict.fromkeys(sources)):
        path = workdir / f"k{i}.cu"
        path.write_text(src)
        files.append(path)

    def run(group: list[Path]) -> tuple[int, str]:
        cmd = [NVCC, "-arch=sm_90", "-c", *(p.name for p in group)]
        r = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, check=False)
        return r.returncode, r.stderr

    groups = [files[i::batches] for i in range(batches) if files[i::batches]]
    with ThreadPoolExecutor(max_workers=len(groups) or 1) as pool:
        results = list(pool.map(run, groups))
    failures = []
    for group, (code, _) in zip(groups, results, strict=True):
        if code != 0:  # find the culprits one by one
            for p in group:
                one, err = run([p])
                if one != 0:
                    failures.append(f"{workdir / p.name}:\n{err[-3000:]}")
    return failures


def test_every_workload_kernel_compiles_for_sm90(tmp_path: Path) -> None:
    sources: list[str] = []
    for name, text, tiny, _groups in WORKLOADS:
        sources += kernel_sources(text).values()
        if name in TINY_TOO:
            sources += kernel_sources(tiny).values()
    assert len(sources) >= len(WORKLOADS)
    failures = nvcc_failures(sources, tmp_path)
    assert not failures, "\n\n".join(failures)


STAGINGS = (
    "tile-promote{num-stages=4}",
    "tile-promote{num-stages=2}",
    "tile-promote{num-stages=1}",
    "tile-promote{shared-bytes=0}",
)
"""tile-promote options giving the operand stagings the default pipeline does not
(4- and 2-stage cp.async pipelines, one synchronous stage, operands in registers)."""


def test_every_operand_staging_compiles_for_sm90(tmp_path: Path) -> None:
    sources: list[str] = []
    texts = [mlp(50, 72, 100), gated_mlp(32, 64, 48), mlp(50, 72, 100).replace("bf16", "f32")]
    for promote in STAGINGS:
        spec = tile_pipeline().rsplit(",tile-promote", 1)[0] + "," + promote
        for text in texts:
            module = fuseopt.run_pipeline(fuseopt.parse(text), spec)
            sources += [k.source for k in print_cuda(module) if k.schedule == "matmul"]
    assert len(sources) >= len(STAGINGS) * len(texts)
    failures = nvcc_failures(sources, tmp_path)
    assert not failures, "\n\n".join(failures)


def test_random_graph_kernels_compile_for_sm90(tmp_path: Path) -> None:
    sources: list[str] = []

    @settings(
        max_examples=RANDOM_GRAPHS,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(nn_graphs())
    def collect(graph: RandomGraph) -> None:
        sources.extend(kernel_sources(graph.text).values())

    collect()
    assert sources
    failures = nvcc_failures(sources, tmp_path)
    assert not failures, "\n\n".join(failures)
