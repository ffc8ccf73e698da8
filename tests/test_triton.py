"""The Triton backend on the CPU: kernels run in Triton's interpreter.

- every workload of the workload suite at tiny shapes (bf16 and f32) against a float64
  reference, no worse than twice eager's error, with the expected kernel counts;
- the kernel cache: a hit on the second compile, a corrupt entry rebuilt, two processes
  compiling the same model at once;
- modes (reduce-overhead runs plainly on the CPU; max-autotune's assembly of winners),
  `compiled.save`, the `-t triton` printer and name sanitizing.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from test_triton_helpers import check_workload

import fuseopt
from fuseopt.backends.triton import backend as triton_backend

TINY = {
    "rmsnorm": {"batch": 1, "seq": 3, "hidden": 48},
    "rmsnorm_silu_gate": {"batch": 1, "seq": 3, "hidden": 48},
    "softmax": {"rows": 5, "cols": 40},
    "layernorm": {"rows": 5, "hidden": 40},
    "gelu_bias": {"rows": 5, "cols": 40},
    "rmsnorm_rope": {"batch": 1, "seq": 3, "heads": 2, "head_dim": 16},
    "mlp": {"m": 16, "d": 32, "di": 64},
    "mlp_heavy": {"m": 16, "d": 32, "di": 64},
    "mlp_stacked": {"m": 16, "d": 32, "di": 32},
    "gated_mlp": {"m": 16, "d": 32, "di": 64},
    "llama_block": {"hidden": 32, "heads": 2, "seq": 4, "di": 64},
}
"""Tiny shapes (odd sizes: ragged edges and masks) for the interpreter."""

FUSED_ONE_KERNEL = ("rmsnorm", "rmsnorm_silu_gate", "softmax", "layernorm", "gelu_bias")
"""Workloads fused into exactly one kernel."""
MATMULS = {"mlp": 2, "mlp_heavy": 2, "mlp_stacked": 8, "gated_mlp": 2, "llama_block": 4}
"""Workloads with GEMMs: how many GEMMs (tile.dot in a kernel, or a library GEMM) run.
Linear layers of one input run as one (`merged_linears`): the gated MLP's gate and up
projections, the Llama block's query, key and value projections and its gate and up."""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(cache))
    return cache


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
@pytest.mark.parametrize("name", list(TINY))
def test_workload_matches_float64_like_eager(name: str, dtype: torch.dtype) -> None:
    checked = check_workload(name, TINY[name], dtype, torch.device("cpu"))
    assert checked.ok, checked.message
    kernels = checked.compiled.kernels
    assert kernels and all(k.suffix == ".py" for k in kernels)
    if name in FUSED_ONE_KERNEL:
        assert len(kernels) == 1, [k.name for k in kernels]
        assert kernels[0].source is not None and "@triton.jit" in kernels[0].source
    gemms = [k for k in kernels if k.schedule != "attention"]
    if name in MATMULS:
        dots = sum(k.ops.count("tile.dot") + (k.schedule == "library_gemm") for k in gemms)
        assert dots == MATMULS[name], [(k.schedule, k.ops) for k in kernels]
    # sdpa (llama_block) is one flash-attention kernel
    assert [k.schedule for k in kernels].count("attention") == (name == "llama_block")
    assert not checked.compiled.fallbacks


def _compile_rmsnorm(options: dict | None = None) -> fuseopt.api.CompiledModule:
    from test_triton_helpers import workload

    w = workload("rmsnorm")
    dims = TINY["rmsnorm"]
    model = w.make_model(dims, torch.float32, torch.device("cpu"), 0)
    x = w.make_inputs(dims, torch.float32, torch.device("cpu"), 1)
    with torch.no_grad():
        compiled = fuseopt.compile(model, x, backend="triton", strict=True, **(options or {}))
        torch.testing.assert_close(compiled(*x), model(*x), rtol=1e-5, atol=1e-5)
    return compiled


def test_second_compile_hits_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    _compile_rmsnorm()

    def no_printing(*args: object, **kwargs: object) -> None:
        raise AssertionError("the second compile printed again instead of using the cache")

    monkeypatch.setattr(triton_backend, "print_and_store", no_printing)
    compiled = _compile_rmsnorm()
    assert "fused" in compiled.fusion_report() or compiled.kernels


def test_corrupt_cache_entry_is_rebuilt(_private_cache: Path) -> None:
    _compile_rmsnorm()
    (entry,) = list(_private_cache.rglob("kernels.py"))
    entry.write_bytes(entry.read_bytes()[:-40])  # truncated
    _compile_rmsnorm()
    assert b"@triton.jit" in entry.read_bytes()
    entry.write_bytes(entry.read_bytes().replace(b"tl.", b"tX."))  # wrong checksum
    _compile_rmsnorm()
    assert b"tX." not in entry.read_bytes()


