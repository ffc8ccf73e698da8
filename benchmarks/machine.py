"""The machine under test: versions, and the two measured ceilings of the roofline.

The method of docs/performance.md: measure the copy bandwidth (a large device-to-device copy,
bytes read plus bytes written) and the bf16 matmul rate (8192^3) first, on the same
GPU in the same process, and use those, not datasheet numbers, as the roofline.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from benchmarks.timing import median_us

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Ceilings:
    """Measured copy bandwidth (bytes/s, read + write) and bf16 matmul rate (FLOP/s)."""

    copy_bytes_per_s: float
    copy_bytes: int
    matmul_flops_per_s: float
    matmul_size: int

    def as_dict(self) -> dict[str, float]:
        """JSON form, in the units tables use (GB/s and TFLOP/s) plus the raw sizes."""
        return {
            "copy_bandwidth_GBps": self.copy_bytes_per_s / 1e9,
            "copy_bytes": self.copy_bytes,
            "matmul_bf16_TFLOPs": self.matmul_flops_per_s / 1e12,
            "matmul_size": self.matmul_size,
        }


def _copy_us(nbytes: int, device: torch.device) -> float:
    src = torch.randn(nbytes // 2, device=device, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    return median_us(lambda: dst.copy_(src), device)


def _matmul_us(n: int, device: torch.device) -> float:
    a = torch.randn((n, n), device=device, dtype=torch.bfloat16)
    b = torch.randn((n, n), device=device, dtype=torch.bfloat16)
    return median_us(lambda: a @ b, device)


def measure_ceilings(device: torch.device, quick: bool) -> Ceilings:
    """Measure copy bandwidth and bf16 matmul throughput on `device`.

    Full runs copy 1 GiB and multiply 8192^3 on random data (never zeros: they run
    faster than real data); quick runs use small sizes and only exercise the code.
    """
    copy_bytes = (64 << 20) if quick else (1 << 30)
    n = 256 if quick else 8192
    copy_us = _copy_us(copy_bytes, device)
    mm_us = _matmul_us(n, device)
    return Ceilings(
        copy_bytes_per_s=2 * copy_bytes / (copy_us * 1e-6),
        copy_bytes=copy_bytes,
        matmul_flops_per_s=2 * n**3 / (mm_us * 1e-6),
        matmul_size=n,
    )


@dataclass(frozen=True)
class Environment:
    """What the numbers were measured on and with."""

    device_name: str
    device_slug: str
    driver: str
    cuda: str
    torch: str
    triton: str
    fuseopt: str
    fuseopt_commit: str
    python: str
    date_utc: str
    sm_count: int | None
    l2_bytes: int | None
    memory_bytes: int | None

    def as_dict(self) -> dict[str, object]:
        """JSON form."""
        return asdict(self)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


def _driver_version() -> str:
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        return done.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def _fuseopt_version() -> str:
    try:
        return importlib.metadata.version("fuseopt")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        import tomllib

        with open(REPO_ROOT / "pyproject.toml", "rb") as f:
            return str(tomllib.load(f)["project"]["version"]) + " (source tree)"
    except (ImportError, OSError, KeyError):
        return "unknown"


def fuseopt_commit() -> str:
    """The commit measured: FUSEOPT_GIT_COMMIT (the device copy has no .git), else git's."""
    if os.environ.get("FUSEOPT_GIT_COMMIT"):
        return os.environ["FUSEOPT_GIT_COMMIT"]
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        return done.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except ImportError:
        return "not installed"


def describe_environment(device: torch.device) -> Environment:
    """Collect the device name, driver, library versions and the date."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        name = props.name
        sm_count: int | None = props.multi_processor_count
        l2: int | None = getattr(props, "L2_cache_size", None)
        memory: int | None = props.total_memory
        driver = _driver_version()
    else:
        name = f"CPU {platform.machine()}"
        sm_count, l2, memory, driver = None, None, None, "n/a"
    return Environment(
        device_name=name,
        device_slug=_slug(name),
        driver=driver,
        cuda=str(torch.version.cuda),
        torch=torch.__version__,
        triton=_triton_version(),
        fuseopt=_fuseopt_version(),
        fuseopt_commit=fuseopt_commit(),
        python=platform.python_version(),
        date_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        sm_count=sm_count,
        l2_bytes=l2,
        memory_bytes=memory,
    )
