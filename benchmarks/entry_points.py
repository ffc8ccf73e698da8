"""Host cost of one-op programs compiled one after another in one process.

The benchmark harnesses compile many programs in one process. Until 77a3879, every
`fuseopt.compile` after a process's first shared its entry point's code identity with
the earlier ones, so Dynamo traced it with symbolic sizes from its first call (extra
host work per call). This prints, for five programs compiled in sequence, whether
fuseopt traced each statically, and the wall time per call (back-to-back calls, one
synchronize; the better of two runs, the two systems alternating) of fuseopt-triton
and torch.compile. To compare with an older `fuseopt/api.py`, run it from a folder
holding only an older `fuseopt/` package (its subpackages resolve to the installed
ones) with that folder first on PYTHONPATH.

    python -m benchmarks.entry_points [LABEL]
"""

from __future__ import annotations

import logging
import sys

import torch
import torch.nn.functional as F

import fuseopt
from benchmarks.timing import launch_inclusive_us


def _cases() -> list[tuple[str, object, tuple[torch.Tensor, ...]]]:
    def t(*shape: int) -> torch.Tensor:
        return torch.randn(shape, dtype=torch.bfloat16, device="cuda")

    return [
        ("linear 1000^3", F.linear, (t(1000, 1000), t(1000, 1000))),
        ("linear 77x3001x769", F.linear, (t(77, 769), t(3001, 769))),
        ("bmm 32x512x512x128", torch.bmm, (t(32, 512, 128), t(32, 128, 512))),
        ("sum(-1) 4096x4096", lambda x: x.sum(-1), (t(4096, 4096),)),
        ("softmax 4096x4096", lambda x: x.softmax(-1), (t(4096, 4096),)),
    ]


def per_call_us(fn, args: tuple[torch.Tensor, ...], calls: int = 300) -> float:  # noqa: ANN001
    """Wall time per call over `calls` back-to-back calls and one synchronize, after ten
    warm-up calls (`launch_inclusive_us`)."""
    for _ in range(10):
        fn(*args)
    return launch_inclusive_us(lambda: fn(*args), torch.device("cuda"), calls)


class _Symbolic(logging.Handler):
    """Counts fuseopt's "graph with symbolic sizes" log lines."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "symbolic sizes" in record.getMessage()


def main() -> int:
    """Print a Markdown row per program."""
    label = sys.argv[1] if len(sys.argv) > 1 else "this tree"
    seen = _Symbolic()
    log = logging.getLogger("fuseopt")
    log.addHandler(seen)
    log.setLevel(logging.INFO)
    print("| fuseopt | program | traced | fuseopt us/call | torch.compile us/call |")
    print("|---|---|---|---|---|")
    for name, fn, args in _cases():
        before = seen.count
        compiled = fuseopt.compile(fn, args)
        traced = "symbolic" if seen.count > before else "static"
        baseline = torch.compile(fn, dynamic=False)
        times = [per_call_us(f, args) for f in (compiled, baseline, compiled, baseline)]
        ours, theirs = min(times[0::2]), min(times[1::2])
        print(f"| {label} | {name} | {traced} | {ours:.1f} | {theirs:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
