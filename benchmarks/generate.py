"""Greedy `generate` with a growing KV cache: compile counts, cold and warm time, tokens.

    python -m benchmarks.generate [--models llama,qwen2] [--tokens 64] [--batch 1]
        [--prompt 128] [--systems eager,torch.compile,fuseopt-triton] [--repeats 1]
        [--out FILE]
    python -m benchmarks.generate --quick    # tiny sizes, on this machine (CPU)

For each decoder of the model suite (`benchmarks.models`, random weights from configs)
and each system, runs Hugging Face `generate` of `--tokens` new tokens (greedy, no early
stop) on one prompt: the first call compiles (its time is the compile cost a user waits
for), then `--repeats` warm calls (the median's time over the tokens is the per-token
latency; the prefill is inside it). The KV cache grows by one position per token, so a compiler
without symbolic sizes would compile once per token. Reported per system: how many
graphs Dynamo compiled, how many regions and kernels fuseopt compiled, the ops it ran
in PyTorch (and why), and whether the tokens equal eager's. A compiled system compiles
the model's forward (`fuseopt.compile(model).generate(...)`, and `torch.compile` of
`model.forward` with the same `dynamic`), as a user would.

The token check is exact: with random weights in bf16 the logits of different tokens can
lie within one rounding of each other, so a system whose rounding differs from eager's
may pick another token; `--dtype float32` makes the check strict. The JSON record has
the environment (GPU, versions, date, commit) and the command.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.machine import describe_environment
from benchmarks.timing import synchronize

DECODERS = ("llama", "qwen2", "mistral", "gpt2")
"""Model-suite families with a KV cache."""

SYSTEMS = (
    "eager",
    "torch.compile",
    "torch.compile dynamic",
    "fuseopt-triton",
    "fuseopt-triton dynamic",
    "fuseopt-triton partition",
    "fuseopt-cuda",
    "fuseopt-cuda partition",
    "torch.compile reduce-overhead",
    "fuseopt-triton reduce-overhead",
    "fuseopt-cuda reduce-overhead",
)
"""What can be compared: `dynamic` passes dynamic=True (sizes symbolic from the start);
`partition` passes symbolic="partition" (a decode step's symbolic-size ops run in
PyTorch, the rest compiled once: the default before decode steps compiled in versions,
on the CUDA backend until its kernels took sizes at run time); `reduce-overhead` passes
that mode (CUDA graphs; a decode step meets each cache length once)."""


def dims_of(family: str, quick: bool) -> dict[str, int]:
    """The model suite's sizes for `family` (quick: its tiny ones)."""
    from benchmarks.models import MODELS

    spec = next(m for m in MODELS if m.name == family)
    return dict(spec.quick if quick else spec.full)


class GraphCounter:
    """Counts the graphs Dynamo hands to compilers (its `unique_graphs` counter)."""

    def __enter__(self) -> GraphCounter:
        from torch._dynamo.utils import counters

        self.start = counters["stats"]["unique_graphs"]
        self.count = 0
        return self

    def __exit__(self, *exc: object) -> None:
        from torch._dynamo.utils import counters

        self.count = counters["stats"]["unique_graphs"] - self.start


def make_generate(name: str, model: torch.nn.Module) -> tuple[Callable[..., Any], Any]:
    """The `generate` callable of a system, and the fuseopt CompiledModule (or None)."""
    import fuseopt

    dynamic = True if name.endswith(" dynamic") else None
    mode = "reduce-overhead" if name.endswith(" reduce-overhead") else None
    base = name.removesuffix(" dynamic").removesuffix(" reduce-overhead")
    if base == "eager":
        return model.generate, None
    if base == "torch.compile":
        compiled_forward = torch.compile(model.forward, dynamic=dynamic, mode=mode)

        def generate(*args: Any, **kwargs: Any) -> Any:
            original = model.forward
            model.forward = compiled_forward
            try:
                return model.generate(*args, **kwargs)
            finally:
                model.forward = original

        return generate, None
    options = {"symbolic": "partition"} if base.endswith(" partition") else {}
    backend = base.removesuffix(" partition").removeprefix("fuseopt-")
    compiled = fuseopt.compile(model, backend=backend, dynamic=dynamic, mode=mode, **options)
    return compiled.generate, compiled


def timed(fn: Callable[[], Any], device: torch.device) -> tuple[Any, float]:
    """`fn()` and its wall time in seconds (synchronized on a GPU)."""
    synchronize(device)
    start = time.perf_counter()
    out = fn()
    synchronize(device)
    return out, time.perf_counter() - start


