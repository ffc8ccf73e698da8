"""``python -m benchmarks.distributed``: DDP, FSDP2 and TP on the model suite's Llama.

Two ways to start it (docs/distributed.md):

- ``torchrun --nproc-per-node N -m benchmarks.distributed [...]``: torchrun starts the
  ranks; each joins the group torchrun describes;
- ``python -m benchmarks.distributed --world-size N [...]``: the script spawns N ranks
  itself (one GPU each; MASTER_ADDR 127.0.0.1, a free port).

On GPUs the group is NCCL with NVLink multicast off (NCCL_NVLS_ENABLE=0, set in every
rank); ``--quick`` runs a two-layer Llama of hidden 64 on CPU with gloo and fuseopt's
interpreter (timings not meaningful: it tests the plumbing). Rank 0 writes
``results.json`` and ``results.md`` into ``--out`` (default
``benchmarks/results/<device>/distributed/``), merged with what is there.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from benchmarks.distributed.launch import (
    NCCL_ENVIRONMENT,
    init_from_environment,
    launched_by_torchrun,
    spawn,
    unavailable_reason,
)
from benchmarks.distributed.measure import (
    QUICK_STEPS,
    QUICK_WARMUP,
    BenchConfig,
    make_systems,
    run_rank,
)
from benchmarks.distributed.parallel import STRATEGIES
from benchmarks.machine import REPO_ROOT, describe_environment
from benchmarks.suite import DTYPES, backends_from, fresh_compile_caches

TRANSFORMERS_MISSING = (
    "benchmarks.distributed: skipped: `transformers` is not installed "
    "(pip install -e '.[test]' installs it)"
)
"""What the script prints, and exits 0 with, when transformers is missing."""

WARMUP, STEPS = 3, 10
"""Warm-up and timed steps of a full run."""


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.distributed",
        description="DDP, FSDP2 and tensor parallelism on the model suite's Llama: step time "
        "and tokens/s for eager, torch.compile and fuseopt per backend.",
    )
    parser.add_argument(
        "--world-size",
        type=int,
        help="ranks to spawn (default 1; under torchrun: torchrun's, and must match if given)",
    )
    parser.add_argument(
        "--strategies", default=",".join(STRATEGIES), help="comma-separated: ddp,fsdp,tp"
    )
    parser.add_argument(
        "--backend",
        metavar="B[,B]",
        help="fuseopt backends (default: triton,cuda on GPUs, interpret on a CPU; 'none')",
    )
    parser.add_argument(
        "--systems",
        metavar="NAME[,NAME]",
        help="only these systems (eager always runs); also torch.compile(fuseopt-B)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny Llama on CPU (gloo)")
    parser.add_argument("--dtype", choices=tuple(DTYPES), help="default bf16 (quick: f32)")
    parser.add_argument("--warmup", type=int, help=f"warm-up steps (default {WARMUP})")
    parser.add_argument("--steps", type=int, help=f"timed steps (default {STEPS})")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights and batches")
    parser.add_argument("--out", type=Path, help="output directory")
    parser.add_argument(
        "--fresh", action="store_true", help="replace results.json instead of merging into it"
    )
    parser.add_argument(
        "--cpu-compile", action="store_true", help="include torch.compile on a CPU (slow)"
    )
    parser.add_argument(
        "--timeout-s", type=float, default=3600.0, help="stop spawned ranks after S seconds"
    )
    return parser


def _strategies(text: str) -> tuple[str, ...]:
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in names if s not in STRATEGIES]
    if unknown or not names:
        raise ValueError(f"unknown strategies {unknown}; known: {', '.join(STRATEGIES)}")
    return names


def _default_backends(device: torch.device) -> tuple[str, ...]:
    return ("triton", "cuda") if device.type == "cuda" else ("interpret",)


def make_config(args: argparse.Namespace, device: torch.device, argv: list[str]) -> BenchConfig:
    """The run's configuration from the arguments (ValueError for a bad one)."""
    if device.type != "cuda" and not args.quick:
        raise ValueError("full-size runs need GPUs; use --quick to test on a CPU (gloo)")
    slug = describe_environment(device).device_slug + ("-quick" if args.quick else "")
    out = args.out or REPO_ROOT / "benchmarks" / "results" / slug / "distributed"
    systems = tuple(s.strip() for s in args.systems.split(",")) if args.systems else None
    return BenchConfig(
        strategies=_strategies(args.strategies),
        backends=backends_from(args.backend, device, _default_backends),
        systems=systems,
        dtype=args.dtype or ("f32" if args.quick else "bf16"),
        quick=args.quick,
        seed=args.seed,
        warmup=args.warmup if args.warmup is not None else QUICK_WARMUP if args.quick else WARMUP,
        steps=args.steps if args.steps is not None else QUICK_STEPS if args.quick else STEPS,
        cpu_compile=args.cpu_compile,
        out=str(out),
        command=f"{_launcher()} -m benchmarks.distributed {' '.join(argv)}".strip(),
        merge=not args.fresh,
    )


def _launcher() -> str:
    """How this run was started, for the record's command line."""
    if launched_by_torchrun():
        return f"torchrun --nproc-per-node {os.environ.get('LOCAL_WORLD_SIZE', '?')}"
    return "python"


def _world_size(args: argparse.Namespace, device: torch.device) -> int:
    """The world size to spawn, checked against the GPUs there are."""
    world = 1 if args.world_size is None else args.world_size
    if world < 1:
        raise ValueError("--world-size must be at least 1")
    if device.type == "cuda" and world > torch.cuda.device_count():
        raise ValueError(f"--world-size {world}: only {torch.cuda.device_count()} GPU(s) here")
    return world


def _run_under_torchrun(
    args: argparse.Namespace, device: torch.device, config: BenchConfig
) -> None:
    """This process as one rank of the group torchrun started."""
    import torch.distributed as dist

    world = int(os.environ["WORLD_SIZE"])
    if args.world_size is not None and args.world_size != world:
        raise ValueError(f"--world-size {args.world_size} but torchrun started {world} ranks")
    where = init_from_environment(device.type)
    try:
        run_rank(where, config)
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.distributed``; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    try:
        import transformers  # noqa: F401 - only whether it is there
    except ImportError:
        print(TRANSFORMERS_MISSING)
        return 0
    device = torch.device("cpu" if args.quick or not torch.cuda.is_available() else "cuda")
    try:
        config = make_config(args, device, argv)
        make_systems(device, config)  # an unknown --systems name is an error here
        reason = unavailable_reason(device.type)
        if reason is not None:
            raise ValueError(f"no {device.type} process group here: {reason}")
        torchrun = launched_by_torchrun()
        world = None if torchrun else _world_size(args, device)
        if device.type == "cuda":
            os.environ.update(NCCL_ENVIRONMENT)  # spawned ranks inherit it too
        fresh_compile_caches()
        if world is None:
            _run_under_torchrun(args, device, config)
        else:
            spawn(run_rank, world, (config,), device.type, args.timeout_s)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if os.environ.get("RANK", "0") == "0":
        print(f"wrote {Path(config.out) / 'results.json'} and results.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
