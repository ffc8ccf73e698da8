"""The on-disk kernel cache: keys, atomic writes from several processes, corrupt entries."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from fuseopt.kernel_cache import (
    KernelCache,
    cache_key,
    decode_entry,
    default_cache_dir,
    encode_entry,
)


def test_round_trip_text_bytes_json(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    key = cache_key(ir="module {}", shapes=[(2, 3)], device="cpu")
    assert cache.get("triton", key, "kernels.py") is None
    path = cache.put_text("triton", key, "kernels.py", "print('hi')\n")
    assert path.is_file() and cache.get_text("triton", key, "kernels.py") == "print('hi')\n"
    # the header is a comment: the entry stays runnable Python in place
    namespace: dict[str, object] = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    cache.put("cuda", key, "k.cubin", bytes(range(256)))
    assert cache.get("cuda", key, "k.cubin") == bytes(range(256))
    cache.put_json("autotune", key, "best.json", {"block": 256})
    assert cache.get_json("autotune", key, "best.json") == {"block": 256}


def test_keys_depend_on_every_part() -> None:
    base = {"ir": "a", "shapes": [[4, 8]], "dtypes": ["bf16"], "device": "cuda:NVIDIA H100"}
    k = cache_key(**base)
    assert k == cache_key(**base) and len(k) == 64
    for field, other in [("ir", "b"), ("shapes", [[4, 9]]), ("dtypes", ["f32"]), ("device", "cpu")]:
        assert cache_key(**{**base, field: other}) != k


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-3],  # truncated
        lambda data: data[:-1] + b"X",  # flipped payload byte
        lambda data: b"garbage",  # no header
        lambda data: b"",  # empty file
    ],
    ids=["truncated", "flipped", "no-header", "empty"],
)
def test_corrupt_entry_is_a_miss_and_removed(tmp_path: Path, damage) -> None:  # noqa: ANN001
    cache = KernelCache(tmp_path)
    key = cache_key(ir="x")
    path = cache.put_text("triton", key, "kernels.py", "x = 1\n" * 10)
    path.write_bytes(damage(path.read_bytes()))
    assert cache.get_text("triton", key, "kernels.py") is None
    assert not path.exists()
    cache.put_text("triton", key, "kernels.py", "x = 2\n")
    assert cache.get_text("triton", key, "kernels.py") == "x = 2\n"


def test_entry_names_cannot_escape_the_root(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    for bad in ("../evil", "a/b", "", ".hidden"):
        with pytest.raises(ValueError, match="plain file name"):
            cache.path("triton", "abc", bad)


def test_default_dir_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    assert KernelCache().root == tmp_path / "c"
    monkeypatch.delenv("FUSEOPT_CACHE_DIR")
    assert default_cache_dir().name == "fuseopt"


def test_encode_decode() -> None:
    assert decode_entry(encode_entry(b"abc\n")) == b"abc\n"
    assert decode_entry(encode_entry(b"")) == b""


def _writer(root: str, n: int) -> None:
    cache = KernelCache(root)
    key = cache_key(ir="shared")
    for i in range(n):
        cache.put_text("triton", key, "kernels.py", "payload " * 5000 + "\n")
        assert cache.get_text("triton", key, "kernels.py") == "payload " * 5000 + "\n", i


def test_concurrent_writers_all_succeed(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), 20)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    leftovers = [p for p in tmp_path.rglob("*.tmp")]
    assert leftovers == []