def run_system(
    name: str,
    model: torch.nn.Module,
    ids: torch.Tensor,
    tokens: int,
    expected: torch.Tensor,
    repeats: int = 1,
) -> dict[str, Any]:
    """One system's row: compile counts, cold and warm wall time (the median of
    `repeats` warm calls), token agreement."""
    import torch._dynamo

    torch._dynamo.reset()
    row: dict[str, Any] = {"system": name}
    try:
        generate, compiled = make_generate(name, model)

        def call() -> Any:
            with torch.no_grad():
                return generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)

        with GraphCounter() as graphs:
            first, cold_s = timed(call, ids.device)
            warm = [timed(call, ids.device) for _ in range(max(1, repeats))]
            warm_times = sorted(t for _, t in warm)
            warm_s = statistics.median(warm_times)
            outputs = [out for out, _ in warm]
    except Exception as exc:  # a failing system is a row, not the end of the run
        row["error"] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
        return row
    row.update(
        cold_s=round(cold_s, 3),
        warm_s=round(warm_s, 4),
        warm_ms_per_token=round(1e3 * warm_s / tokens, 3),
        warm_ms_per_token_all=[round(1e3 * t / tokens, 3) for t in warm_times],
        dynamo_graphs=graphs.count,
        tokens_equal_eager=all(torch.equal(out, expected) for out in [first, *outputs]),
    )
    if not row["tokens_equal_eager"]:
        wrong = next(out for out in [first, *outputs] if not torch.equal(out, expected))
        differs = (wrong != expected).nonzero()
        row["first_differing_position"] = int(differs[0, -1]) if len(differs) else None
    if compiled is not None:
        record = compiled.record
        row["fuseopt_graphs"] = len(record.graphs)
        row["fuseopt_regions"] = len(record.regions)
        row["fuseopt_kernels"] = len(record.kernels)
        reasons: dict[str, int] = {}
        for f in record.fallbacks:
            key = f"{f.target}: {f.reason}"
            reasons[key] = reasons.get(key, 0) + 1
        row["fallbacks"] = reasons
    return row


def build_parser() -> argparse.ArgumentParser:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.generate", description=__doc__)
    parser.add_argument("--models", default="llama,qwen2", help="decoders, comma-separated")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="systems, comma-separated")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per generate")
    parser.add_argument("--batch", type=int, default=1, help="prompts per generate")
    parser.add_argument("--prompt", type=int, default=128, help="prompt length")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--repeats", type=int, default=1, help="warm calls (the median)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (runs on a CPU)")
    parser.add_argument("--out", type=Path, help="JSON file for the record")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    try:
        import transformers  # noqa: F401 - only whether it is there
    except ImportError:
        print("transformers is not installed: nothing to run")
        return 0
    from benchmarks.models import hf

    families = [f for f in args.models.split(",") if f]
    systems = [s for s in args.systems.split(",") if s]
    bad = [f for f in families if f not in DECODERS] + [s for s in systems if s not in SYSTEMS]
    if bad:
        print(f"error: unknown model or system: {', '.join(bad)}", file=sys.stderr)
        return 2
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        systems = [s for s in systems if not s.startswith("fuseopt-cuda")]
        systems = [s for s in systems if not s.startswith("torch.compile")]
    logging.getLogger("fuseopt").setLevel(logging.ERROR)
    dtype = getattr(torch, args.dtype)
    env = describe_environment(device)
    rows = []
    for family in families:
        dims = dims_of(family, args.quick)
        model = hf.build_model(family, dims, False, dtype, device, seed=0)
        model.generation_config.pad_token_id = 0
        ids = hf.tokens(dims["vocab"], (args.batch, args.prompt), device, 1)
        with torch.no_grad():
            expected = model.generate(
                ids, max_new_tokens=args.tokens, min_new_tokens=args.tokens, do_sample=False
            )
        for name in systems:
            result = run_system(name, model, ids, args.tokens, expected, args.repeats)
            row = {"model": family, **result}
            rows.append(row)
            print(json.dumps(row), flush=True)
    doc = {
        "benchmark": "generate",
        "command": ("python -m benchmarks.generate " + " ".join(argv)).strip(),
        "environment": env.as_dict(),
        "settings": {
            "tokens": args.tokens,
            "batch": args.batch,
            "prompt": args.prompt,
            "dtype": args.dtype,
            "repeats": args.repeats,
            "quick": args.quick,
        },
        "rows": rows,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
