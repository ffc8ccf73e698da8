"""lit configuration for fuseopt's FileCheck suite.

Run with `lit filecheck/` or, as part of all tests, `pytest` (tests/test_filecheck.py).
Tests are `.mlir` files and Python scripts (`.py`), each with `RUN:` lines; the tools
they use are `fuse-opt`, `filecheck` and `%python` (the interpreter running lit).
"""

import os
import sys

import lit.formats

config.name = "fuseopt"  # noqa: F821 - `config` is injected by lit
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".mlir", ".py"]  # noqa: F821
config.excludes = ["lit.cfg.py", "Output"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.substitutions.append(("%python", sys.executable))  # noqa: F821
for name in ("PATH", "HOME", "FUSEOPT_CACHE_DIR", "TRITON_INTERPRET", "PYTHONPATH"):
    if name in os.environ:
        config.environment[name] = os.environ[name]  # noqa: F821
