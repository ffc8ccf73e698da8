"""The on-disk kernel cache shared by the Triton and CUDA backends.

Where: `FUSEOPT_CACHE_DIR` when set, else the user cache directory
(`$XDG_CACHE_HOME/fuseopt`, `~/.cache/fuseopt`; `~/Library/Caches/fuseopt` on macOS;
`%LOCALAPPDATA%/fuseopt/Cache` on Windows).

Layout: `<root>/<namespace>/<key[:2]>/<key>/<name>`, one file per entry, and the cache's
secret key in `<root>/.hmac-key`. A key is the SHA-256 of everything the entry depends on
(`cache_key`: IR text, shapes, dtypes, device, tool versions); a namespace separates
users ("triton", "cuda", "autotune"). `directory(name)` is `<root>/<name>`, for another
tool's own cache (Triton's compiled binaries).

Entry format: one header line, then the payload bytes:

    # fuseopt-cache v2 hmac-sha256=<hex MAC> bytes=<payload length>\\n

The MAC is HMAC-SHA256 under the secret key, over the entry's place
(`namespace/key/name`) and its payload. The header is a comment in Python and C++, so a
cached `.py` or `.cu` file stays valid source that tools (and `inspect`) can read in
place.

What is trusted, and why. The cache runs what it reads: a cached `kernels.py` is
imported, a cached cubin is loaded on the GPU. A checksum anyone can recompute would let
whoever can write into the cache run code as you, so:
- the root must be owned by the current user and not writable by group or others (as
  Triton and Inductor require of theirs). A root that fails this check (a shared
  `FUSEOPT_CACHE_DIR` under /tmp that another user created, say) is refused with a
  warning on logger `fuseopt`, and this process caches in a private temporary directory
  instead, removed at exit: compiling still works, the cache lasts one process;
- every entry must carry a valid MAC under the secret key: 32 random bytes in a file of
  mode 0o600 that the cache creates atomically in the root. A key file that is missing,
  unreadable, of the wrong size, or not private to the user is replaced by a fresh key,
  which makes every entry invalid. An entry that fails authentication (or is truncated,
  or is from another fuseopt version) is deleted and reported as a miss, so the caller
  rebuilds it: it is never executed;
- directories the cache creates are mode 0o700.
Trusted without checks: your own account (a process running as you can read the key,
so it can forge entries, but it can also run code as you directly), the directories
above the root, and the other tools' caches under `directory()` (Triton verifies
nothing there either), which are as private as the root. Owner and mode checks need
POSIX; on Windows only the MAC is checked.

Unusable directories: a namespace or entry directory that is a file, not writable or
not private does not stop compiling: the cache warns once per process and moves to the
same private temporary directory. A root that is a file, cannot be created or is not
writable is an OSError from `ensure_root` (a configuration the user must fix).

Writes are atomic (a temporary file in the same directory, moved into place with
`os.replace`): processes writing one entry at once all succeed, and a reader never sees
half a file. A JSON entry can be checked against what its reader expects
(`get_json(check=...)`): one that fails is deleted and a miss, like a corrupt one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import platform
import secrets
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

log = logging.getLogger("fuseopt")

FORMAT_VERSION = 2
"""Bumped when the entry format or the key recipe changes (old entries become misses)."""

HEADER_PREFIX = b"# fuseopt-cache v2 "

KEY_FILE = ".hmac-key"
"""The secret key's file in the root (a namespace cannot start with a dot)."""

KEY_BYTES = 32
"""Length of the secret key (HMAC-SHA256's block-size-safe key length)."""


