"""Numerics of the Triton backend where the CPU interpreter and the GPU part ways
(issue 14), run in Triton's interpreter (the runtime sets TRITON_INTERPRET=1 for CPU
tensors) and compared with eager PyTorch:

- NaN wins in every max and min, elementwise and reduced (`tl.maximum`/`tl.minimum`
  with `propagate_nan=tl.PropagateNan.ALL`; relu's `tl.where` keeps NaN as it is);
  integer max and min are unchanged; bf16 max/min reductions order values, not the
  interpreter's raw bits;
- casts between every pair of element types nn has (f32, f16, bf16, i1, i64) give
  eager's values, from tile IR straight to the printer and through `fuseopt.compile`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import fuseopt
from fuseopt.backends.kernel_cache import KernelCache
from fuseopt.backends.triton.backend import compile_module

NAN_ROW = [float("nan"), 1.0, -2.0, 3.0]
"""The report's row: eager's max/min of it is NaN."""

NAN_OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "amax": lambda x: torch.amax(x * 1, -1),
    "amin": lambda x: torch.amin(x * 1, -1),
    "maximum": lambda x: torch.maximum(x * 1, torch.zeros_like(x)),
    "minimum": lambda x: torch.minimum(x * 1, torch.zeros_like(x)),
    "clamp": lambda x: torch.clamp(x * 1, -1.0, 1.0),
    "hardtanh": lambda x: torch.nn.functional.hardtanh(x * 1),
    "relu6": lambda x: torch.nn.functional.relu6(x * 1),
    "relu": lambda x: torch.relu(x * 1),
    "softmax": lambda x: torch.softmax(x * 1, -1),
}
"""Every max/min the report lists (and relu, softmax: a max inside a row reduction)."""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(cache))
    return cache


def _compile_and_run(fn: Callable[..., torch.Tensor], *args: torch.Tensor) -> torch.Tensor:
    compiled = fuseopt.compile(fn, args, backend="triton", strict=True)
    return compiled(*args)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("name", list(NAN_OPS))
def test_max_and_min_propagate_nan_like_eager(name: str, dtype: torch.dtype) -> None:
    x = torch.tensor([NAN_ROW, [4.0, -1.0, 0.5, 2.0], [-3.0, float("nan"), 9.0, -9.0]], dtype=dtype)
    got, want = _compile_and_run(NAN_OPS[name], x), NAN_OPS[name](x)
    torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-2, atol=1e-2)


def test_integer_max_and_min_are_unchanged() -> None:
    def f(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.maximum(a + 1, b), torch.minimum(a + 1, b), torch.amax(a * 2, -1)

    a = torch.tensor([[-5, 7, 0, 3], [2**40, -(2**40), 1, -1]])
    b = torch.tensor([[4, -8, 0, 3], [1, 2, 3, 4]])
    for g, w in zip(_compile_and_run(f, a, b), f(a, b), strict=True):
        assert torch.equal(g, w)


def test_printed_max_min_and_combine_helpers_propagate_nan() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.amax(x * 1, -1), torch.amin(x * 1, -1), torch.clamp(x * 2, -1.0, 1.0)

    x = torch.randn(4, 8)
    compiled = fuseopt.compile(f, (x,), backend="triton", strict=True)
    source = "\n".join(k.source or "" for k in compiled.kernels)
    assert "tl.maximum(" in source and "tl.minimum(" in source
    for call in ("tl.maximum(", "tl.minimum("):
        for line in source.splitlines():
            if call in line:
                assert "propagate_nan=tl.PropagateNan.ALL" in line, line


def _run_tile_ir(text: str, cache: Path, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Print tile IR (`@main` launches the kernels) with `-t triton` and run it."""
    fn = compile_module(fuseopt.parse(text), "main", {}, KernelCache(str(cache)))
    return tuple(fn(*inputs))


REDUCE = """
tile.kernel @k grid 1 (%x: memref<4x8xT>, %y: memref<4xT>) attributes {schedule = "pointwise", num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {
  %c0 = arith.constant 0 : index
  %v = tile.load %x[%c0, %c0] : memref<4x8xT> -> tensor<4x8xT>
  %r = tile.reduce KIND %v axis 1 : tensor<4x8xT> -> tensor<4xT>
  tile.store %r, %y[%c0] : tensor<4xT>, memref<4xT>
  tile.return
}
func.func @main(%x: memref<4x8xT>, %y: memref<4xT> {tile.output}) {
  tile.launch @k grid [1] (%x, %y) : memref<4x8xT>, memref<4xT>
  func.return
}
"""
"""One tile.reduce of a 4x8 tile over its rows (`T`: element type, `KIND`: max/min)."""


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize(
    "element,dtype",
    [("f32", torch.float32), ("bf16", torch.bfloat16), ("f16", torch.float16),
     ("i64", torch.int64)],
    ids=["f32", "bf16", "f16", "i64"],
)  # fmt: skip
def test_reduce_max_min_in_tile_ir(
    kind: str, element: str, dtype: torch.dtype, _private_cache: Path
) -> None:
    x = torch.tensor([[-3.0, -1.0, -2.0, -7.0, -0.5, -9.0, -4.0, -6.0]] * 4)
    x[3] = torch.arange(8.0) - 4
    if dtype.is_floating_point:
        x[1, 3] = x[2, 0] = float("nan")
    x = x.to(dtype)
    (got,) = _run_tile_ir(REDUCE.replace("KIND", kind).replace("T", element), _private_cache, x)
    want = x.amax(1) if kind == "max" else x.amin(1)
    torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)


ELEMENTS = {
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64,
    "i1": torch.bool,
}
"""nn's element types and their PyTorch dtypes."""

