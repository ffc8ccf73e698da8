"""Shared parts of the standalone GPU benchmarks (`long_rows`, `transposes`): the copy
bandwidth their rooflines use, the provenance line of their reports, and the loop that
checks every system against float64 and times the correct ones into table rows."""

from __future__ import annotations

import os
import time

import torch

from benchmarks.timing import median_us, profile_kernels

TABLE_HEADER = [
    "| case | system | correct | median us | kernel us | kernels | % roofline (kernel) |",
    "|---|---|---|---|---|---|---|",
]
"""The Markdown header of the rows `check_and_time` returns."""


def copy_gbps(device: torch.device) -> float:
    """Device copy bandwidth (GB/s, read + write) on a 1 GiB buffer."""
    a = torch.empty(2**29, dtype=torch.float16, device=device)
    b = torch.empty_like(a)
    us = median_us(lambda: b.copy_(a), device)
    return 2 * a.numel() * a.element_size() / us / 1e3


def provenance(bandwidth_gbps: float) -> str:
    """One line: bandwidth, torch and Triton versions, UTC time and fuseopt commit
    (from FUSEOPT_GIT_COMMIT: the device copy of the tree has no .git)."""
    import triton

    return (
        f"copy bandwidth {bandwidth_gbps:.0f} GB/s; torch {torch.__version__}, "
        f"triton {triton.__version__}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"fuseopt commit {os.environ.get('FUSEOPT_GIT_COMMIT', 'unknown (set FUSEOPT_GIT_COMMIT)')}"
    )


def check_and_time(
    name: str,
    model: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    reference: torch.Tensor,
    roof_us: float,
    device: torch.device,
) -> tuple[list[str], bool]:
    """Table rows for eager, torch.compile and fuseopt (Triton, CUDA) running `model`
    (already in its benchmark dtype) on `inputs`: each system's maximum error against
    the float64 `reference` must be at most twice eager's, then it is timed (median and
    profiled kernel time, as a fraction of `roof_us`). Returns (rows, all correct);
    call under torch.no_grad()."""
    import fuseopt

    eager_err = (model(*inputs).float() - reference).abs().max().item()
    systems = {
        "eager": model,
        "torch.compile": torch.compile(model),
        "fuseopt-triton": fuseopt.compile(model, inputs, backend="triton"),
        "fuseopt-cuda": fuseopt.compile(model, inputs, backend="cuda"),
    }
    rows, ok = [], True
    for label, fn in systems.items():
        err = (fn(*inputs).float() - reference).abs().max().item()
        if err > 2 * eager_err + 1e-6:
            ok = False
            rows.append(f"| {name} | {label} | NO (max error {err:.3g}) | | | | |")
            continue
        us = median_us(lambda fn=fn: fn(*inputs), device)
        prof = profile_kernels(lambda fn=fn: fn(*inputs), device)
        k_us = prof.kernel_us if prof else float("nan")
        kernels = prof.kernels if prof else 0
        rows.append(
            f"| {name} | {label} | yes | {us:.1f} | {k_us:.1f} | {kernels} "
            f"| {100 * roof_us / k_us:.1f} |"
        )
    return rows, ok


def finish(lines: list[str], out: str | None, failed: bool) -> int:
    """Print the table `lines`, also write it to `out` when given; the exit status (1 if
    any system was wrong)."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)
    return 1 if failed else 0
