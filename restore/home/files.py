"""The data directory's own files: private (directories 0700, files 0600, created so) and
written so that a crash leaves either the old or the new content, never a mix.

Titles, cwds, first messages, file contents (blobs) and the WebSocket token live here. The
modes are given explicitly at creation, not left to the umask, so the result is the same
whichever transport or command creates a file first, and the process umask (which hooks,
git and files written in the workspace inherit) is left alone.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import uuid
from pathlib import Path
from typing import Any

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dirs(path: Path) -> Path:
    """Create `path` and any missing parents, each 0700; existing ones are left as they are.

    Each directory made is synced into its parent: a file synced into a directory whose own
    name never reached the disk is lost with it at a power cut (fsync(2): the file's sync
    does not carry its directory's entry). Directories are made rarely (a shard, once), so
    this costs nothing per record (tests/faults/test_power_cut.py)."""
    missing = []
    current = path
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        # Made a moment ago by another process (FileExistsError): it may not have synced
        # the name yet, and what this one writes inside must not depend on that.
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, DIR_MODE)
        fsync_dir(directory.parent)
    return path


def create_file(path: Path) -> None:
    """Make sure `path` exists, created 0600 if it did not (for files others open, SQLite)."""
    private_dirs(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))


def write_new(path: Path, data: bytes, *, sync: bool = False) -> None:
    """Write a file that must not exist yet, 0600. `sync`: durable when this returns, its
    bytes and its name (the directory synced too)."""
    private_dirs(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    if sync:
        fsync_dir(path.parent)


class NotRegularFile(OSError):
    """Something other than a regular file sits where sessiond keeps one of its own."""


def read_regular(path: Path) -> bytes:
    """The bytes of a file sessiond wrote in the data dir, read so that nothing else in its
    place can stall or mislead the reader: a FIFO would block the single store worker (and
    every client's list and record behind it), a symlink would lead out of the data dir.
    Those raise `NotRegularFile` (an OSError, as a missing file's FileNotFoundError is), so
    each caller's "unreadable" path handles them; nothing is followed or waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(errno.EINVAL, f"{path} is not a regular file", str(path))
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def not_regular(path: Path) -> bool:
    """True when what sits at `path` is not a regular file (a FIFO, a directory); False when
    it is one, or nothing is there. For SQLite files, which SQLite opens through a link: a
    link to a regular file (an index kept on another disk) is one."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return False


# --- whole-file writes that survive a crash --------------------------------------------


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
