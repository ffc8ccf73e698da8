"""The breadth cases, by family, each at a few shapes (full) and one tiny one (quick).

Families: reductions over every axis; full reductions and losses; normalizations
(LayerNorm over several trailing dims, GroupNorm, InstanceNorm, BatchNorm in
inference); extreme row shapes (a handful of rows of millions of elements, millions of
rows of a few); elementwise ops on transposed, sliced and broadcast inputs; matmuls of
irregular, tall-skinny and batched shapes; GEMMs with a reduction epilogue; argmax and
cumsum. Inputs are bf16 (the run's --dtype); functions are written dtype-generic so
that the float64 copy computes the reference.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.breadth import CLASSES, POSITIVE, SCALE, SIGN, Case, TensorSpec, shape
from benchmarks.workloads import Dims, Shape

EPS = 1e-5


def quick(**dims: int) -> Shape:
    """The tiny shape a --quick run uses."""
    return Shape("quick", dict(dims))


def _x(d: Dims) -> tuple[TensorSpec, ...]:
    """One input of all the shape's dims, in order."""
    return (TensorSpec(tuple(d.values())),)


def _xy(d: Dims) -> tuple[TensorSpec, ...]:
    return (TensorSpec(tuple(d.values())), TensorSpec(tuple(d.values())))


THREE_D = (shape(a=64, b=1024, c=1024), shape(a=1024, b=64, c=512))
THREE_D_QUICK = quick(a=4, b=6, c=8)


def _reduction(name: str, computation: str, fn) -> Case:  # noqa: ANN001 - a tensor function
    return Case(name, "reduction", computation, fn, _x, THREE_D, THREE_D_QUICK)


REDUCTIONS = (
    _reduction("sum_last", "x.sum(-1), x [a, b, c]", lambda x: x.sum(-1)),
    _reduction("sum_middle", "x.sum(1)", lambda x: x.sum(1)),
    _reduction("sum_first", "x.sum(0)", lambda x: x.sum(0)),
    _reduction("sum_first_last", "x.sum((0, 2))", lambda x: x.sum((0, 2))),
    _reduction("sum_all", "x.sum()", lambda x: x.sum()),
    _reduction("mean_middle_keepdim", "x.mean(1, keepdim=True)", lambda x: x.mean(1, True)),
    _reduction("amax_first", "x.amax(0)", lambda x: x.amax(0)),
    _reduction("var_middle", "x.var(1)", lambda x: x.var(1)),
)

FLAT = (shape(n=1 << 24), shape(n=1 << 28), shape(n=1 << 30))
"""Full reductions: 32 MB, 512 MB and 2 GB of bf16 per input."""
FLAT_QUICK = quick(n=1000)


def _pair_sign(d: Dims) -> tuple[TensorSpec, ...]:
    return (TensorSpec((d["n"],)), TensorSpec((d["n"],), SIGN))


