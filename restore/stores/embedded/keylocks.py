"""A session key held against every other process on this machine (thread/continue decides
one key at a time, and a reset's new thread is listed before the key is let go:
restore/service/continuation.py).

A key's lock is an exclusive lock on one byte of one of `claims.SHARDS` files in
`locks/keys/`, both chosen by the key's sha256: the open file description locks a thread's
claim is (claims.py), so they go with the process (kill -9 included) and two stores of one
process exclude each other. No file is made per key: a key's first continue creates
nothing (a file's creation, its new inode, cost a first continue 0.2-0.4 ms on this
project's machines), and the directory holds 64 empty files however many keys there are.
Two keys sharing a byte wait for each other, at odds of 1 in 2^68.

Where there are no such locks (not Linux) each key has a file of its own,
`locks/<sha256 of the key>`, flocked. The files stay: removing a lock file another process
may have just opened would let two holders lock two different files. Either kind is only
a meeting point: deleting `locks/` while no sessiond runs loses nothing.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from protocol.errors import ErrorKind, ProtocolError, storage_error
from restore.home.files import private_dirs
from restore.home.layout import Layout
from restore.keys import lock_name
from restore.stores.embedded.claims import BUSY, OFD_SETLK, byte_range, place

WAIT_SECONDS = 10.0
"""How long a key is waited for before the request fails (ThreadBusy): its holder decides
in milliseconds, so only a holder stuck on a broken disk is waited for this long."""


@contextmanager
def held(layout: Layout, key: str, wait: float = WAIT_SECONDS) -> Iterator[None]:
    """The key's lock, waited for (polling, backing off to 10 ms) at most `wait` seconds."""
    if OFD_SETLK is not None:
        shard, offset = place(key)
        path = layout.key_locks_dir / f"{shard:02x}"
    else:
        path, offset = layout.locks_dir / lock_name(key), -1
    fd = _open(path)
    try:
        try:
            _wait(key, wait, lambda: _byte(fd, offset) if offset >= 0 else _flock(fd))
        except OSError as exc:
            raise storage_error(exc, path, "cannot lock the session key") from exc
        yield
    finally:
        os.close(fd)  # the lock goes with it


def _open(path: Path) -> int:
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            private_dirs(path.parent)
            fd = os.open(path, flags, 0o600)
    except OSError as exc:  # a link or a FIFO in its place, a full disk, no permission
        raise storage_error(exc, path, "cannot lock the session key") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise storage_error(OSError(f"{path} is not a regular file"), path, "cannot lock")
    return fd


def _byte(fd: int, offset: int) -> bool:
    assert OFD_SETLK is not None
    try:
        fcntl.fcntl(fd, OFD_SETLK, byte_range(fcntl.F_WRLCK, offset))
    except OSError as exc:
        if exc.errno in BUSY:
            return False
        raise
    return True


def _flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _wait(key: str, wait: float, take: Callable[[], bool]) -> None:
    deadline = time.monotonic() + wait
    pause = 0.0005
    while not take():
        if time.monotonic() >= deadline:
            raise ProtocolError(
                ErrorKind.THREAD_BUSY,
                f"the session key is being continued by another process (over {wait:g} s)",
                sessionKey=key,
                holder="another process",
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.01)
