"""The on-disk kernel cache: keys, atomic writes from several processes, corrupt entries,
and what it trusts (issue 14): authenticated entries, a private root and directories."""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import re
import stat
from pathlib import Path

import pytest

from fuseopt.backends import kernel_cache
from fuseopt.backends.kernel_cache import (
    KEY_FILE,
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
    secret = bytes(range(32))
    assert decode_entry(encode_entry(b"abc\n", secret, "t/k/a"), secret, "t/k/a") == b"abc\n"
    assert decode_entry(encode_entry(b"", secret), secret) == b""
    assert decode_entry(encode_entry(b"abc", secret, "t/k/a"), bytes(32), "t/k/a") is None
    assert decode_entry(encode_entry(b"abc", secret, "t/k/a"), secret, "t/k/b") is None


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


def forge(path: Path, payload: bytes) -> None:
    """What anyone who can write the file can do: new payload, checksum recomputed."""
    head = path.read_bytes().split(b"\n", 1)[0]
    head = re.sub(rb"=[0-9a-f]{64}", b"=" + hashlib.sha256(payload).hexdigest().encode(), head)
    head = re.sub(rb"bytes=[0-9]+", b"bytes=" + str(len(payload)).encode(), head)
    path.write_bytes(head + b"\n" + payload)


def test_rewritten_entry_is_never_returned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = KernelCache(tmp_path / "c")
    key = cache_key(ir="x")
    path = cache.put_text("triton", key, "kernels.py", "x = 1\n")
    forge(path, b"raise SystemExit('someone else ran code in your process')\n")
    with caplog.at_level(logging.WARNING, logger="fuseopt"):
        assert KernelCache(tmp_path / "c").get_text("triton", key, "kernels.py") is None
    assert "failed authentication" in caplog.text
    assert not path.exists()  # deleted, so the caller rebuilds it


def test_entry_moved_to_another_key_is_not_returned(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    a, b = cache_key(ir="a"), cache_key(ir="b")
    source = cache.put_text("triton", a, "kernels.py", "a = 1\n")
    target = cache.put_text("triton", b, "kernels.py", "b = 1\n")
    target.write_bytes(source.read_bytes())
    assert cache.get_text("triton", b, "kernels.py") is None


def test_key_file_is_private_and_shared_by_caches(tmp_path: Path) -> None:
    root = tmp_path / "c"
    key = cache_key(ir="x")
    KernelCache(root).put_text("triton", key, "kernels.py", "x = 1\n")
    key_file = root / KEY_FILE
    assert key_file.stat().st_size == 32
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert KernelCache(root).get_text("triton", key, "kernels.py") == "x = 1\n"


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.unlink(),
        lambda p: p.chmod(0o644),  # readable by others: anyone could forge entries
        lambda p: p.write_bytes(b"short"),
        lambda p: (p.unlink(), p.symlink_to(p.parent / "elsewhere")),
    ],
    ids=["missing", "readable-by-others", "wrong-size", "symlink"],
)
def test_a_bad_key_is_replaced_and_invalidates_entries(tmp_path: Path, damage) -> None:  # noqa: ANN001
    root = tmp_path / "c"
    key = cache_key(ir="x")
    KernelCache(root).put_text("triton", key, "kernels.py", "x = 1\n")
    old = (root / KEY_FILE).read_bytes()
    damage(root / KEY_FILE)
    cache = KernelCache(root)
    assert cache.get_text("triton", key, "kernels.py") is None
    cache.put_text("triton", key, "kernels.py", "x = 2\n")
    assert KernelCache(root).get_text("triton", key, "kernels.py") == "x = 2\n"
    key_file = root / KEY_FILE
    assert not key_file.is_symlink() and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key_file.read_bytes() != old


def test_directories_are_created_private(tmp_path: Path) -> None:
    root = tmp_path / "new" / "cache"
    cache = KernelCache(root)
    path = cache.put_text("triton", cache_key(ir="x"), "kernels.py", "x = 1\n")
    for directory in (root, *path.relative_to(root).parents):
        full = root / directory if directory != root else root
        assert stat.S_IMODE(full.stat().st_mode) == 0o700, full
    assert stat.S_IMODE(cache.directory("triton-binaries").stat().st_mode) == 0o700


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
@pytest.mark.parametrize("problem", ["group-writable", "world-writable", "other-owner"])
def test_untrusted_root_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, problem: str
) -> None:
    """A shared FUSEOPT_CACHE_DIR (another user's, or one others may write) is not used:
    this process caches in a private directory instead, with a warning."""
    root = tmp_path / "shared"
    planted = KernelCache(root)
    key = cache_key(ir="x")
    planted.put_text("triton", key, "kernels.py", "planted = 1\n")
    if problem == "other-owner":
        if os.getuid() != 0:
            pytest.skip("giving a directory to another user needs root")
        os.chown(root, os.getuid() + 4242, -1)
    else:
        root.chmod(0o770 if problem == "group-writable" else 0o777)
    cache = KernelCache(root)
    with caplog.at_level(logging.WARNING, logger="fuseopt"):
        assert cache.get_text("triton", key, "kernels.py") is None  # not read
        path = cache.put_text("triton", key, "kernels.py", "mine = 1\n")
        cache.ensure_root()
    assert cache.root != root and root not in path.parents
    assert stat.S_IMODE(cache.root.stat().st_mode) == 0o700
    assert cache.get_text("triton", key, "kernels.py") == "mine = 1\n"
    assert caplog.text.count(f"the kernel cache {root} cannot be used") == 1
    assert "FUSEOPT_CACHE_DIR" in caplog.text


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")
def test_entry_in_a_directory_others_may_write_is_not_read(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path / "c")
    key = cache_key(ir="x")
    path = cache.put_text("triton", key, "kernels.py", "x = 1\n")
    path.parent.chmod(0o777)  # anyone could swap the file between check and import
    assert KernelCache(tmp_path / "c").get_text("triton", key, "kernels.py") is None


