"""Claims: the threads a store's writers hold, without a descriptor per thread.

A session holds its thread from its start or resume to its close: no other writer, in
this process or another, may write it meanwhile (ThreadBusy). A thread file's `flock`
says so only while its descriptor is open, and a server with thousands of open sessions
cannot keep thousands of files open (the common limit is 1,024 descriptors): the store
lets idle writers' descriptors go (store.py) and keeps their threads by their claims.

A claim is an exclusive lock on one byte of a file in `claims/`, both chosen by the
thread id's digest. The locks are Linux's open file description locks (`F_OFD_SETLK`):
like `flock` they belong to the descriptor, so two stores exclude each other whether they
are in one process or two, they go when the process dies (kill -9 included), and closing
another descriptor of the file drops none of them (POSIX `lockf` locks would all go). A
writer takes its claim before the file's lock and drops it after: a second writer meets
the claim first, whether the first one's file is open or not.

Why `SHARDS` files, not one: the kernel keeps a file's byte-range locks in a list that
every lock and unlock walks, so one file holding 20,000 claims cost 2 ms an operation
(measured); 64 files keep it near 16 µs, for at most 64 descriptors, each open while the
store claims a thread in it.

Where there are no such locks (not Linux) nothing is claimed across processes: a writer
whose descriptor was let go takes the file's lock again when it next writes and checks
that the file is as it left it (files.py), so two writers still never write at once, but
another process can take an idle session's thread (the idle one is then ThreadBusy).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import struct

from protocol.errors import storage_error
from restore.home.files import private_dirs
from restore.home.layout import Layout

SHARDS = 64
OFD_SETLK: int | None = getattr(fcntl, "F_OFD_SETLK", None)
BUSY = (errno.EAGAIN, errno.EACCES)


def byte_range(lock_type: int, offset: int) -> bytes:
    """A `struct flock` for one byte (l_pid 0, as OFD locks require), padded beyond the
    largest layout the kernel reads."""
    return struct.pack("hhqqi", lock_type, os.SEEK_SET, offset, 1, 0) + bytes(16)


def place(name: str) -> tuple[int, int]:
    """A name's lock (a thread's claim, a session key's: keylocks.py): its shard file and
    its byte there (62 bits: any offset may be locked, the files stay empty). Two names
    sharing both is a false ThreadBusy (a wait, for keys), never a shared thread, at odds
    of 1 in 2^68."""
    digest = hashlib.sha256(name.encode()).digest()
    return digest[0] % SHARDS, int.from_bytes(digest[1:9], "big") >> 2


class Claims:
    """One store's claims, each shard's file open while the store claims a thread in it."""

    def __init__(self, layout: Layout) -> None:
        self._dir = layout.claims_dir
        self._held: set[str] = set()
        self._fds: dict[int, int] = {}
        self._counts: dict[int, int] = {}

    def take(self, thread_id: str) -> bool:
        """Claim a thread; False when a writer holds it (this store's, or another's)."""
        if thread_id in self._held:
            return False
        if OFD_SETLK is not None:
            shard, offset = place(thread_id)
            fd = self._open(shard)
            try:
                fcntl.fcntl(fd, OFD_SETLK, byte_range(fcntl.F_WRLCK, offset))
            except OSError as exc:
                if not self._counts.get(shard):
                    self._close(shard)
                if exc.errno in BUSY:
                    return False
                raise storage_error(exc, self._dir / f"{shard:02x}", "cannot claim") from exc
            self._counts[shard] = self._counts.get(shard, 0) + 1
        self._held.add(thread_id)
        return True

    def drop(self, thread_id: str) -> None:
        """Let another writer have the thread (a shard's file closes with its last claim)."""
        if thread_id not in self._held:
            return
        self._held.discard(thread_id)
        if OFD_SETLK is None:
            return
        shard, offset = place(thread_id)
        self._counts[shard] -= 1
        if not self._counts[shard]:
            self._close(shard)  # closing drops every lock of the descriptor
            return
        # Unlocking a held range of an open descriptor does not fail; if it ever did, the
        # claim would stay until the shard's last one goes: a false ThreadBusy meanwhile.
        with contextlib.suppress(OSError):
            fcntl.fcntl(self._fds[shard], OFD_SETLK, byte_range(fcntl.F_UNLCK, offset))

    def _open(self, shard: int) -> int:
        fd = self._fds.get(shard)
        if fd is None:
            path = self._dir / f"{shard:02x}"
            try:
                private_dirs(self._dir)
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise storage_error(exc, path, "cannot claim") from exc
            self._fds[shard] = fd
        return fd

    def _close(self, shard: int) -> None:
        self._counts.pop(shard, None)
        fd = self._fds.pop(shard, None)
        if fd is not None:
            os.close(fd)
