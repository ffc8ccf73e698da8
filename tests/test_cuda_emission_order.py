"""The CUDA printer's emission order (backends/cuda/emission_order.py): loads of
read-only parameters, and pure ops of them, print just before their first use; loads of
buffers the kernel writes keep their place."""

from __future__ import annotations

import fuseopt
from fuseopt.backends.cuda.emission_order import late_loads_order, written_params
from fuseopt.dialects import tile

KERNEL = """
tile.kernel @k grid 1 (%a: memref<8xf32>, %w: memref<8xf32>, %o: memref<8xf32>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %c0 = arith.constant 0 : index
  %wt = tile.load %w[%c0] : memref<8xf32> -> tensor<8xf32>
  %wn = nn.neg %wt : tensor<8xf32>
  %x = tile.load %a[%c0] : memref<8xf32> -> tensor<8xf32>
  %old = tile.load %o[%c0] : memref<8xf32> -> tensor<8xf32>
  tile.store %x, %o[%c0] : tensor<8xf32>, memref<8xf32>
  tile.barrier
  %y = nn.mul %x, %wn : tensor<8xf32>
  %z = nn.add %y, %old : tensor<8xf32>
  tile.store %z, %o[%c0] : tensor<8xf32>, memref<8xf32>
  tile.return
}
"""


def _order() -> list[str]:
    module = fuseopt.parse(KERNEL)
    kernel = next(op for op in module.walk() if isinstance(op, tile.KernelOp))
    ops = late_loads_order(kernel.body.block, written_params(kernel))
    assert sorted(map(id, ops)) == sorted(map(id, kernel.body.block.ops))  # a permutation
    return [op.results[0].name_hint if op.results else op.name for op in ops]


def test_read_only_loads_and_their_pure_ops_move_to_their_first_use() -> None:
    order = _order()
    # the weight and its negation move past the barrier, to just before the multiply
    assert order.index("tile.barrier") < order.index("wt") < order.index("wn") < order.index("y")
    # x is read by the first store: it stays before it
    assert order.index("x") < order.index("tile.store")


def test_a_load_of_a_written_buffer_keeps_its_place() -> None:
    order = _order()
    # %o is stored to: its load may not move past the store that overwrites it
    assert order.index("old") < order.index("tile.store")
