"""Writer marks: which threads a writer holds, so a crashed one is found without a scan.

A writer creates `writers/<threadId>` before its first append and holds an exclusive
`flock` on it while it is open; the mark itself stays until the thread's index row covers
every append (a writer closed before its row is written leaves it unheld, and the store
removes it once the row is written: no descriptor is kept per closed thread).

The first listing of a process looks only at this directory: a mark nobody
holds was left by a writer that died (kill -9, a crash, a full disk that kept its row
from being written), and that thread's file is read again; a held one is a writer alive
in another process, whose file is read again too (its row may lag by `FLUSH_SECONDS`).
The cost of finding crashed writers is the number of threads being written, not the
number of threads.

A held mark also names who holds the thread (`name`: the client and pid, as JSON), for
other processes' ThreadBusy; a writer taking over a dead writer's mark empties it first.

The mark's lock, not the thread file's, is what a prober takes: taking the thread's own
lock, even for a moment, would make a writer opening it at that moment fail ThreadBusy.
Lock files that are unlinked need an identity check (the prober may unlink the mark a
writer has just opened): a writer's lock counts only on the file still at the path.

A prober holds at most `PROBE_HELD` dead marks (a descriptor each) until it has read
their threads, and removes those; a dead mark beyond them (a process killed with
thousands of sessions open, or parked: store.py) is read again like a live writer's and
left in place, for its writer's next row or a later prober to remove.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass

import orjson

from protocol.errors import ProtocolError
from restore.home.files import private_dirs
from restore.home.layout import Layout
from restore.ids import validate_thread_id

PROBE_HELD = 64
"""Dead marks one probe keeps locked (and removes once read): descriptors stay bounded."""


def hold(layout: Layout, thread_id: str) -> int:
    """Create (or take over) the thread's mark and lock it; the descriptor is the hold.

    Blocks only while a prober reads the thread behind a dead writer's mark."""
    path = layout.writer_mark_path(thread_id)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            private_dirs(path.parent)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            found = os.fstat(fd)
            if found.st_ino == os.stat(path).st_ino:
                if found.st_size:  # a previous writer's name (`name`): not this one's
                    os.ftruncate(fd, 0)
                return fd
        except FileNotFoundError:
            pass  # unlinked by a prober between our open and our lock: make a new one
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def name(fd: int, holder: str) -> None:
    """Write who holds the mark's thread into the held mark, for other processes'
    ThreadBusy (files.py `_holder`): no file is made for the name. Only its holder writes
    a held mark; a reader that catches it half-written says "another process"."""
    named = orjson.dumps({"holder": holder, "pid": os.getpid()})
    os.pwrite(fd, named, 0)
    os.ftruncate(fd, len(named))


def release(layout: Layout, thread_id: str, fd: int) -> None:
    """The thread's row covers its appends: the mark goes (the file first, then the lock,
    so nobody sees an unheld mark of a clean writer)."""
    path = layout.writer_mark_path(thread_id)
    with contextlib.suppress(OSError):
        if os.fstat(fd).st_ino == os.stat(path).st_ino:
            os.unlink(path)
    os.close(fd)


def clear_if_free(layout: Layout, thread_id: str) -> None:
    """Remove the thread's mark unless a writer holds it (then it is that writer's)."""
    try:
        fd = os.open(layout.writer_mark_path(thread_id), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # gone already: a reader elsewhere read the thread and removed it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return
    release(layout, thread_id, fd)


@dataclass
class Marks:
    """What the writers' directory says, probed: threads whose writer died (their marks
    locked by the prober until `clear`), and threads to read again whose marks stay: a
    live writer holds them, or their writer died beyond the `PROBE_HELD` this probe holds."""

    layout: Layout
    dead: dict[str, int]
    alive: list[str]

    @property
    def thread_ids(self) -> list[str]:
        return [*self.dead, *self.alive]

    def clear(self) -> None:
        """The dead writers' threads are read into the index: their marks go."""
        for thread_id, fd in self.dead.items():
            release(self.layout, thread_id, fd)
        self.dead = {}


def probe(layout: Layout) -> Marks:
    """Every mark in `writers/`, each tried with a non-blocking lock."""
    marks = Marks(layout, {}, [])
    try:
        with os.scandir(layout.writers_dir) as entries:
            names = [entry.name for entry in entries]
    except FileNotFoundError:
        return marks
    for name in names:
        try:
            validate_thread_id(name)
        except ProtocolError:
            continue  # not a mark
        try:
            fd = os.open(layout.writers_dir / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # released while we looked (or not ours): nothing to read again
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            marks.alive.append(name)
            continue
        if len(marks.dead) >= PROBE_HELD:
            os.close(fd)
            marks.alive.append(name)
            continue
        marks.dead[name] = fd
    return marks
