"""One rank of the distributed benchmark: every (strategy, system) cell, in step with the rest.

Every rank runs the same cells in the same order. A cell builds the model afresh (the
same weights on every rank, from the seed), spreads it by its strategy
(`benchmarks.distributed.parallel`), hands the spread module to a system of
`benchmarks.systems` (eager, torch.compile, fuseopt per backend: the single-GPU suites'
own), runs the first step (compile time: the system's compile and first call plus that
step, which compiles the backward), checks the step's output (the loss; TP: the logits)
against eager's, and times the correct ones:

- ``W`` warm-up steps, then ``N`` timed steps; before each, the device is synchronized
  and the ranks meet at a barrier, so a step starts together everywhere and its time
  (wall clock to the next synchronize) is what the group took;
- a rank's median over its ``N`` steps; the cell's step time is the slowest rank's
  median (a step is done when every rank is), tokens/s follow from it (DDP and FSDP2:
  every rank's batch; TP: the one batch all ranks share).

A training step is forward with labels, backward and AdamW (`benchmarks.models.hf`'s
learning rate); a prefill is a forward over the prompt. The ranks agree on every
outcome (`all_gather_object`): a system that fails or is wrong in any rank is FAILED
in all and none of them times it, so they stay in step. A failure in one rank in the
middle of a collective can still stop the run; rank 0 writes the results after every
cell (`benchmarks.distributed.report`), so the cells before it are kept.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from benchmarks.accuracy import EAGER_SANITY, compare
from benchmarks.distributed import build_llama, llama_dims
from benchmarks.distributed.launch import Rank
from benchmarks.distributed.parallel import (
    TRAINING,
    data_parallel,
    decoder_layers,
    fully_sharded,
    tensor_parallel,
)
from benchmarks.models.hf import ADAMW_LR, LossOf, Prefill, tokens
from benchmarks.suite import DTYPES
from benchmarks.systems import (
    TORCH_COMPILE,
    Eager,
    Fuseopt,
    FuseoptDynamo,
    System,
    SystemUnavailable,
    TorchCompile,
)
from benchmarks.timing import synchronize
from benchmarks.workloads import Dims

QUICK_WARMUP, QUICK_STEPS = 1, 3
"""Steps of a --quick run (CPU: only the plumbing is tested)."""


@dataclass(frozen=True)
class BenchConfig:
    """What every rank runs: strategies, systems, sizes and the timing loop."""

    strategies: tuple[str, ...]
    backends: tuple[str, ...]
    systems: tuple[str, ...] | None
    dtype: str
    quick: bool
    seed: int
    warmup: int
    steps: int
    cpu_compile: bool
    out: str
    command: str
    merge: bool = True

    @property
    def torch_dtype(self) -> torch.dtype:
        """The model's dtype."""
        return DTYPES[self.dtype]


def make_systems(device: torch.device, config: BenchConfig) -> list[System]:
    """Eager, torch.compile (default mode) and fuseopt.compile per backend; `systems`
    also picks from fuseopt through ``torch.compile(backend="fuseopt")`` (eager always
    runs: it is the reference)."""
    fuseopt = [Fuseopt(backend, None) for backend in config.backends]
    default: list[System] = [
        Eager(),
        TorchCompile(TORCH_COMPILE, None, "torch.compile (default mode)", config.cpu_compile),
        *fuseopt,
    ]
    if config.systems is None:
        return default
    every = default + [FuseoptDynamo(s.backend, None) for s in fuseopt]
    known = {s.name for s in every}
    unknown = set(config.systems) - known
    if unknown:
        raise ValueError(f"unknown system(s) {sorted(unknown)}; known: {sorted(known)}")
    return [s for s in every if s.name in config.systems or s.name == "eager"]


@dataclass
class Cell:
    """One strategy's spread model, ready for a system: the module it compiles, its
    inputs, the parameters the optimizer steps and the tokens one step processes."""

    module: nn.Module
    inputs: tuple[torch.Tensor, ...]
    training: bool
    tokens: int
    params: list[nn.Parameter] = field(default_factory=list)