def default_cache_dir() -> Path:
    """The cache root: `FUSEOPT_CACHE_DIR`, else the platform's user cache directory."""
    env = os.environ.get("FUSEOPT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "fuseopt" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "fuseopt"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "fuseopt"


@cache
def _versions() -> tuple[tuple[str, str], ...]:
    versions = {"format": str(FORMAT_VERSION), "python": platform.python_version()}
    for module in ("fuseopt", "torch", "triton", "xdsl"):
        try:
            mod = __import__(module)
            versions[module] = str(getattr(mod, "__version__", "unknown"))
        except ImportError:
            versions[module] = "absent"
    versions["fuseopt-source"] = _source_digest()
    return tuple(sorted(versions.items()))


def _source_digest() -> str:
    """SHA-256 over fuseopt's own Python sources (a changed compiler is a new version)."""
    import fuseopt

    roots = {Path(fuseopt.__file__).resolve().parent}
    for sub in ("dialects", "passes", "backends", "frontends"):
        try:
            mod = __import__(f"fuseopt.{sub}", fromlist=["_"])
        except ImportError:
            continue
        roots.update(Path(p).resolve() for p in getattr(mod, "__path__", []))
    digest = hashlib.sha256()
    for root in sorted(roots):
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root.parent)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def tool_versions() -> dict[str, str]:
    """Versions that change generated code or binaries: fuseopt (its version and a digest
    of its sources), Python, torch, Triton, xDSL."""
    return dict(_versions())


def cache_key(**parts: Any) -> str:
    """A hex SHA-256 key over `parts` (IR text, shapes, dtypes, device, options...)
    and `tool_versions()`. Values must be JSON-serializable (tuples become lists)."""
    blob = json.dumps(
        {"parts": parts, "versions": tool_versions()}, sort_keys=True, default=str
    ).encode()
    return hashlib.sha256(blob).hexdigest()


def _check_part(text: str, what: str) -> str:
    if not text or any(not (c.isalnum() or c in "._-") for c in text) or text.startswith("."):
        raise ValueError(f"cache {what} must be a plain file name ([A-Za-z0-9._-]), got {text!r}")
    return text


def _mac(secret: bytes, place: str, payload: bytes) -> str:
    mac = hmac.new(secret, digestmod=hashlib.sha256)
    mac.update(place.encode() + b"\0")
    mac.update(payload)
    return mac.hexdigest()


def encode_entry(payload: bytes, secret: bytes, place: str = "") -> bytes:
    """The payload with its header line: its MAC under `secret` for entry `place`."""
    mac = _mac(secret, place, payload)
    return HEADER_PREFIX + f"hmac-sha256={mac} bytes={len(payload)}\n".encode() + payload


def decode_entry(data: bytes, secret: bytes, place: str = "") -> bytes | None:
    """The payload of an entry, or None when it is truncated, corrupt, from another
    format, or fails authentication under `secret` for entry `place`."""
    head, sep, payload = data.partition(b"\n")
    if not sep or not head.startswith(HEADER_PREFIX):
        return None
    fields = dict(
        f.split("=", 1)
        for f in head[len(HEADER_PREFIX) :].decode("ascii", "replace").split()
        if "=" in f
    )
    if fields.get("bytes") != str(len(payload)):
        return None
    mac = fields.get("hmac-sha256", "")
    return payload if hmac.compare_digest(_mac(secret, place, payload), mac) else None