PAIRS = [(s, d) for s, d in itertools.product(ELEMENTS, ELEMENTS) if s != d]

FLOATS = [-5.0, -0.0, 0.5, 1.0, 2.5, 3.0, 200.0, 65504.0, 1e5, -300.25, 7.0, 1.5, 0.1, -1.0,
          1024.5, 3e38, 1.00390625, 1.01171875, 257.0, 259.0, 65535.0, 33.3, -0.7, 2049.0,
          float("nan"), float("inf"), float("-inf"), 1e-40, -2.5, 0.0, 6e-8, 3.9e-3]  # fmt: skip
"""32 values: ties and near-ties of bf16/f16 rounding, -0.0, NaN, infinities, overflow
to f16's infinity, subnormals."""


def cast_input(element: str) -> torch.Tensor:
    """A source tensor of `element` type holding FLOATS as far as the type can (values a
    float-to-integer cast would leave undefined are left out of integer sources)."""
    x = torch.tensor(FLOATS)
    if element == "i1":
        return x != 0
    if element == "i64":
        return torch.nan_to_num(x, nan=3.0, posinf=2.0**40, neginf=-(2.0**40)).clamp(
            -(2.0**40), 2.0**40
        ).to(torch.int64) + torch.tensor([0] * 6 + [2**24 + 1] + [0] * 25)
    return x.to(ELEMENTS[element])


def comparable(x: torch.Tensor, src: str, dst: str) -> torch.Tensor:
    """Where a cast's result is defined: everywhere but float-to-i64 of NaN, inf or
    values past i64 (undefined in C, Triton and PyTorch alike)."""
    if src in ("f32", "f16", "bf16") and dst == "i64":
        return torch.isfinite(x) & (x.double().abs() < 2.0**62)
    return torch.ones(x.shape, dtype=torch.bool)


def cast_module(pairs: list[tuple[str, str]], n: int = 32) -> str:
    """Tile IR: one kernel loading one buffer per source type and storing one cast per
    pair; `@main(sources..., outputs...)` launches it."""
    sources = sorted({s for s, _ in pairs}, key=list(ELEMENTS).index)
    params = [f"%in_{s}: memref<{n}x{s}>" for s in sources]
    params += [f"%out_{s}_{d}: memref<{n}x{d}>" for s, d in pairs]
    body = ["  %c0 = arith.constant 0 : index"]
    for s in sources:
        body.append(f"  %t_{s} = tile.load %in_{s}[%c0] : memref<{n}x{s}> -> tensor<{n}x{s}>")
    for s, d in pairs:
        body.append(f"  %c_{s}_{d} = nn.cast %t_{s} : tensor<{n}x{s}> -> tensor<{n}x{d}>")
        body.append(
            f"  tile.store %c_{s}_{d}, %out_{s}_{d}[%c0] : tensor<{n}x{d}>, memref<{n}x{d}>"
        )
    host = [f"%in_{s}: memref<{n}x{s}>" for s in sources]
    host += [f"%out_{s}_{d}: memref<{n}x{d}> {{tile.output}}" for s, d in pairs]
    args = ", ".join([f"%in_{s}" for s in sources] + [f"%out_{s}_{d}" for s, d in pairs])
    types = ", ".join(
        [f"memref<{n}x{s}>" for s in sources] + [f"memref<{n}x{d}>" for _, d in pairs]
    )
    return "\n".join(
        [f"tile.kernel @casts grid 1 ({', '.join(params)}) attributes {{schedule = \"pointwise\", "
         "num_warps = 4 : i64, num_stages = 1 : i64, vector_width = 4 : i64} {", *body, "  tile.return", "}",
         f"func.func @main({', '.join(host)}) {{",
         f"  tile.launch @casts grid [1] ({args}) : {types}", "  func.return", "}"]
    )  # fmt: skip


def check_casts(
    got: tuple[torch.Tensor, ...], inputs: dict[str, torch.Tensor], pairs: list[tuple[str, str]]
) -> None:
    """Every cast's result equals eager's where it is defined (NaN where eager's is)."""
    bad = []
    for (s, d), g in zip(pairs, got, strict=True):
        x = inputs[s]
        want, keep = x.to(ELEMENTS[d]), comparable(x, s, d)
        assert g.dtype == want.dtype and g.shape == want.shape
        same = (g == want) | (g.double().isnan() & want.double().isnan())
        if not bool(same[keep].all()):
            bad.append(
                f"{s}->{d}: got {g[keep & ~same].tolist()} want {want[keep & ~same].tolist()}"
            )
    assert not bad, "\n".join(bad)


def test_casts_between_every_pair_of_types_in_tile_ir(_private_cache: Path) -> None:
    inputs = {s: cast_input(s) for s in ELEMENTS}
    got = _run_tile_ir(cast_module(PAIRS), _private_cache, *(inputs[s] for s in ELEMENTS))
    check_casts(got, inputs, PAIRS)


def test_casts_between_every_pair_of_types_through_compile() -> None:
    inputs = {s: cast_input(s) for s in ELEMENTS}

    def casts(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        by_type = dict(zip(ELEMENTS, xs, strict=True))
        return tuple(by_type[s].to(ELEMENTS[d]) for s, d in PAIRS)

    got = _compile_and_run(casts, *inputs.values())  # type: ignore[arg-type]
    check_casts(tuple(got), inputs, PAIRS)


def test_integer_plus_one_to_bf16_from_the_report() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return ((x * 4).to(torch.int64) + 1).to(torch.bfloat16)

    x = torch.linspace(-1.5, 50.0, 8)
    assert torch.equal(_compile_and_run(f, x), f(x))