def strategy_dims(strategy: str, quick: bool) -> Dims:
    """The model and batch sizes of a strategy's scenario (training or prefill)."""
    return llama_dims(quick, TRAINING[strategy])


def strategy_unavailable(strategy: str, dims: Dims, world_size: int) -> str | None:
    """Why a strategy cannot run at this world size (TP splits heads), else None."""
    if strategy == "tp" and (dims["heads"] % world_size or dims["kv_heads"] % world_size):
        return (
            f"n/a (tensor parallelism splits {dims['heads']} query / {dims['kv_heads']} "
            f"key-value heads: world size {world_size} does not divide them)"
        )
    return None


def build_cell(strategy: str, where: Rank, config: BenchConfig) -> Cell:
    """A fresh Llama (the same weights on every rank) spread by `strategy`; a training
    batch of this rank's own (DDP, FSDP2) or the prompt all ranks share (TP)."""
    dims = strategy_dims(strategy, config.quick)
    training = TRAINING[strategy]
    model = build_llama(dims, training, config.torch_dtype, where.device, config.seed)
    shape = (dims["batch"], dims["seq"])
    if strategy == "tp":
        tensor_parallel(decoder_layers(model), where.device, where.world_size)
        prompt = tokens(dims["vocab"], shape, where.device, config.seed + 1)
        return Cell(Prefill(model, decoder=True), (prompt,), False, shape[0] * shape[1])
    seed = config.seed + 10 * (where.rank + 1)
    batch = (
        tokens(dims["vocab"], shape, where.device, seed),
        tokens(dims["vocab"], shape, where.device, seed + 1),
    )
    loss = LossOf(model)
    module = (
        data_parallel(loss, where.device)
        if strategy == "ddp"
        else fully_sharded(loss, decoder_layers(model))
    )
    params = [p for p in model.parameters() if p.requires_grad]
    return Cell(module, batch, True, where.world_size * shape[0] * shape[1], params)


def make_step(fn: Callable[..., Any], cell: Cell) -> Callable[[], torch.Tensor]:
    """One step through `fn`: a prefill, or forward, backward and AdamW (returns the
    logits or the loss)."""
    if not cell.training:
        return lambda: fn(*cell.inputs)
    optimizer = torch.optim.AdamW(cell.params, lr=ADAMW_LR)

    def step() -> torch.Tensor:
        loss = fn(*cell.inputs)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def agree(value: Any, world_size: int) -> list[Any]:
    """Every rank's `value`, in rank order, on every rank."""
    values: list[Any] = [None] * world_size
    dist.all_gather_object(values, value)
    return values


def step_times_ms(step: Callable[[], Any], device: torch.device, warmup: int, steps: int):
    """Milliseconds of each of `steps` steps after `warmup` untimed ones; every step
    starts synchronized and after a barrier of all ranks."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        synchronize(device)
        dist.barrier()
        synchronize(device)
        start = time.perf_counter()
        step()
        synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def _first_line(exc: BaseException) -> str:
    inner = getattr(exc, "inner_exception", None)
    exc = inner if isinstance(inner, BaseException) else exc
    lines = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:300]


@contextlib.contextmanager
def _released(device: torch.device) -> Iterator[None]:
    """Free the cell's models, compiled graphs and cached memory when it ends."""
    try:
        yield
    finally:
        torch._dynamo.reset()
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


@dataclass
class Compiled:
    """A system's first step on a cell: the step, its output and what compiling cost."""

    step: Callable[[], torch.Tensor]
    output: torch.Tensor
    compile_s: float | None
    kernels: int | None
    fallback_ops: int | None


def compile_first_step(system: System, cell: Cell, device: torch.device) -> Compiled:
    """Prepare `system` on the cell and run its first step (the compile time covers
    both: a training step compiles its backward in the first backward)."""
    prepared = system.prepare(cell.module, lambda: cell.inputs)
    step = make_step(prepared.fn, cell)
    synchronize(device)
    start = time.perf_counter()
    output = step()
    synchronize(device)
    first_s = time.perf_counter() - start
    compile_s = None if prepared.compile_cold_s is None else prepared.compile_cold_s + first_s
    return Compiled(step, output, compile_s, prepared.kernels, prepared.fallback_ops)


