"""A batch-size sweep through a compiled transformer block: compiles and time per size.

    python -m benchmarks.batch_sweep [--batches 1-64] [--hidden 1024] [--seq 128]
        [--seqs 128,256] [--time-at 1,7,32,64] [--systems ...] [--out FILE]

A pre-norm transformer block (LayerNorm, fused QKV, causal SDPA, output projection,
RMSNorm, SiLU MLP; bf16 on the GPU) is called at every batch size of `--batches` in
order, as a serving loop meets them, by each system: eager; `torch.compile` (default:
dynamic=None); fuseopt-triton (default: a graph of one symbolic size is compiled once for
every size); fuseopt-triton with symbolic="specialize" (compiled per size, what fuseopt
did before); `torch.compile dynamic` and `fuseopt-triton dynamic` pass dynamic=True
(every size symbolic from the first call). `--seqs` sweeps the batches at each of
several sequence lengths in turn (batch and sequence length both change). Reported per
system: the sweep's wall time (compiles included), how many
graphs Dynamo compiled, how many regions fuseopt compiled, the ops run in PyTorch, the
largest error against eager over the sweep (a difference past the bf16 tolerance fails
the run), then at each `--time-at` batch the warm wall time per call (back-to-back calls,
one synchronize) and the kernel time (do_bench median). Needs a CUDA GPU; `--device cpu`
runs tiny sizes through Triton's interpreter (a check, not a measurement).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.machine import describe_environment
from benchmarks.timing import launch_inclusive_us, median_us, synchronize


class Block(nn.Module):
    """A pre-norm transformer block (see the module docstring)."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv, self.o = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.n1, self.n2 = nn.LayerNorm(hidden), nn.RMSNorm(hidden)
        self.up, self.down = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = (
            t.view(b, s, self.heads, -1).transpose(1, 2)
            for t in self.qkv(self.n1(x)).split(d, dim=-1)
        )
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.silu(self.up(self.n2(x))))


SYSTEMS = (
    "eager",
    "torch.compile",
    "fuseopt-triton",
    "fuseopt-triton-specialize",
    "torch.compile dynamic",
    "fuseopt-triton dynamic",
)


def _system(name: str, model: nn.Module) -> tuple[Any, Any]:
    """(callable, fuseopt CompiledModule or None) for system `name`."""
    import fuseopt

    torch._dynamo.reset()
    if name == "eager":
        return model, None
    dynamic = True if name.endswith(" dynamic") else None
    if name.startswith("torch.compile"):
        return torch.compile(model, dynamic=dynamic), None
    options = {"symbolic": "specialize"} if name.endswith("specialize") else {}
    compiled = fuseopt.compile(model, backend="triton", dynamic=dynamic, **options)
    return compiled, compiled


def _batches(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(b) for b in text.split(",")]


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Sweep every system; returns the JSON record."""
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    model = Block(args.hidden, args.heads).to(device, dtype).eval()
    batches, time_at = _batches(args.batches), _batches(args.time_at)
    seqs = _batches(args.seqs) if args.seqs else [args.seq]
    shapes = [(b, s) for s in seqs for b in batches]
    inputs = {
        shape: torch.randn(*shape, args.hidden, device=device, dtype=dtype)
        for shape in {*shapes, *((b, seqs[0]) for b in time_at)}
    }
    with torch.no_grad():
        expected = {b: model(x) for b, x in inputs.items()}
    tolerance = 5e-2 if dtype == torch.bfloat16 else 1e-3
    rows = []
    for name in args.systems.split(","):
        fn, record = _system(name, model)
        counters = torch._dynamo.utils.counters
        counters.clear()
        error = 0.0
        start = time.perf_counter()
        with torch.no_grad():
            for shape in shapes:
                y = fn(inputs[shape])
                error = max(error, (y.float() - expected[shape].float()).abs().max().item())
            synchronize(device)
        sweep_s = time.perf_counter() - start
        if error > tolerance * max(1.0, max(e.abs().max().item() for e in expected.values())):
            raise SystemExit(f"{name}: largest error {error} past the tolerance")
        row: dict[str, Any] = {
            "system": name,
            "sweep_s": round(sweep_s, 2),
            "dynamo_graphs": int(counters["stats"]["unique_graphs"]),
            "max_abs_error": error,
        }
        if record is not None:
            row["fuseopt_graphs"] = len(record.record.graphs)
            row["fuseopt_regions"] = len(record.record.regions)
            row["eager_ops"] = sorted({f"{f.target}: {f.reason}" for f in record.fallbacks})
        with torch.no_grad():
            for b in time_at:
                call = functools.partial(fn, inputs[b, seqs[0]])
                row[f"wall_us@{b}"] = round(launch_inclusive_us(call, device), 1)
                row[f"kernel_us@{b}"] = round(median_us(call, device), 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return {
        "benchmark": "batch_sweep",
        "command": " ".join(["python -m benchmarks.batch_sweep", *sys.argv[1:]]),
        "environment": describe_environment(device).as_dict(),
        "model": {"hidden": args.hidden, "heads": args.heads, "seq": seqs[0], "dtype": str(dtype)},
        "batches": batches,
        "seqs": seqs,
        "rows": rows,
    }


def table(record: dict[str, Any]) -> str:
    """The record as a markdown table."""
    rows = record["rows"]
    timed = [k for k in rows[0] if k.startswith(("wall_us@", "kernel_us@"))]
    head = ["system", "sweep_s", "dynamo_graphs", "fuseopt_graphs", "fuseopt_regions", *timed]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(k, "")) for k in head) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", default="1-64")
    p.add_argument("--time-at", default="1,7,32,64")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--seqs", default="", help="sequence lengths to sweep (default: --seq)")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    record = run(args)
    print(table(record))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2))
        args.out.with_suffix(".md").write_text(
            f"`{record['command']}`\n\n{json.dumps(record['environment'])}\n\n{table(record)}\n"
        )


if __name__ == "__main__":
    main()
