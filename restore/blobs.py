"""Content-addressed file contents (`blobs/<sha[:2]>/<sha256>`) for file history and rewind."""

from __future__ import annotations

import hashlib
import os
import stat

from restore.atomic import write_atomically
from restore.paths import Layout
from restore.private import private_dirs, read_regular


def sha_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def put(layout: Layout, data: bytes) -> str:
    """Store `data` durably (once) and return its sha256."""
    sha = sha_of(data)
    path = layout.blob_path(sha)
    if not path.exists():
        private_dirs(path.parent)
        write_atomically(path, data)
    return sha


def _is_sha(sha: str) -> bool:
    return len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)


def size(layout: Layout, sha: str) -> int | None:
    """The blob's length in bytes, without reading it; None when it is not stored (or is
    not a regular file: not one sessiond wrote)."""
    if not _is_sha(sha):
        return None
    try:
        found = os.lstat(layout.blob_path(sha))
    except OSError:
        return None
    return found.st_size if stat.S_ISREG(found.st_mode) else None


def get(layout: Layout, sha: str) -> bytes | None:
    if not _is_sha(sha):
        return None  # never build a path from anything but a sha256
    try:
        return read_regular(layout.blob_path(sha))
    except FileNotFoundError:
        return None
    except OSError:
        return None  # not a file sessiond wrote (a FIFO, a link): as good as missing
