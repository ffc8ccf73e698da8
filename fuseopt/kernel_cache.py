"""The on-disk kernel cache shared by the Triton and CUDA backends.

Where: `FUSEOPT_CACHE_DIR` when set, else the user cache directory
(`$XDG_CACHE_HOME/fuseopt`, `~/.cache/fuseopt`; `~/Library/Caches/fuseopt` on macOS;
`%LOCALAPPDATA%/fuseopt/Cache` on Windows).

Layout: `<root>/<namespace>/<key[:2]>/<key>/<name>`, one file per entry. A key is the
SHA-256 of everything the entry depends on (`cache_key`: IR text, shapes, dtypes,
device, tool versions); a namespace separates users ("triton", "cuda", "autotune").

Entry format: one header line, then the payload bytes:

    # fuseopt-cache v1 sha256=<hex digest of the payload> bytes=<payload length>\\n

The header is a comment in Python and C++, so a cached `.py` or `.cu` file stays
valid source that tools (and `inspect`) can read in place.

Guarantees:
- writes are atomic: the entry is written to a temporary file in the same directory
  and moved into place with `os.replace`, so two processes writing the same entry at
  once both succeed and a reader never sees half a file;
- a corrupt or truncated entry (bad header, wrong length, wrong checksum) is detected
  on read, deleted, and reported as a miss, so the caller rebuilds it; it is never
  trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import tempfile
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1
"""Bumped when the entry format or the key recipe changes (old entries become misses)."""

HEADER_PREFIX = b"# fuseopt-cache v1 "


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


def encode_entry(payload: bytes) -> bytes:
    """The payload with its header line."""
    digest = hashlib.sha256(payload).hexdigest()
    return HEADER_PREFIX + f"sha256={digest} bytes={len(payload)}\n".encode() + payload


def decode_entry(data: bytes) -> bytes | None:
    """The payload of an entry, or None when it is corrupt or truncated."""
    head, sep, payload = data.partition(b"\n")
    if not sep or not head.startswith(HEADER_PREFIX):
        return None
    fields = dict(
        f.split("=", 1)
        for f in head[len(HEADER_PREFIX) :].decode("ascii", "replace").split()
        if "=" in f
    )
    try:
        size = int(fields.get("bytes", "-1"))
    except ValueError:
        return None
    if size != len(payload) or hashlib.sha256(payload).hexdigest() != fields.get("sha256"):
        return None
    return payload


class KernelCache:
    """Entries under one root directory (see the module docstring).

    `get`/`put` move bytes, `get_text`/`put_text` UTF-8 text, `get_json`/`put_json`
    JSON values; `path` is where an entry lives (a verified entry can be read in place).
    """

    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root is not None else default_cache_dir()

    def ensure_root(self) -> None:
        """Create the root directory; an OSError says why it cannot be used (a file is in
        the way, no permission, ...)."""
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(f"{self.root} exists and is not a directory")
        self.root.mkdir(parents=True, exist_ok=True)
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise PermissionError(f"{self.root} is not writable")

    def path(self, namespace: str, key: str, name: str) -> Path:
        """The file of entry `name` under `key` in `namespace`."""
        _check_part(namespace, "namespace")
        _check_part(key, "key")
        _check_part(name, "entry name")
        return self.root / namespace / key[:2] / key / name

    def get(self, namespace: str, key: str, name: str) -> bytes | None:
        """The payload of an entry; None when absent or corrupt (a corrupt file is removed)."""
        path = self.path(namespace, key, name)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        payload = decode_entry(data)
        if payload is None:
            try:
                path.unlink()
            except OSError:
                pass
        return payload

    def put(self, namespace: str, key: str, name: str, payload: bytes) -> Path:
        """Write an entry atomically (temporary file, then `os.replace`); return its path."""
        path = self.path(namespace, key, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(encode_entry(payload))
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

    def get_json(self, namespace: str, key: str, name: str) -> Any:
        """`get`, parsed as JSON (None when absent, corrupt or not JSON)."""
        text = self.get_text(namespace, key, name)
        if text is None:
            return None
        try:
            return json.loads(text)
        except ValueError:
            self.path(namespace, key, name).unlink(missing_ok=True)
            return None

    def put_json(
        self, namespace: str, key: str, name: str, value: Mapping[str, Any] | list[Any]
    ) -> Path:
        """`put` of a JSON value."""
        return self.put_text(namespace, key, name, json.dumps(value, sort_keys=True))


def header_length(path: Path) -> int:
    """Bytes of the header line of the entry at `path` (0 when it has none)."""
    with open(path, "rb") as f:
        head = f.readline()
    return len(head) if head.startswith(HEADER_PREFIX) else 0


__all__ = [
    "FORMAT_VERSION",
    "KernelCache",
    "cache_key",
    "decode_entry",
    "default_cache_dir",
    "encode_entry",
    "header_length",
    "tool_versions",
]