CONCURRENT = textwrap.dedent(
    """
    import sys, torch, fuseopt
    sys.path.insert(0, {tests!r})
    from test_triton_helpers import workload
    w = workload("softmax")
    dims = {{"rows": 4, "cols": 24}}
    m = w.make_model(dims, torch.float32, torch.device("cpu"), 0)
    x = w.make_inputs(dims, torch.float32, torch.device("cpu"), 1)
    with torch.no_grad():
        c = fuseopt.compile(m, x, backend="triton", strict=True)
        torch.testing.assert_close(c(*x), m(*x))
    print("ok", len(c.kernels))
    """
)


def test_two_processes_compile_the_same_model_at_once(_private_cache: Path) -> None:
    script = CONCURRENT.format(tests=str(Path(__file__).parent))
    env = {**os.environ, "FUSEOPT_CACHE_DIR": str(_private_cache)}
    root = str(Path(__file__).parent.parent)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            env=env,
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err[-2000:]
        assert out.strip() == "ok 1"
    assert not list(_private_cache.rglob("*.tmp"))


def test_reduce_overhead_runs_plainly_on_cpu() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA graphs are checked by test_triton_gpu.py")
    checked = check_workload(
        "rmsnorm", TINY["rmsnorm"], torch.float32, torch.device("cpu"), mode="reduce-overhead",
        calls=3,
    )  # fmt: skip
    assert checked.ok, checked.message


def test_unusable_cache_dir_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(blocker))
    with pytest.raises(fuseopt.CompileError, match="kernel cache directory cannot be used"):
        _compile_rmsnorm()


def test_unknown_option_is_a_configuration_error() -> None:
    with pytest.raises(fuseopt.CompileError, match="no option"):
        _compile_rmsnorm({"blok_m": 64})


def test_forced_tile_sizes_reach_the_kernels() -> None:
    compiled = _compile_rmsnorm({"block_rows": 2})
    (kernel,) = compiled.kernels
    assert "block sizes [1, 2, 64]" in kernel.source or "2, 64" in kernel.source


def test_save_writes_sources_and_index(tmp_path: Path) -> None:
    compiled = _compile_rmsnorm()
    index = compiled.save(tmp_path / "saved")
    files = sorted(p.name for p in (tmp_path / "saved").iterdir())
    assert "index.json" in files and index.name in files
    py = [f for f in files if f.endswith(".py")]
    text = (tmp_path / "saved" / py[0]).read_text()
    assert len(py) == 1 and "@triton.jit" in text and "import triton.language as tl" in text
    runpy.run_path(str(tmp_path / "saved" / py[0]))  # a module of its own: header, helpers
    assert "grid" in index.read_text()


@pytest.mark.parametrize("name", ["softmax", "layernorm", "rmsnorm_silu_gate"])
def test_looped_row_reduction_reads_through_the_row_cache(name: str) -> None:
    checked = check_workload(
        name, TINY[name], torch.bfloat16, torch.device("cpu"), max_row_block=16, strict=True
    )
    assert checked.ok, checked.message
    (kernel,) = checked.compiled.kernels
    assert kernel.schedule == "row_reduction_looped" and "for " in kernel.source


def test_matmul_k_loop_ragged_edges_and_grouped_order() -> None:
    dims = {"m": 40, "d": 48, "di": 40}
    checked = check_workload(
        "mlp", dims, torch.float32, torch.device("cpu"), block_m=16, block_n=16, block_k=16,
        group_m=2, strict=True,
    )  # fmt: skip
    assert checked.ok, checked.message
    sources = [k.source for k in checked.compiled.kernels if k.schedule == "matmul"]
    assert len(sources) == 2 and all("for k in range(0, " in s and "mask=" in s for s in sources)


SOFTMAX_NN = """func.func @main(%x: tensor<6x40xf32>) -> tensor<6x40xf32> {
  %r = nn.softmax %x axis 1 : tensor<6x40xf32>
  func.return %r : tensor<6x40xf32>
}"""


def test_autotune_keeps_the_fastest_candidate_and_caches_it(_private_cache: Path) -> None:
    from fuseopt.backends.autotune import AutotunedFunction
    from fuseopt.backends.kernel_cache import KernelCache

    cache = KernelCache(_private_cache)
    fn = triton_backend.compile_module(
        fuseopt.parse(SOFTMAX_NN), "main", {"mode": "max-autotune-no-cudagraphs"}, cache
    )
    assert isinstance(fn, AutotunedFunction)
    x = torch.randn(6, 40)
    torch.testing.assert_close(fn(x)[0], torch.softmax(x, 1))  # CPU: heuristic, no tuning
    times = iter(range(100, 0, -1))  # every later candidate is "faster"
    fn.timer = lambda launch: float(next(times))
    choice, compiled = fn.time_candidates(torch.device("cpu"), "tuned" + "0" * 59)
    ((kernel, picked),) = choice.items()
    assert picked["config"] == "block-rows=8" and len(picked["timings"]) == 5
    tuned = triton_backend.wrap(compiled, cache, compiled.key)
    assert "block sizes [8, 64]" in tuned.source
    torch.testing.assert_close(tuned(x)[0], torch.softmax(x, 1))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
