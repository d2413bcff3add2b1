"""A session key held against every other process on this machine: an exclusive `flock` on
`locks/<sha256 of the key>` (thread/continue decides one key at a time, and a reset's new
thread is listed before the key is let go: restore/service/continuation.py).

The files stay: removing a lock file another process may have just opened would let two
holders lock two different files. One empty file per key ever continued; they are not
derived state, only meeting points, and deleting the directory while no sessiond runs
loses nothing. A kill -9 lets the lock go with the process.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager

from protocol.errors import ErrorKind, ProtocolError, storage_error
from restore.home.files import private_dirs
from restore.home.layout import Layout
from restore.keys import lock_name

WAIT_SECONDS = 10.0
"""How long a key is waited for before the request fails (ThreadBusy): its holder decides
in milliseconds, so only a holder stuck on a broken disk is waited for this long."""


@contextmanager
def held(layout: Layout, key: str, wait: float = WAIT_SECONDS) -> Iterator[None]:
    """The key's lock, waited for (polling, backing off to 10 ms) at most `wait` seconds."""
    path = layout.locks_dir / lock_name(key)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            private_dirs(path.parent)
            fd = os.open(path, flags, 0o600)
    except OSError as exc:  # a link or a FIFO in its place, a full disk, no permission
        raise storage_error(exc, path, "cannot lock the session key") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise storage_error(OSError(f"{path} is not a regular file"), path, "cannot lock")
        _lock(fd, key, wait)
        yield
    finally:
        os.close(fd)  # the lock goes with it


def _lock(fd: int, key: str, wait: float) -> None:
    deadline = time.monotonic() + wait
    pause = 0.0005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise ProtocolError(
                    ErrorKind.THREAD_BUSY,
                    f"the session key is being continued by another process (over {wait:g} s)",
                    sessionKey=key,
                    holder="another process",
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
