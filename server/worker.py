"""The store worker: all thread work on one thread, in arrival order, several jobs per hop.

One thread means the store needs no locks and fsync never blocks the event loop. Jobs are
queued on the loop and handed over in batches: everything that arrived while the worker
was busy goes in its next hop. A hop per job (executor submit, two futures, a self-pipe
write to wake the loop) cost as much CPU as appending a record, so under load batching
is what keeps `thread/record` close to the disk's limit.

It is also where group commit happens. `begin_commit` (on the store thread) takes every
write not yet synced and returns the syncs they need, one fdatasync per file; those run on
a second thread, the committer, while the store thread goes on appending. Batches with
durable jobs that finish while a commit runs wait, and the next commit covers them all:
one sync per file for however many records arrived meanwhile. Batches are answered
strictly in order, each once it is durable: no answer reports anything before what came
earlier is safe on disk.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
logger = logging.getLogger("sessiond.worker")


@dataclass(slots=True)
class _Batch:
    jobs: list[_Job]
    ready: bool = False  # run, and committed if it had to be: may be answered


@dataclass(slots=True)
class _Job:
    work: Callable[[], Any]
    future: asyncio.Future[Any]
    durable: bool
    then: Callable[[Any], Any] | None
    result: Any = None
    error: BaseException | None = field(default=None)


class StoreWorker:
    """Runs callables on the store thread. `submit` is called on the event loop only."""

    def __init__(self, begin_commit: Callable[[], Callable[[], None] | None]) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessiond-store")
        self._committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessiond-commit")
        self._begin_commit = begin_commit
        self._queue: list[_Job] = []
        self._unanswered: collections.deque[_Batch] = collections.deque()  # loop only
        self._busy = False
        self._awaiting_commit: list[tuple[_Batch, list[_Job]]] = []  # store thread only
        self._committing = False  # store thread only
        self.hops = 0  # batches handed to the thread so far: jobs per hop says how well it batches
        self.commits = 0  # commits begun: records per commit says how well group commit groups

    def submit(
        self,
        work: Callable[..., Any],
        *args: Any,
        durable: bool = False,
        then: Callable[[Any], T] | None = None,
    ) -> asyncio.Future[T]:
        """Queue `work(*args)`. A `durable` job is answered only after the batch's commit.

        `then` runs on the loop with work's result and gives the future's value: a handler
        can finish its answer there instead of in a task awaiting the future.
        """
        future, job = self._job(work, args, durable, then)
        self._enqueue(job)
        return future

    def submit_in_turn(
        self,
        work: Callable[..., Any],
        *args: Any,
        durable: bool = False,
        then: Callable[[Any], T] | None = None,
    ) -> asyncio.Future[T]:
        """`submit` for a plain (not async) request handler, keeping arrival order.

        A coroutine handler's body starts one loop turn after its request arrives; a plain
        handler runs at once. Queued at once, a record would overtake a `thread/close`
        sent before it, so a plain handler's job joins the queue one turn later too.
        """
        future, job = self._job(work, args, durable, then)
        future.get_loop().call_soon(self._enqueue, job)
        return future

    def _job(
        self,
        work: Callable[..., Any],
        args: tuple[Any, ...],
        durable: bool,
        then: Callable[[Any], T] | None,
    ) -> tuple[asyncio.Future[T], _Job]:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        return future, _Job(functools.partial(work, *args) if args else work, future, durable, then)

    def _enqueue(self, job: _Job) -> None:
        self._queue.append(job)
        if not self._busy:
            self._hand_over(job.future.get_loop())

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = _Batch(self._queue)
        self._queue = []
        self._busy = True
        self.hops += 1
        self._unanswered.append(batch)
        self._executor.submit(self._run, batch, loop)

    def _run(self, batch: _Batch, loop: asyncio.AbstractEventLoop) -> None:
        """On the store thread: each job in order; durable ones then wait for a commit."""
        durable = []
        for job in batch.jobs:
            if job.future.cancelled():
                continue  # cancelled before it started: do nothing, as the client was told
            try:
                job.result = job.work()
            except BaseException as exc:  # every failure goes to its caller
                job.error = exc
                continue
            if job.durable:
                durable.append(job)
        loop.call_soon_threadsafe(self._ran, batch, not durable)
        if durable:
            self._awaiting_commit.append((batch, durable))
            self._begin(loop)

    def _begin(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the store thread: unless a commit runs, start one for every waiting batch."""
        if self._committing or not self._awaiting_commit:
            return
        waiting, self._awaiting_commit = self._awaiting_commit, []
        try:
            sync = self._begin_commit()
        except BaseException as exc:  # not durable: nobody gets an ack
            for _, durable in waiting:
                _fail(durable, exc)
            sync = None
        if sync is None:
            loop.call_soon_threadsafe(self._committed, [batch for batch, _ in waiting])
            return
        self._committing = True
        self.commits += 1
        self._committer.submit(self._commit, waiting, sync, loop)

    def _commit(
        self,
        waiting: list[tuple[_Batch, list[_Job]]],
        sync: Callable[[], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        """On the committer thread: the syncs; then the batches may be answered, and the
        store thread may begin the next commit."""
        try:
            sync()
        except BaseException as exc:
            for _, durable in waiting:
                _fail(durable, exc)
        loop.call_soon_threadsafe(self._committed, [batch for batch, _ in waiting])
        with contextlib.suppress(RuntimeError):  # shutting down: no further commit
            self._executor.submit(self._commit_done, loop)

    def _commit_done(self, loop: asyncio.AbstractEventLoop) -> None:
        self._committing = False
        self._begin(loop)

    def _ran(self, batch: _Batch, ready: bool) -> None:
        self._busy = False
        if ready:
            self._committed([batch])
        if self._queue:
            self._hand_over(asyncio.get_running_loop())

    def _committed(self, batches: list[_Batch]) -> None:
        for batch in batches:
            batch.ready = True
        while self._unanswered and self._unanswered[0].ready:
            for job in self._unanswered.popleft().jobs:
                _answer(job)

    def run_blocking(self, work: Callable[[], T]) -> T:
        """For shutdown, when the loop no longer runs: wait for `work` on the thread."""
        return self._executor.submit(work).result()

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True)
        self._committer.shutdown(wait=True)


def _fail(jobs: list[_Job], error: BaseException) -> None:
    for job in jobs:
        job.error = error


def _answer(job: _Job) -> None:
    if job.future.done():
        return  # cancelled meanwhile; the client has its answer
    if job.error is None and job.then is not None:
        try:
            job.result = job.then(job.result)
        except Exception as exc:
            job.error = exc
    if job.error is not None:
        job.future.set_exception(job.error)
    else:
        job.future.set_result(job.result)