def untrusted_reason(directory: Path) -> str | None:
    """Why the cache must not trust `directory` as its root (None when it may): it must
    be owned by the current user and not writable by group or others (POSIX)."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # Windows: no owner or mode bits to check
        return None
    info = directory.stat()
    if info.st_uid != getuid():
        return f"it is owned by uid {info.st_uid}, not by the current user (uid {getuid()})"
    mode = stat.S_IMODE(info.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"it is writable by group or others (mode {mode:#o})"
    return None


def _read_key(path: Path) -> bytes | None:
    """The secret key at `path`, or None unless it is a regular file private to the
    current user holding KEY_BYTES bytes (a symbolic link is not followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size != KEY_BYTES:
            return None
        getuid = getattr(os, "getuid", None)
        if getuid is not None and (info.st_uid != getuid() or stat.S_IMODE(info.st_mode) & 0o077):
            return None
        key = f.read(KEY_BYTES + 1)
    return key if len(key) == KEY_BYTES else None


def load_or_create_key(root: Path) -> tuple[bytes, bool]:
    """The secret key of the cache at `root` and whether it was made now.

    A missing or bad key file (see `_read_key`) gets a new random key, written to a
    temporary file of mode 0o600 and hard-linked into place, so that of processes making
    the key at once one wins and the others read its key; a bad key file is replaced
    (`os.replace`), with a warning.
    """
    path = root / KEY_FILE
    key = _read_key(path)
    if key is not None:
        return key, False
    new = secrets.token_bytes(KEY_BYTES)
    fd, tmp = tempfile.mkstemp(prefix=".hmac-key.", suffix=".tmp", dir=root)  # mode 0o600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(new)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
            return new, True
        except FileExistsError:  # made by another process meanwhile, or bad
            key = _read_key(path)
            if key is not None:
                return key, False
            log.warning(
                "fuseopt: the kernel cache key %s is unreadable or not private to you; "
                "a new key replaces it and every cached entry will be rebuilt",
                path,
            )
        except OSError:  # no hard links on this file system: the last writer's key wins
            pass
        os.replace(tmp, path)
        return new, True
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


class _StandIns:
    """Private temporary directories standing in for unusable cache roots: one per
    requested root for the life of the process (removed at exit), announced once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tempfile.TemporaryDirectory[str]] = {}

    def stand_in(self, requested: Path, why: str) -> Path:
        """The private directory used instead of `requested` (made, and logged, once)."""
        with self._lock:
            held = self._held.get(str(requested))
            if held is None:
                held = tempfile.TemporaryDirectory(prefix="fuseopt-cache-")  # mode 0o700
                self._held[str(requested)] = held
                log.warning(
                    "fuseopt: the kernel cache %s cannot be used: %s. This process "
                    "compiles in the private directory %s instead (removed at exit, so "
                    "kernels are not kept for later runs; to keep them, set "
                    "FUSEOPT_CACHE_DIR to a directory only you can write)",
                    requested,
                    why,
                    held.name,
                )
            return Path(held.name)


@cache
def _stand_ins() -> _StandIns:
    """The process's stand-ins for unusable cache roots (a memo, like `_versions`)."""
    return _StandIns()


class KernelCache:
    """Entries under one root directory (see the module docstring).

    `get`/`put` move bytes, `get_text`/`put_text` UTF-8 text, `get_json`/`put_json`
    JSON values; `path` is where an entry lives (an authenticated entry can be read in
    place). `root` is the directory in use: the requested one, or the private stand-in
    once that was refused.
    """

    def __init__(self, root: Path | str | None = None):
        self.requested_root = Path(root) if root is not None else default_cache_dir()
        self.root = self.requested_root
        self._ready = False
        self._key: bytes | None = None
        self._fresh_key = False

    def ensure_root(self) -> None:
        """Create the root directory (mode 0o700) and check it may be trusted; an
        untrusted root is replaced by a private stand-in, with a warning. An OSError says
        why the requested root cannot be used at all (a file is in the way, no
        permission, ...)."""
        if self._ready:
            return
        requested = self.requested_root
        if requested.exists() and not requested.is_dir():
            raise NotADirectoryError(f"{requested} exists and is not a directory")
        requested.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not os.access(requested, os.W_OK | os.X_OK):
            raise PermissionError(f"{requested} is not writable")
        why = untrusted_reason(requested)
        if why is not None:
            self._use_stand_in(why)
        self._ready = True

    def _use_stand_in(self, why: str) -> None:
        self.root = _stand_ins().stand_in(self.requested_root, why)
        self._key = None

    def _secret(self) -> bytes:
        if self._key is None:
            self._key, self._fresh_key = load_or_create_key(self.root)
        return self._key

    def path(self, namespace: str, key: str, name: str) -> Path:
        """The file of entry `name` under `key` in `namespace`."""
        _check_part(namespace, "namespace")
        _check_part(key, "key")
        _check_part(name, "entry name")
        return self.root / namespace / key[:2] / key / name

    def directory(self, name: str) -> Path:
        """`<root>/<name>`, created private (0o700), for another tool's own cache; the
        private stand-in's when the root's cannot be made, written or trusted."""
        _check_part(name, "directory name")
        self.ensure_root()
        try:
            return self._private_directories(self.root / name)
        except OSError as e:
            self._use_stand_in(f"{e.filename or self.root / name}: {e.strerror or e}")
            return self._private_directories(self.root / name)

    def _private_directories(self, path: Path) -> Path:
        """Create each directory from the root down to `path` (mode 0o700) and check it
        is a directory private to the user; an OSError otherwise."""
        directory = self.root
        for part in path.relative_to(self.root).parts:
            directory = directory / part
            try:
                directory.mkdir(mode=0o700)
            except FileExistsError:
                pass
            self._check_private(directory)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "not writable", str(path))
        return path

    @staticmethod
    def _check_private(directory: Path) -> None:
        if not directory.is_dir():
            raise NotADirectoryError(20, "not a directory", str(directory))
        why = untrusted_reason(directory)
        if why is not None:
            raise PermissionError(1, why, str(directory))

    def get(self, namespace: str, key: str, name: str) -> bytes | None:
        """The payload of an entry; None when absent, corrupt, failing authentication
        (such a file is removed) or in a directory others may write."""
        self.path(namespace, key, name)  # a bad name is a ValueError, not a miss
        try:
            self.ensure_root()
            path = self.path(namespace, key, name)
            for directory in (path.parents[2], path.parents[1], path.parent):
                self._check_private(directory)
            data = path.read_bytes()
            secret = self._secret()
        except OSError:
            return None
        place = f"{namespace}/{key}/{name}"
        payload = decode_entry(data, secret, place)
        if payload is None and (newer := _read_key(self.root / KEY_FILE)) not in (None, secret):
            self._key = newer  # another process replaced the key since this one read it
            payload = decode_entry(data, newer, place)
        if payload is None:
            if data.startswith(HEADER_PREFIX) and not self._fresh_key:
                log.warning(
                    "fuseopt: kernel cache entry %s failed authentication (changed since "
                    "fuseopt wrote it); it is deleted and rebuilt, not run",
                    path,
                )
            try:
                path.unlink()
            except OSError:
                pass
        return payload

    def put(self, namespace: str, key: str, name: str, payload: bytes) -> Path:
        """Write an entry atomically (temporary file, then `os.replace`); return its path.

        A directory of the entry that cannot be made, written or trusted moves the cache
        to its private stand-in (logged once per process) and the entry is written
        there."""
        self.ensure_root()
        try:
            return self._write(namespace, key, name, payload)
        except OSError as e:
            self._use_stand_in(f"{e.filename or namespace}: {e.strerror or e}")
            return self._write(namespace, key, name, payload)

    def _write(self, namespace: str, key: str, name: str, payload: bytes) -> Path:
        path = self.path(namespace, key, name)
        self._private_directories(path.parent)
        data = encode_entry(payload, self._secret(), f"{namespace}/{key}/{name}")
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return path

    def get_text(self, namespace: str, key: str, name: str) -> str | None:
        """`get`, decoded as UTF-8 (None when absent, corrupt or not UTF-8)."""
        data = self.get(namespace, key, name)
        if data is None:
            return None
        try:
            return data.decode()
        except UnicodeDecodeError:
            self.path(namespace, key, name).unlink(missing_ok=True)
            return None

    def put_text(self, namespace: str, key: str, name: str, text: str) -> Path:
        """`put` of UTF-8 text."""
        return self.put(namespace, key, name, text.encode())

    def get_json(
        self, namespace: str, key: str, name: str, check: Callable[[Any], bool] | None = None
    ) -> Any:
        """`get`, parsed as JSON: None when absent, corrupt, not JSON, or (with `check`)
        when `check(value)` is false or raises (a value of the wrong shape); such an
        entry is removed, so the caller rebuilds it."""
        text = self.get_text(namespace, key, name)
        if text is None:
            return None
        try:
            value = json.loads(text)
            if check is None or check(value):
                return value
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            pass
        log.warning(
            "fuseopt: kernel cache entry %s does not hold what its reader expects; "
            "it is deleted and rebuilt",
            self.path(namespace, key, name),
        )
        self.path(namespace, key, name).unlink(missing_ok=True)
        return None

    def put_json(self, namespace: str, key: str, name: str, value: Mapping | list) -> Path:
        """`put` of a JSON value (a mapping or a list)."""
        return self.put_text(namespace, key, name, json.dumps(value, sort_keys=True))


def header_length(path: Path) -> int:
    """Bytes of the header line of the entry at `path` (0 when it has none)."""
    with open(path, "rb") as f:
        head = f.readline()
    return len(head) if head.startswith(HEADER_PREFIX) else 0


__all__ = [
    "FORMAT_VERSION",
    "KEY_FILE",
    "KernelCache",
    "cache_key",
    "decode_entry",
    "default_cache_dir",
    "encode_entry",
    "header_length",
    "load_or_create_key",
    "tool_versions",
    "untrusted_reason",
]
