"""pytest configuration shared by every test module: Hypothesis profiles, and torch's
CPU threads split between pytest-xdist's workers (`pytest -n 2`).

The property tests (random nn graphs) run under one of two profiles:

- `ci` (the default): derandomized, so `pytest` checks the same examples on every run and
  machine; a red CI means a change broke something, never that a new seed was drawn.
- `explore`: fresh random examples each run, for hunting bugs before they land:
  `pytest --hypothesis-profile=explore tests/test_tile_random.py` (repeat it; each run
  draws new graphs). A failure prints a `@reproduce_failure` blob; the graph it shows
  belongs in a regression test.
"""

from __future__ import annotations

import os

import torch
from hypothesis import settings

_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:  # `pytest -n N`: N processes share the cores; one pool of threads each
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // _workers))

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile("ci")