def test_hugging_face_llama_decoder_layer(dtype: torch.dtype) -> None:
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama import modeling_llama

    config = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1,
        num_hidden_layers=1, vocab_size=16,
    )  # fmt: skip
    config._attn_implementation = "sdpa"

    class Layer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = modeling_llama.LlamaDecoderLayer(config, layer_idx=0)
            self.rope = modeling_llama.LlamaRotaryEmbedding(config)

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(h.shape[1], device=h.device)[None]
            out = self.layer(h, position_embeddings=self.rope(h, pos), position_ids=pos)
            return out[0] if isinstance(out, tuple) else out

    torch.manual_seed(0)
    model = Layer().eval()
    for p in model.parameters():
        p.data.normal_(0.0, 0.2)  # non-trivial weights (norm scales are ones by default)
    model = model.to(dtype)
    h = torch.randn(1, 5, 32, dtype=dtype)
    with torch.no_grad():
        compiled = fuseopt.compile(model, (h,), backend="triton", strict=True)
        got, want = compiled(h), model(h)
        exact = model.double()(h.double())
    tol = 0.0 if dtype == torch.float32 else 2.0
    eager_err = (want.double() - exact).abs().max().item()
    assert (got.double() - exact).abs().max().item() <= max(2 * eager_err, 1e-5) + tol * 1e-2
    assert len(compiled.kernels) > 3
    assert {f.target for f in compiled.fallbacks} <= {
        "aten._scaled_dot_product_flash_attention_for_cpu.default"
    }


def test_autotune_knob_variant_reprints_the_launcher(_private_cache: Path) -> None:
    """A knob variant's source is the printed kernel and a launcher the printer prints
    anew with the other knobs (no text of the printed source is edited)."""
    import ast

    from fuseopt.backends.autotune import with_knobs
    from fuseopt.backends.kernel_cache import KernelCache

    text = """func.func @main(%x: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %e = nn.exp %x : tensor<64x256xf32>
  func.return %e : tensor<64x256xf32>
}"""
    fn = triton_backend.compile_module(
        fuseopt.parse(text), "main", {}, KernelCache(str(_private_cache))
    )
    (k,) = [k for k in fn.index["kernels"] if k["triton"]]
    tuned = with_knobs(k, 8, 4)
    assert tuned["num_warps"] == 8 and tuned["num_stages"] == 4
    assert tuned["source"].startswith(k["kernel_source"])
    assert f"num_warps={k['num_warps']}, num_stages={k['num_stages']})" in k["source"]
    assert "num_warps=8, num_stages=4)" in tuned["source"]
    assert tuned["source"].replace("num_warps=8, num_stages=4", "") == k["source"].replace(
        f"num_warps={k['num_warps']}, num_stages={k['num_stages']}", ""
    )
    ast.parse(tuned["source"])


GEMMS_NN = """func.func @main(%x: tensor<2x5x32xf32>, %w: tensor<48x32xf32>, %v: tensor<2x32x5xf32>)
    -> (tensor<2x5x48xf32>, tensor<2x5x5xf32>) {
  %y = nn.matmul %x, %w transpose_b : tensor<2x5x32xf32>, tensor<48x32xf32> -> tensor<2x5x48xf32>
  %z = nn.matmul %x, %v : tensor<2x5x32xf32>, tensor<2x32x5xf32> -> tensor<2x5x5xf32>
  func.return %y, %z : tensor<2x5x48xf32>, tensor<2x5x5xf32>
}"""


def test_library_gemm_route_calls_torch_mm_on_views(_private_cache: Path) -> None:
    from fuseopt.backends.kernel_cache import KernelCache
    from fuseopt.pipelines import FUSE, run_pipeline

    spec = (
        FUSE.replace("nn-fuse", "nn-fuse{route=library_gemm}") + ",convert-nn-to-tile,tile-promote"
    )
    tiled = run_pipeline(fuseopt.parse(GEMMS_NN), spec)
    fn = triton_backend.compile_module(tiled, "main", {}, KernelCache(_private_cache))
    assert "torch.mm(in0.view(10, 32), in1.mT, out=out0.view(10, 48))" in fn.source
    assert [k.schedule for k in fn.kernels] == ["library_gemm", "library_gemm"]
    x, w, v = torch.randn(2, 5, 32), torch.randn(48, 32), torch.randn(2, 32, 5)
    y, z = fn(x, w, v)
    torch.testing.assert_close(y, x @ w.T)
    torch.testing.assert_close(z, x @ v)
