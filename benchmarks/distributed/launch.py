"""Process groups for the distributed benchmark and tests: torchrun's, or our own spawn.

`spawn` starts one process per rank with `torch.multiprocessing` (MASTER_ADDR
127.0.0.1, a free port), initializes the process group in each (gloo on a CPU, NCCL on
GPUs, one GPU per rank), runs a function there and returns every rank's result. A rank
that raises fails the whole call with that rank's traceback (PyTorch's
`ProcessRaisedException`); a run past its deadline is stopped and raises TimeoutError,
so a hung collective never hangs the caller. Under ``torchrun`` the process group comes
from the environment instead (`init_from_environment`).

NCCL runs keep NVLink multicast off: `NCCL_ENVIRONMENT` (NCCL_NVLS_ENABLE=0, and the same
switch for PyTorch's symmetric memory and NVSHMEM) is set in every rank's environment
before its process group exists: on shared multi-GPU hosts a program using multicast can
take the host's GPUs out of service.
"""

from __future__ import annotations

import datetime
import os
import pickle
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

LOCALHOST = "127.0.0.1"
"""Where a spawned group meets (MASTER_ADDR)."""

NCCL_ENVIRONMENT = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
"""Set in every NCCL rank's environment (and by the benchmark before it spawns ranks):
NVLink multicast stays off."""

COLLECTIVE_TIMEOUT_S = 120.0
"""How long a collective waits for its peers before it fails (a rank that died)."""


@dataclass(frozen=True)
class Rank:
    """This process's place in the group and the device it computes on."""

    rank: int
    world_size: int
    device: torch.device

    @property
    def leader(self) -> bool:
        """Whether this is rank 0 (the one that prints and writes)."""
        return self.rank == 0


def unavailable_reason(device_type: str) -> str | None:
    """None when a process group can be made for `device_type` here, else why not."""
    if not dist.is_available():
        return "torch.distributed is not available in this PyTorch build"
    if device_type == "cuda":
        if not torch.cuda.is_available():
            return "no CUDA device"
        return None if dist.is_nccl_available() else "NCCL is not available"
    return None if dist.is_gloo_available() else "the gloo backend is not available"


def free_port() -> int:
    """A TCP port free on this machine now (the spawned group's MASTER_PORT)."""
    with socket.socket() as sock:
        sock.bind((LOCALHOST, 0))
        return int(sock.getsockname()[1])


def init_process_group(
    rank: int, world_size: int, device_type: str, timeout_s: float = COLLECTIVE_TIMEOUT_S
) -> Rank:
    """Join the group (MASTER_ADDR/MASTER_PORT from the environment): gloo on a CPU; NCCL
    with one GPU per rank (local rank modulo the GPUs) and NVLink multicast off."""
    timeout = datetime.timedelta(seconds=timeout_s)
    if device_type != "cuda":
        dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timeout)
        return Rank(rank, world_size, torch.device("cpu"))
    os.environ.update(NCCL_ENVIRONMENT)
    local = int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count()
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl", rank=rank, world_size=world_size, timeout=timeout, device_id=device
    )
    return Rank(rank, world_size, device)


def launched_by_torchrun() -> bool:
    """Whether torchrun (or another launcher) set this process's rank in the environment."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def init_from_environment(device_type: str) -> Rank:
    """Join the group torchrun describes in the environment (RANK, WORLD_SIZE, ...)."""
    return init_process_group(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), device_type)


def _rank_main(
    rank: int,
    fn: Callable[..., Any],
    world_size: int,
    port: int,
    device_type: str,
    collective_timeout_s: float,
    results: str,
    args: tuple[Any, ...],
) -> None:
    """One spawned rank: join the group, run ``fn(rank, *args)``, pickle its result."""
    os.environ.update(
        MASTER_ADDR=LOCALHOST,
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
    )
    where = init_process_group(rank, world_size, device_type, collective_timeout_s)
    try:
        result = fn(where, *args)
    finally:
        dist.destroy_process_group()
    with open(Path(results) / f"rank{rank}.pkl", "wb") as f:
        pickle.dump(result, f)


def spawn(
    fn: Callable[..., Any],
    world_size: int,
    args: tuple[Any, ...] = (),
    device_type: str = "cpu",
    timeout_s: float = 600.0,
    collective_timeout_s: float = COLLECTIVE_TIMEOUT_S,
) -> list[Any]:
    """Run ``fn(rank: Rank, *args)`` in `world_size` new processes, one group; returns the
    ranks' results (picklable) in rank order.

    `fn` must be importable by name (a module-level function). A rank that raises makes
    this raise `torch.multiprocessing.ProcessRaisedException` carrying that rank's
    traceback; past `timeout_s` the ranks are killed and TimeoutError is raised. A
    collective waits `collective_timeout_s` for its peers before it fails.
    """
    import torch.multiprocessing as mp

    reason = unavailable_reason(device_type)
    if reason is not None:
        raise RuntimeError(f"cannot start a {device_type} process group: {reason}")
    with tempfile.TemporaryDirectory(prefix="fuseopt-dist-") as results:
        context = mp.start_processes(
            _rank_main,
            args=(fn, world_size, free_port(), device_type, collective_timeout_s, results, args),
            nprocs=world_size,
            join=False,
            start_method="spawn",
        )
        _join(context, time.monotonic() + timeout_s, timeout_s)
        return [_load(Path(results) / f"rank{rank}.pkl") for rank in range(world_size)]


def _join(context: Any, deadline: float, timeout_s: float) -> None:
    """Wait for every rank (re-raising a rank's failure); kill them all past `deadline`."""
    while not context.join(timeout=max(0.0, min(5.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            for process in context.processes:
                if process.is_alive():
                    process.kill()
            raise TimeoutError(f"the distributed run did not finish in {timeout_s:g} s")


def _load(path: Path) -> Any:
    with open(path, "rb") as f:
        return pickle.load(f)
