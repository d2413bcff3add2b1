"""The data directory is its user's alone: directories 0700, files 0600, created so.

Titles, cwds, first messages, file contents (blobs) and the WebSocket token live here. The
modes are given explicitly at creation, not left to the umask, so the result is the same
whichever transport or command creates a file first, and the process umask (which hooks,
git and files written in the workspace inherit) is left alone.
"""

from __future__ import annotations

import contextlib
import os
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
