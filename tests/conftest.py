"""pytest configuration shared by every test module: Hypothesis profiles.

The property tests (random nn graphs) run under one of two profiles:

- `ci` (the default): derandomized, so `pytest` checks the same examples on every run and
  machine; a red CI means a change broke something, never that a new seed was drawn.
- `explore`: fresh random examples each run, for hunting bugs before they land:
  `pytest --hypothesis-profile=explore tests/test_tile_random.py` (repeat it; each run
  draws new graphs). A failure prints a `@reproduce_failure` blob; the graph it shows
  belongs in a regression test.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile("ci")
