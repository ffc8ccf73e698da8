"""fuseopt.compile against a hostile or broken environment (issue 14): a kernel cache
someone else wrote into, a cache directory in the way, a cache deleted after compiling,
and meta-device inputs. Triton kernels run in Triton's CPU interpreter."""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch

import fuseopt


def softmax_scale(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A one-kernel model: softmax of a scaled input, plus one."""
    return torch.softmax(x * w, dim=-1) + 1


def inputs(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(4, 24, generator=g), torch.randn(24, generator=g)
    return x.to(device), w.to(device)


@pytest.fixture(autouse=True)
def _fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    torch._dynamo.reset()
    cache = tmp_path / "cache"
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(cache))
    return cache


def compile_and_check(**options: object) -> fuseopt.api.CompiledModule:
    x, w = inputs()
    with torch.no_grad():
        compiled = fuseopt.compile(softmax_scale, (x, w), backend="triton", **options)
        torch.testing.assert_close(compiled(x, w), softmax_scale(x, w))
    return compiled


def forget_loaded_kernels() -> None:
    """Drop imported kernel modules, so that the next compile imports from the cache."""
    for name in [n for n in sys.modules if n.startswith("fuseopt_generated.")]:
        del sys.modules[name]


def forge(path: Path, payload: bytes) -> None:
    """What anyone who can write the file can do: new payload, checksum recomputed."""
    head = path.read_bytes().split(b"\n", 1)[0]
    head = re.sub(rb"=[0-9a-f]{64}", b"=" + hashlib.sha256(payload).hexdigest().encode(), head)
    head = re.sub(rb"bytes=[0-9]+", b"bytes=" + str(len(payload)).encode(), head)
    path.write_bytes(head + b"\n" + payload)


def test_a_rewritten_cached_module_is_not_run(_fresh: Path) -> None:
    compile_and_check(strict=True)
    (entry,) = _fresh.rglob("kernels.py")
    original = entry.read_bytes().split(b"\n", 1)[1]
    forge(entry, b"import builtins\nbuiltins.FUSEOPT_ISSUE_14 = True\n" + original)
    forget_loaded_kernels()
    try:
        compiled = compile_and_check(strict=True)
        assert not hasattr(builtins, "FUSEOPT_ISSUE_14"), "the forged cache entry ran"
    finally:
        if hasattr(builtins, "FUSEOPT_ISSUE_14"):
            del builtins.FUSEOPT_ISSUE_14
    assert compiled.kernels and b"FUSEOPT_ISSUE_14" not in entry.read_bytes()  # rebuilt


@pytest.mark.parametrize("blocker", ["triton", "triton/xx-as-file"])
def test_a_cache_directory_in_the_way_still_compiles(
    _fresh: Path, caplog: pytest.LogCaptureFixture, blocker: str
) -> None:
    """`<cache>/triton` being a file must not make every region run eagerly."""
    _fresh.mkdir(mode=0o700)
    if blocker == "triton":
        (_fresh / "triton").write_text("in the way")
    else:
        (_fresh / "triton").mkdir(mode=0o700)
        for prefix in (f"{i:x}{j:x}" for i in range(16) for j in range(16)):
            (_fresh / "triton" / prefix).write_text("in the way")
    with caplog.at_level(logging.INFO, logger="fuseopt"):
        compiled = compile_and_check()
        compile_and_check()
    assert compiled.kernels and not compiled.fallbacks
    assert caplog.text.count("cannot be used") == 1, caplog.text


def test_fusion_report_after_the_cache_is_deleted(_fresh: Path) -> None:
    compiled = compile_and_check(strict=True)
    shutil.rmtree(_fresh)
    report = compiled.fusion_report()
    assert "nn-fuse report for @" in report and "HBM traffic saved" in report
    x, w = inputs()
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, w), softmax_scale(x, w))


@pytest.mark.parametrize("backend", ["interpret", "triton"])
def test_meta_inputs_give_meta_outputs(backend: str) -> None:
    x, w = inputs("meta")
    compiled = fuseopt.compile(softmax_scale, (x, w), backend=backend)
    out = compiled(x, w)
    want = softmax_scale(x, w)
    assert out.device.type == "meta"
    assert (out.shape, out.dtype, out.stride()) == (want.shape, want.dtype, want.stride())
    assert not compiled.kernels  # nothing to compile for tensors without data
    x, w = inputs()  # real inputs afterwards compile as usual
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, w), softmax_scale(x, w))
    assert compiled.kernels


def test_meta_module_gives_meta_outputs() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32))
    model = model.to("meta")
    x = torch.randn(3, 16, device="meta")
    compiled = fuseopt.compile(model, x, backend="interpret")
    out = compiled(x)
    assert out.device.type == "meta" and out.shape == (3, 32)
    out.sum().backward()  # the backward graph runs on meta tensors too
    assert model[0].weight.grad is not None and model[0].weight.grad.device.type == "meta"


def test_an_index_of_the_wrong_shape_is_rebuilt(_fresh: Path) -> None:
    """An authenticated index.json that does not hold what the backend reads (written by
    you, or by a buggy fuseopt) must be rebuilt, not fail every later compile."""
    from fuseopt.backends.kernel_cache import KEY_FILE, encode_entry

    compile_and_check(strict=True)
    (entry,) = _fresh.rglob("index.json")
    index = json.loads(entry.read_bytes().split(b"\n", 1)[1])
    index["inputs"] = "not a list"
    key = entry.parent.name
    payload = json.dumps(index, sort_keys=True).encode()
    secret = (_fresh / KEY_FILE).read_bytes()
    entry.write_bytes(encode_entry(payload, secret, f"triton/{key}/index.json"))
    forget_loaded_kernels()
    compiled = compile_and_check(strict=True)
    assert compiled.kernels and json.loads(entry.read_bytes().split(b"\n", 1)[1])["inputs"] != (
        "not a list"
    )
