"""Write a whole file so that a crash leaves either the old or the new one, never a mix."""

from __future__ import annotations

import functools
import os
import uuid
from pathlib import Path
from typing import Any


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_filesystem(path: Path) -> None:
    """Make everything written to `path`'s filesystem durable: one `syncfs` (Linux),
    else `sync`. A bulk writer (an import) pays one of these per batch, not one fsync per
    file and directory."""
    import ctypes

    syncfs = _syncfs()
    if syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if syncfs(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))
    finally:
        os.close(fd)


@functools.cache
def _syncfs() -> Any:
    """libc's `syncfs`, looked up once (finding libc runs `ldconfig`: once per batch of
    an import was 200 processes per 10k files)."""
    import ctypes
    import ctypes.util

    libc_name = ctypes.util.find_library("c")
    return getattr(ctypes.CDLL(libc_name, use_errno=True), "syncfs", None) if libc_name else None


def write_atomically(path: Path, data: bytes, mode: int = 0o600) -> None:
    """tmp file in the same directory + fsync + rename + fsync of the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