@pytest.mark.parametrize("blocker", ["file", "unwritable"])
def test_unusable_namespace_directory_falls_back_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, blocker: str
) -> None:
    """`<root>/triton` being a file (or unwritable) must not stop compiling: the cache
    moves to a private directory and says so once."""
    root = tmp_path / "c"
    root.mkdir(mode=0o700)
    if blocker == "file":
        (root / "triton").write_text("in the way")
    else:
        (root / "triton").mkdir(mode=0o500)
        access = os.access

        def no_write_below(path: object, mode: int) -> bool:  # root may write anything
            inside = root / "triton" in (Path(str(path)), *Path(str(path)).parents)
            return not (inside and mode & os.W_OK) and access(path, mode)  # type: ignore[arg-type]

        monkeypatch.setattr(kernel_cache.os, "access", no_write_below)
    cache = KernelCache(root)
    with caplog.at_level(logging.WARNING, logger="fuseopt"):
        for i in range(3):
            key = cache_key(ir=str(i))
            assert cache.get_text("triton", key, "kernels.py") is None
            path = cache.put_text("triton", key, "kernels.py", f"x = {i}\n")
            assert cache.get_text("triton", key, "kernels.py") == f"x = {i}\n"
            assert root not in path.parents
        other = KernelCache(root)  # another compile in the same process: no new warning
        other.put_text("triton", cache_key(ir="other"), "kernels.py", "y = 1\n")
    assert caplog.text.count("cannot be used") == 1, caplog.text


def test_json_entry_of_the_wrong_shape_is_a_miss(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    key = cache_key(ir="x")
    path = cache.put_json("triton", key, "index.json", {"inputs": "not a list"})

    def valid(index: dict) -> bool:
        return isinstance(index["inputs"], list)

    assert cache.get_json("triton", key, "index.json", check=valid) is None
    assert not path.exists()
    cache.put_json("triton", key, "index.json", {"kernels": []})
    assert cache.get_json("triton", key, "index.json", check=valid) is None  # KeyError
    cache.put_json("triton", key, "index.json", {"inputs": []})
    assert cache.get_json("triton", key, "index.json", check=valid) == {"inputs": []}


def test_a_key_made_by_another_process_meanwhile_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes making the key at once must agree on one (else each rejects the
    other's entries): the one that finds a key in place after its own read uses it."""
    theirs, made = kernel_cache.load_or_create_key(tmp_path)
    assert made
    read_key = kernel_cache._read_key
    reads: list[Path] = []

    def not_there_yet(path: Path) -> bytes | None:  # the other process links it just after
        reads.append(path)
        return None if len(reads) == 1 else read_key(path)

    monkeypatch.setattr(kernel_cache, "_read_key", not_there_yet)
    assert kernel_cache.load_or_create_key(tmp_path) == (theirs, False)
    assert (tmp_path / KEY_FILE).read_bytes() == theirs


def test_a_replaced_key_is_picked_up(tmp_path: Path) -> None:
    key = cache_key(ir="x")
    early = KernelCache(tmp_path)
    early.put_text("triton", key, "a.py", "a = 1\n")  # reads the first key
    (tmp_path / KEY_FILE).unlink()
    late = KernelCache(tmp_path)
    late.put_text("triton", key, "b.py", "b = 1\n")  # makes a second key
    assert early.get_text("triton", key, "b.py") == "b = 1\n"


def test_cuda_sources_go_to_a_checked_private_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nvcc compiles from a file in the cache's `cuda-src`: when that name is taken by a
    file, the source goes to the cache's private stand-in, never next to it."""
    from fuseopt.backends.cuda import runtime

    root = tmp_path / "cache"
    monkeypatch.setenv("FUSEOPT_CACHE_DIR", str(root))
    root.mkdir(mode=0o700)
    (root / "cuda-src").write_text("not a directory")
    path = runtime._keep_source("__global__ void k() {}", "k")
    assert path.read_text() == "__global__ void k() {}"
    assert path.parent.is_dir() and path.parent.stat().st_mode & 0o077 == 0
    assert (root / "cuda-src").read_text() == "not a directory"
