"""The data directory is its user's alone: directories 0700, files 0600, created so.

Titles, cwds, first messages, file contents (blobs) and the WebSocket token live here. The
modes are given explicitly at creation, not left to the umask, so the result is the same
whichever transport or command creates a file first, and the process umask (which hooks,
git and files written in the workspace inherit) is left alone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dirs(path: Path) -> Path:
    """Create `path` and any missing parents, each 0700; existing ones are left as they are."""
    missing = []
    current = path
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, DIR_MODE)
    return path


def create_file(path: Path) -> None:
    """Make sure `path` exists, created 0600 if it did not (for files others open, SQLite)."""
    private_dirs(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))


def write_new(path: Path, data: bytes, *, sync: bool = False) -> None:
    """Write a file that must not exist yet, 0600 (fsynced when asked)."""
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
