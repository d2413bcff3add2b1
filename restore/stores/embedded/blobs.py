"""Content-addressed file contents (`blobs/<sha[:2]>/<sha256>`) for file history and rewind."""

from __future__ import annotations

import os
import stat

from restore.home.files import private_dirs, read_regular, write_atomically
from restore.home.layout import Layout
from restore.ids import is_sha256, sha256_of


def put(layout: Layout, data: bytes) -> str:
    """Store `data` durably (once) and return its sha256."""
    sha = sha256_of(data)
    path = layout.blob_path(sha)
    if not path.exists():
        private_dirs(path.parent)
        write_atomically(path, data)
    return sha


def size(layout: Layout, sha: str) -> int | None:
    """The blob's length in bytes, without reading it; None when it is not stored (or is
    not a regular file: not one sessiond wrote)."""
    if not is_sha256(sha):
        return None
    try:
        found = os.lstat(layout.blob_path(sha))
    except OSError:
        return None
    return found.st_size if stat.S_ISREG(found.st_mode) else None


def get(layout: Layout, sha: str) -> bytes | None:
    if not is_sha256(sha):
        return None  # never build a path from anything but a sha256
    try:
        return read_regular(layout.blob_path(sha))
    except FileNotFoundError:
        return None
    except OSError:
        return None  # not a file sessiond wrote (a FIFO, a link): as good as missing


def shas(layout: Layout) -> list[str]:
    if not layout.blobs_dir.is_dir():
        return []
    return sorted(path.name for path in layout.blobs_dir.glob("??/*") if len(path.name) == 64)
