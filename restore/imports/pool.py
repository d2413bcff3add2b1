"""Worker processes that parse source files ahead of a batch import's writer.

Parsing a source file (parse.py) is pure Python, so threads would share
one core; worker processes use the others while the importing process plans, writes
threads, checkpoints and index rows in file order. Only a batch import uses them, only
where it pays (importer.py decides), and only where they are cheap and safe:

- Linux, forked (a fork costs milliseconds; a spawned interpreter costs 150-400 ms,
  more than the parse of many files), and only from a process with one thread (a fork
  copies no other thread, so none can hold a lock the child would need). The workers are
  forked when the pool starts, before the import opens any thread file: a thread's lock
  (flock) is held by every descriptor of it, and a worker must hold none.
- A worker ignores Ctrl-C (its importer stops it cleanly) and dies with its importer
  (PR_SET_PDEATHSIG): a killed import leaves no process behind.

Not `concurrent.futures.ProcessPoolExecutor`: its two helper threads in the importing
process (results and the task queue) took the GIL from the writer so often that the
importer spent about as much CPU as the parse it handed off (measured on 10k files).
Here each worker has one pipe, files go to the workers in turn and their results are
read in the same order, by the importer's own thread: nothing runs behind its back.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from restore.imports.parse import Flush, Parsed, ParseStart, parse_whole

MAX_WORKERS = 8
PR_SET_PDEATHSIG = 1


def available() -> bool:
    """Whether worker processes can be forked safely here, now."""
    return sys.platform == "linux" and threading.active_count() == 1 and cpus() > 1


def cpus() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Ticket:
    """One file handed to a worker; `ParsePool.result` redeems it, in submission order."""

    __slots__ = ("worker",)

    def __init__(self, worker: int) -> None:
        self.worker = worker


class ParsePool:
    """`workers` forked processes, each parsing one whole source file at a time. Files are
    handed out in turn; each worker answers in the order it was given them, so results
    are redeemed in submission order. A worker that dies (killed) is left out: its files
    are parsed by the importer (`result` answers None)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pipes: list[Connection | None] = []
        self._processes: list[Any] = []
        self._next = 0
        context = multiprocessing.get_context("fork")
        # Ctrl-C waits until the workers are forked: landing in a fork's at-fork hooks
        # (logging's), it would be printed there and lost, and the import went on.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self._fork(context, workers)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    def _fork(self, context: Any, workers: int) -> None:
        for _ in range(workers):
            ours, theirs = context.Pipe()
            # The child gets a copy of every descriptor: it closes the importer's ends
            # (its own one's too), or a worker never reads the end of its pipe.
            ends = [*self._pipes, ours]
            process = context.Process(target=_serve, args=(theirs, ends, os.getpid()), daemon=True)
            process.start()
            theirs.close()
            self._pipes.append(ours)
            self._processes.append(process)

    def submit(self, start: ParseStart) -> Ticket | None:
        """Hand a file to the next live worker; None when none is left."""
        for _ in range(self.workers):
            worker, self._next = self._next, (self._next + 1) % self.workers
            pipe = self._pipes[worker]
            if pipe is None:
                continue
            try:
                pipe.send(start)
            except OSError:
                self._lose(worker)
                continue
            return Ticket(worker)
        return None

    def result(self, ticket: Ticket) -> list[Flush | Parsed] | None:
        """The parse of a submitted file (redeemed in submission order); None when its
        worker died. An error of the parse itself is raised here, as without workers."""
        pipe = self._pipes[ticket.worker]
        if pipe is None:
            return None
        try:
            ok, value = pipe.recv()
        except (EOFError, OSError):
            self._lose(ticket.worker)
            return None
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def _lose(self, worker: int) -> None:
        pipe, self._pipes[worker] = self._pipes[worker], None
        if pipe is not None:
            pipe.close()

    def close(self) -> None:
        """Stop the workers (a worker still parsing is killed: nobody wants its answer)."""
        for worker in range(self.workers):
            self._lose(worker)  # a worker reads EOF and exits
        for process in self._processes:
            process.join(timeout=1)
            if process.is_alive():
                process.kill()
                process.join()


def _serve(pipe: Connection, importers_ends: list[Connection | None], importer: int) -> None:
    """A worker: parse each file it is sent, answer (ok, items) or (False, error)."""
    for end in importers_ends:
        if end is not None:
            end.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked while forking
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != importer:  # it died before the line above: nobody is waiting
        return
    while True:
        try:
            start = pipe.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple[bool, Any] = (True, parse_whole(start))
        except Exception as exc:  # the importer raises it when this file's turn comes
            answer = (False, exc)
        try:
            pipe.send(answer)
        except Exception:  # gone, or an error that does not pickle: the importer parses
            return  # the file itself (and meets that error there)