def _outcome(compiled: Compiled | None, reference: torch.Tensor | None, bound: float):
    """This rank's verdict: (status, reason, rel_l2 against eager's output)."""
    if compiled is None:
        return "FAILED", None, None
    if reference is None:  # eager: the reference itself
        return "ok", None, None
    error = compare(compiled.output.float(), reference.double()).rel_l2
    if not error <= bound:
        return "FAILED", f"output differs from eager: rel_l2 {error:.2e} > {bound:.0e}", error
    return "ok", None, error


def _worst(errors: list[float | None]) -> float | None:
    """The largest of the ranks' errors (None for eager, the reference)."""
    known = [e for e in errors if e is not None]
    return max(known) if known else None


def run_cell(
    where: Rank, strategy: str, system: System, config: BenchConfig, reference: dict
) -> dict[str, Any]:
    """One (strategy, system) cell on this rank, in step with the others; returns its
    row (the same on every rank). Eager's first output becomes `reference[strategy]`."""
    dims = strategy_dims(strategy, config.quick)
    row: dict[str, Any] = {
        "world_size": where.world_size,
        "strategy": strategy,
        "scenario": "train" if TRAINING[strategy] else "prefill",
        "system": system.name,
        "description": system.description,
        "dims": dims,
    }
    reason = strategy_unavailable(strategy, dims, where.world_size) or system.availability(
        where.device, config.quick
    )
    if reason is not None:
        status = "skipped" if reason.startswith("skipped") else "n/a"
        return {**row, "status": status, "reason": reason}
    with _released(where.device), torch.set_grad_enabled(TRAINING[strategy]):
        return {**row, **_measure(where, strategy, system, config, reference)}


def _measure(
    where: Rank, strategy: str, system: System, config: BenchConfig, reference: dict
) -> dict[str, Any]:
    cell = build_cell(strategy, where, config)
    try:
        compiled: Compiled | None = compile_first_step(system, cell, where.device)
        failure = None
    except SystemUnavailable as exc:
        compiled, failure = None, f"n/a ({exc})"
    except Exception as exc:  # recorded as FAILED, never timed
        compiled, failure = None, _first_line(exc)
    bound = EAGER_SANITY[config.torch_dtype]
    status, reason, error = _outcome(compiled, reference.get(strategy), bound)
    verdicts = agree((status, failure or reason, error), where.world_size)
    failed = [(rank, why) for rank, (s, why, _) in enumerate(verdicts) if s != "ok"]
    if failed:
        rank, why = failed[0]
        na = all(str(w).startswith("n/a") for _, w in failed)
        return {"status": "n/a" if na else "FAILED", "reason": f"rank {rank}: {why}"}
    assert compiled is not None
    if system.name == "eager":
        reference[strategy] = compiled.output.detach().clone()
    times = step_times_ms(compiled.step, where.device, config.warmup, config.steps)
    medians = [statistics.median(t) for t in agree(times, where.world_size)]
    step_ms = max(medians)
    return {
        "status": "ok",
        "step_ms": step_ms,
        "rank_step_ms": medians,
        "tokens_per_s": cell.tokens / (step_ms * 1e-3),
        "tokens_per_step": cell.tokens,
        "compile_s": compiled.compile_s,
        "error_vs_eager_rel_l2": _worst([e for _, _, e in verdicts]),
        "kernels": compiled.kernels,
        "fallback_ops": compiled.fallback_ops,
    }


def run_rank(where: Rank, config: BenchConfig) -> list[dict[str, Any]]:
    """This rank's part of the whole run: every strategy with every system (eager first,
    the reference); rank 0 writes the results after each cell. Returns the rows."""
    from benchmarks.distributed import report

    systems = make_systems(where.device, config)
    writer = report.Writer(where, config) if where.leader else None
    reference: dict[str, torch.Tensor] = {}
    rows = []
    for strategy in config.strategies:
        for system in systems:
            row = run_cell(where, strategy, system, config, reference)
            rows.append(row)
            if writer is not None:
                writer.add(row)
                print(report.progress_line(row), flush=True)
    return rows
