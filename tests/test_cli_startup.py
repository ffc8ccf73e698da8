"""fuse-opt starts without PyTorch: a pass pipeline on nn and tile IR (what the FileCheck
suite runs 160 times) never imports `torch`, which takes about 3 of the 4 s a process
took before (dialects/dtypes.py names PyTorch dtypes and imports torch on first use)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROGRAM = """func.func @f(%x: tensor<4x8xbf16>, %w: tensor<8xbf16>) -> tensor<4x8xbf16> {
  %0 = nn.rms_norm %x weight %w {eps = 1.0e-06 : f64} : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x8xbf16>
  %1 = nn.softmax %0 axis 1 : tensor<4x8xbf16>
  %2 = nn.sum %1 [0] : tensor<4x8xbf16> -> tensor<8xbf16>
  %3 = nn.reshape %2 : tensor<8xbf16> -> tensor<1x8xbf16>
  %4 = nn.broadcast %3 : tensor<1x8xbf16> -> tensor<4x8xbf16>
  func.return %4 : tensor<4x8xbf16>
}
"""

CHECK = """
import sys
from fuseopt.cli import main
code = main([sys.argv[1], "--pipeline", "standard", "-o", sys.argv[2]])
import fuseopt
print(code, "torch" in sys.modules, fuseopt.__file__)
"""


def test_pass_pipeline_does_not_import_torch(tmp_path: Path) -> None:
    source, out = tmp_path / "f.mlir", tmp_path / "out.mlir"
    source.write_text(PROGRAM)
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(  # this checkout's fuseopt, whatever is installed
        [sys.executable, "-c", CHECK, str(source), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert run.returncode == 0, run.stderr
    code, imported, where = run.stdout.split()
    assert (code, imported) == ("0", "False"), run.stdout + run.stderr
    assert Path(where).resolve().is_relative_to(root), where
    assert "tile.kernel" in out.read_text()  # lowered to kernels, printed