def _hinge(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.clamp(1 - x * y, min=0).mean()


def _logits_targets(d: Dims) -> tuple[TensorSpec, ...]:
    return (TensorSpec((d["rows"], d["classes"])), TensorSpec((d["rows"],), CLASSES, d["classes"]))


LOSSES = (
    Case("mse_loss", "loss", "F.mse_loss(x, y) (mean)", F.mse_loss, _xy, FLAT, FLAT_QUICK),
    Case("l1_loss", "loss", "F.l1_loss(x, y) (mean)", F.l1_loss, _xy, FLAT[:2], FLAT_QUICK),
    Case(
        "smooth_l1_loss",
        "loss",
        "F.smooth_l1_loss(x, y) (mean)",
        F.smooth_l1_loss,
        _xy,
        FLAT[:2],
        FLAT_QUICK,
    ),
    Case(
        "hinge_loss",
        "loss",
        "clamp(1 - x * y, 0).mean(), y = +-1",
        _hinge,
        _pair_sign,
        FLAT[:2],
        FLAT_QUICK,
    ),
    Case(
        "cross_entropy",
        "loss",
        "F.cross_entropy(logits, targets) (mean); 8 x 128256: Llama 3's vocabulary, few rows",
        F.cross_entropy,
        _logits_targets,
        (
            shape(rows=8192, classes=32000),
            shape(rows=65536, classes=1000),
            shape(rows=8, classes=128256),
        ),
        quick(rows=8, classes=10),
    ),
)


def _layer_norm_2d(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, w.shape, w, b, EPS)


def _trailing_affine(count: int):  # noqa: ANN202 - a Specs
    def specs(d: Dims) -> tuple[TensorSpec, ...]:
        trailing = tuple(d.values())[-count:]
        return (TensorSpec(trailing, SCALE), TensorSpec(trailing))

    return specs


def _channel_affine(d: Dims) -> tuple[TensorSpec, ...]:
    return (TensorSpec((d["c"],), SCALE), TensorSpec((d["c"],)))


def _group_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.group_norm(x, 32 if x.shape[1] >= 32 else 2, w, b, EPS)


def _instance_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.instance_norm(x, weight=w, bias=b, eps=EPS)


def _batch_norm(x, mean, var, w, b) -> torch.Tensor:  # noqa: ANN001 - tensors
    return F.batch_norm(x, mean, var, w, b, training=False, eps=EPS)


def _batch_norm_weights(d: Dims) -> tuple[TensorSpec, ...]:
    c = (d["c"],)
    return (TensorSpec(c), TensorSpec(c, POSITIVE), TensorSpec(c, SCALE), TensorSpec(c))


IMAGES = (shape(n=32, c=256, h=56, w=56), shape(n=8, c=512, h=32, w=32))
IMAGES_QUICK = quick(n=2, c=4, h=3, w=5)

NORMS = (
    Case(
        "layer_norm_2d",
        "norm",
        "F.layer_norm(x, x.shape[-2:], w, b): few rows of many elements",
        _layer_norm_2d,
        _x,
        (shape(rows=64, s=128, d=1024), shape(rows=8, s=2048, d=1024)),
        quick(rows=2, s=3, d=8),
        weights=_trailing_affine(2),
    ),
    Case(
        "layer_norm_3d",
        "norm",
        "F.layer_norm(x, x.shape[-3:], w, b) on images",
        lambda x, w, b: F.layer_norm(x, w.shape, w, b, EPS),
        _x,
        (shape(n=16, c=64, h=56, w=56),),
        quick(n=2, c=3, h=4, w=5),
        weights=_trailing_affine(3),
    ),
    Case(
        "group_norm",
        "norm",
        "F.group_norm(x, 32, w, b)",
        _group_norm,
        _x,
        IMAGES,
        IMAGES_QUICK,
        _channel_affine,
    ),
    Case(
        "instance_norm",
        "norm",
        "F.instance_norm(x, weight=w, bias=b)",
        _instance_norm,
        _x,
        IMAGES,
        IMAGES_QUICK,
        _channel_affine,
    ),
    Case(
        "batch_norm_eval",
        "norm",
        "F.batch_norm(x, running stats, w, b, training=False)",
        _batch_norm,
        _x,
        IMAGES,
        IMAGES_QUICK,
        _batch_norm_weights,
    ),
)

EXTREME_ROWS = (shape(rows=4, cols=1 << 22), shape(rows=1 << 22, cols=8))
EXTREME_QUICK = quick(rows=3, cols=5)

EXTREMES = (
    Case(
        "softmax_rows",
        "rows",
        "softmax(x, -1): 4 x 4M and 4M x 8",
        lambda x: x.softmax(-1),
        _x,
        EXTREME_ROWS,
        EXTREME_QUICK,
    ),
    Case(
        "sum_rows",
        "rows",
        "x.sum(-1): 4 x 4M and 4M x 8",
        lambda x: x.sum(-1),
        _x,
        EXTREME_ROWS,
        EXTREME_QUICK,
    ),
    Case(
        "layer_norm_rows",
        "rows",
        "F.layer_norm(x, (cols,), w, b): 4 x 4M and 4M x 8",
        lambda x, w, b: F.layer_norm(x, w.shape, w, b, EPS),
        _x,
        EXTREME_ROWS,
        EXTREME_QUICK,
        weights=_trailing_affine(1),
    ),
)

EXTREME_COLUMNS = (shape(rows=65536, cols=1024), shape(rows=16384, cols=4096))
"""Column reductions with few outputs (a bias gradient, batch statistics): 128 MB of
bf16 reduced to 1024 and to 4096 values."""

COLUMNS = (
    Case(
        "sum_columns",
        "columns",
        "x.sum(0): a bias gradient, 64K x 1K and 16K x 4K",
        lambda x: x.sum(0),
        _x,
        EXTREME_COLUMNS,
        EXTREME_QUICK,
    ),
    Case(
        "var_columns",
        "columns",
        "x.var(0): statistics of each feature over the rows",
        lambda x: x.var(0),
        _x,
        EXTREME_COLUMNS,
        EXTREME_QUICK,
    ),
)


def _square_pair(d: Dims) -> tuple[TensorSpec, ...]:
    return (TensorSpec((d["m"], d["n"])), TensorSpec((d["n"], d["m"])))


def _rows_and_column(d: Dims) -> tuple[TensorSpec, ...]:
    return (TensorSpec((d["m"], d["n"])), TensorSpec((d["m"],)), TensorSpec((d["n"],)))


def _outer_broadcast(d: Dims) -> tuple[TensorSpec, ...]:
    return (TensorSpec((d["b"], 1, d["d"])), TensorSpec((1, d["s"], d["d"])))


MATRIX = (shape(m=8192, n=8192), shape(m=4096, n=12288))
MATRIX_QUICK = quick(m=6, n=8)

ELEMENTWISE = (
    Case(
        "transposed_add",
        "elementwise",
        "x.t() * 2 + y, x [n, m], y [m, n]",
        lambda x, y: x.t() * 2 + y,
        _square_pair,
        MATRIX,
        MATRIX_QUICK,
    ),
    Case(
        "sliced_mul",
        "elementwise",
        "x[:, ::2] * x[:, 1::2] (even and odd columns)",
        lambda x: x[:, ::2] * x[:, 1::2],
        _x,
        MATRIX,
        MATRIX_QUICK,
    ),
    Case(
        "narrow_gelu",
        "elementwise",
        "gelu(x[1:-1, 16:-16])",
        lambda x: F.gelu(x[1:-1, 16:-16]),
        _x,
        MATRIX,
        quick(m=6, n=40),
    ),
    Case(
        "broadcast_row_col",
        "elementwise",
        "x * col[:, None] + row[None, :]",
        lambda x, col, row: x * col[:, None] + row[None, :],
        _rows_and_column,
        MATRIX,
        MATRIX_QUICK,
    ),
    Case(
        "broadcast_outer",
        "elementwise",
        "silu(a + b), a [b, 1, d], b [1, s, d] -> [b, s, d]",
        lambda a, b: F.silu(a + b),
        _outer_broadcast,
        (shape(b=64, s=2048, d=512),),
        quick(b=2, s=3, d=4),
    ),
)


def _gemm_specs(d: Dims) -> tuple[TensorSpec, ...]:
    batch = (d["batch"],) if "batch" in d else ()
    return (TensorSpec((*batch, d["m"], d["k"])),)


def _gemm_weight(d: Dims) -> tuple[TensorSpec, ...]:
    return (TensorSpec((d["n"], d["k"])),)


def _bmm_specs(d: Dims) -> tuple[TensorSpec, ...]:
    return (TensorSpec((d["batch"], d["m"], d["k"])), TensorSpec((d["batch"], d["k"], d["n"])))


def _gemm_flops(d: Dims) -> int:
    return 2 * d.get("batch", 1) * d["m"] * d["n"] * d["k"]


def _matmul(name: str, computation: str, fn, shapes, quick_shape, bmm: bool = False) -> Case:  # noqa: ANN001
    if bmm:
        return Case(
            name, "matmul", computation, fn, _bmm_specs, shapes, quick_shape, flops=_gemm_flops
        )
    return Case(
        name, "matmul", computation, fn, _gemm_specs, shapes, quick_shape, _gemm_weight, _gemm_flops
    )


MATMULS = (
    _matmul(
        "linear_irregular",
        "F.linear(x, w), odd sizes",
        F.linear,
        (shape(m=1000, n=1000, k=1000), shape(m=4097, n=4095, k=1023), shape(m=77, n=3001, k=769)),
        quick(m=5, n=7, k=9),
    ),
    _matmul(
        "linear_tall_skinny",
        "F.linear(x, w): many rows, few columns; few rows, wide",
        F.linear,
        (shape(m=1 << 20, n=16, k=128), shape(m=1 << 20, n=64, k=64), shape(m=16, n=8192, k=8192)),
        quick(m=64, n=2, k=8),
    ),
    _matmul(
        "linear_3d",
        "F.linear(x, w), x [batch, m, k]",
        F.linear,
        (shape(batch=8, m=2048, n=4096, k=1024),),
        quick(batch=2, m=3, n=5, k=4),
    ),
    _matmul(
        "bmm",
        "torch.bmm(a, b), batched",
        torch.bmm,
        (shape(batch=32, m=512, n=512, k=128), shape(batch=256, m=64, n=64, k=1024)),
        quick(batch=2, m=3, n=4, k=5),
        bmm=True,
    ),
)

EPILOGUE_SHAPES = (shape(m=8192, n=4096, k=1024), shape(m=2048, n=32000, k=2048))
EPILOGUE_QUICK = quick(m=6, n=10, k=8)

GEMM_EPILOGUES = (
    _matmul(
        "gemm_logsumexp",
        "logsumexp(F.linear(x, w), -1)",
        lambda x, w: torch.logsumexp(F.linear(x, w), -1),
        EPILOGUE_SHAPES,
        EPILOGUE_QUICK,
    ),
    _matmul(
        "gemm_sum_n",
        "F.linear(x, w).sum(-1)",
        lambda x, w: F.linear(x, w).sum(-1),
        EPILOGUE_SHAPES,
        EPILOGUE_QUICK,
    ),
    _matmul(
        "gemm_amax_n",
        "F.linear(x, w).amax(-1)",
        lambda x, w: F.linear(x, w).amax(-1),
        EPILOGUE_SHAPES,
        EPILOGUE_QUICK,
    ),
)

SCAN_SANITY_REL_L2 = 0.25
"""Eager's bf16 cumsum adds in bf16: over 4096 or 2^20 elements it is 6-8% off float64
(H100, rel_l2), which is eager's accuracy, not a wrong reference; fuseopt is then held to
the usual multiple of eager's error."""

SCANS = (
    Case(
        "argmax_last",
        "index",
        "x.argmax(-1)",
        lambda x: x.argmax(-1),
        _x,
        (shape(rows=8192, cols=32000), shape(rows=1 << 20, cols=64)),
        quick(rows=4, cols=9),
    ),
    Case(
        "argmax_first",
        "index",
        "x.argmax(0)",
        lambda x: x.argmax(0),
        _x,
        (shape(rows=4096, cols=8192),),
        quick(rows=5, cols=3),
    ),
    Case(
        "cumsum_last",
        "scan",
        "x.cumsum(-1)",
        lambda x: x.cumsum(-1),
        _x,
        (shape(rows=4096, cols=4096), shape(rows=1 << 18, cols=128), shape(rows=4, cols=1 << 20)),
        quick(rows=3, cols=7),
        sanity_rel_l2=SCAN_SANITY_REL_L2,
    ),
    Case(
        "cumsum_first",
        "scan",
        "x.cumsum(0)",
        lambda x: x.cumsum(0),
        _x,
        (shape(rows=4096, cols=4096),),
        quick(rows=7, cols=3),
        sanity_rel_l2=SCAN_SANITY_REL_L2,
    ),
)

ALL_CASES: tuple[Case, ...] = (
    *REDUCTIONS,
    *LOSSES,
    *NORMS,
    *EXTREMES,
    *COLUMNS,
    *ELEMENTWISE,
    *MATMULS,
    *GEMM_EPILOGUES,
    *SCANS,
)
"""Every breadth case, in table order."""
