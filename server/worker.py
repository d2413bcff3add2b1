"""The store worker: all thread work on one thread, in arrival order, several jobs per hop.

One thread means the store's code needs no locks of its own and fsync never blocks the
event loop. Jobs are queued on the loop and handed over in batches: everything that
arrived while the worker was busy goes in its next hop. A hop per job (executor submit,
two futures, a self-pipe write to wake the loop) cost as much CPU as appending a record,
so under load batching is what keeps `thread/record` close to the disk's limit.

It is also where group commit happens. `begin_commit` takes every write not yet synced
and returns the syncs they need, one fdatasync per file; those run on a second thread,
the committer, while the store thread goes on appending. (The store thread holds one
lock around each job, so the committer can begin a commit between two jobs.) Batches with
durable jobs that finish while a commit runs wait, and the next commit covers them all:
one sync per file for however many records arrived meanwhile. Batches are answered
strictly in order, each once it is durable: no answer reports anything before what came
earlier is safe on disk.

A job may wait for something first (`after`: a record's redaction, done on a thread of
its own so that no record's secrets hold another client's work): it stays queued, and so
does every later job of the same connection (its `lane`, `LANE` when it was submitted),
while the jobs of other connections go ahead. Each connection's jobs still run in the order
it sent them.

Work that can wait for a pause (`idle`: the index's WAL checkpoint, whose writes and syncs
made every ~50th `thread/continue` reset take 10 ms instead of 3) runs once no job has
been queued for `IDLE_SECONDS`: one timer per burst, re-armed for what is left of the
pause, never a wake-up while nothing happens.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
logger = logging.getLogger("sessiond.worker")

IDLE_SECONDS = 1.0
"""How long the worker must go without a job before its `idle` work runs: longer than the
gaps within a burst of requests, shorter than a person's pause between two."""

LANE: contextvars.ContextVar[object | None] = contextvars.ContextVar("sessiond_lane", default=None)
"""The connection a request came on (server/rpc/dispatch.py sets it around each handler):
its jobs keep their order among themselves, whatever another connection's wait for."""


@dataclass(slots=True)
class _Batch:
    jobs: list[_Job]
    ready: bool = False  # run, and committed if it had to be: may be answered


_Commit = tuple[list[tuple["_Batch", list["_Job"]]], Callable[[], None]]


@dataclass(slots=True)
class _Job:
    work: Callable[[], Any]
    future: asyncio.Future[Any]
    durable: bool
    then: Callable[[Any], Any] | None
    lane: object | None = None
    after: asyncio.Future[Any] | None = None
    result: Any = None
    error: BaseException | None = field(default=None)

    @property
    def ready(self) -> bool:
        return self.after is None or self.after.done()


class StoreWorker:
    """Runs callables on the store thread. `submit` is called on the event loop only."""

    def __init__(
        self,
        begin_commit: Callable[[], Callable[[], None] | None],
        idle: Callable[[], None] | None = None,
    ) -> None:
        self._idle = idle
        self._active_at = 0.0  # the loop's time of the last job queued
        self._idle_timer: asyncio.TimerHandle | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessiond-store")
        self._committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessiond-commit")
        self._begin_commit = begin_commit
        self._queue: list[_Job] = []
        self._unanswered: collections.deque[_Batch] = collections.deque()  # loop only
        self._busy = False
        # The store's state is touched by the store thread while it runs a job and by the
        # committer while it begins a commit (which takes the writes not yet synced).
        self._store_lock = threading.Lock()
        self._awaiting_commit: list[tuple[_Batch, list[_Job]]] = []  # under the store lock
        self._committing = False  # under the store lock
        self.hops = 0  # batches handed to the thread so far: jobs per hop says how well it batches
        self.commits = 0  # commits begun: records per commit says how well group commit groups

    def submit(
        self,
        work: Callable[..., Any],
        *args: Any,
        durable: bool = False,
        then: Callable[[Any], T] | None = None,
        next_turn: bool = False,
        after: asyncio.Future[Any] | None = None,
    ) -> asyncio.Future[T]:
        """Queue `work(*args)`. A `durable` job is answered only after the batch's commit.

        `after`: run only once it is done (its failure is the job's, and `work` does not
        run); the connection's later jobs wait with it, other connections' do not.

        `then` runs on the loop with work's result and gives the future's value: a handler
        can finish its answer there instead of in a task awaiting the future.

        `next_turn` is for plain (not async) request handlers, to keep arrival order: a
        coroutine handler's body starts one loop turn after its request arrives, a plain
        handler at once. Queued at once, a record would overtake a `thread/close` sent
        before it, so a plain handler's job joins the queue one turn later too.
        """
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        job = _Job(
            functools.partial(work, *args) if args else work,
            future,
            durable,
            then,
            LANE.get(),
            after,
        )
        if after is not None and not after.done():
            after.add_done_callback(lambda _: self._kick(future.get_loop()))
        if next_turn:
            future.get_loop().call_soon(self._enqueue, job)
        else:
            self._enqueue(job)
        return future

    def _enqueue(self, job: _Job, *, active: bool = True) -> None:
        loop = job.future.get_loop()
        if active and self._idle is not None:
            self._active_at = loop.time()
            if self._idle_timer is None:
                self._idle_timer = loop.call_later(IDLE_SECONDS, self._pause, loop)
        self._queue.append(job)
        if not self._busy:
            self._hand_over(loop)

    def _pause(self, loop: asyncio.AbstractEventLoop) -> None:
        """The idle timer: the `idle` work once a whole pause has passed with nothing
        queued or running, else the timer again for the rest of the pause."""
        left = self._active_at + IDLE_SECONDS - loop.time()
        if left > 0 or self._busy or self._queue:
            self._idle_timer = loop.call_later(max(left, IDLE_SECONDS / 10), self._pause, loop)
            return
        self._idle_timer = None
        assert self._idle is not None
        job = _Job(self._idle, loop.create_future(), False, None)
        job.future.add_done_callback(log_failure("idle work failed"))
        self._enqueue(job, active=False)  # not activity: no timer after it

    def _kick(self, loop: asyncio.AbstractEventLoop) -> None:
        """A job's `after` is done: it may go now, if the thread is idle."""
        if not self._busy and self._queue:
            self._hand_over(loop)

    def _take(self) -> list[_Job]:
        """The queued jobs that may run now, in order: not one waiting for its `after`,
        nor one behind such a job in the same lane."""
        if all(job.ready for job in self._queue):
            taken, self._queue = self._queue, []
        else:
            taken = self._waiting()
        for job in taken:
            if job.after is not None and (failed := _failure(job.after)) is not None:
                job.error = failed  # on the loop: the future is the loop's to read
        return taken

    def _waiting(self) -> list[_Job]:
        taken, left, held = [], [], set()
        for job in self._queue:
            if job.ready and (job.lane is None or job.lane not in held):
                taken.append(job)
            else:
                left.append(job)
                if job.lane is not None:
                    held.add(job.lane)
        self._queue = left
        return taken

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        jobs = self._take()
        if not jobs:
            return  # every queued job waits for something: handed over once it is done
        batch = _Batch(jobs)
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
            if job.error is not None:
                continue  # what it waited for failed (a refused record): not run
            try:
                with self._store_lock:
                    job.result = job.work()
            except BaseException as exc:  # every failure goes to its caller
                job.error = exc
                continue
            if job.durable:
                durable.append(job)
        loop.call_soon_threadsafe(self._ran, batch, not durable)
        if not durable:
            return
        with self._store_lock:
            self._awaiting_commit.append((batch, durable))
            if self._committing:
                return  # the committer begins the next commit as soon as its sync is done
            started = self._begin(loop)
            self._committing = started is not None
        if started is not None:
            self._committer.submit(self._commit, started, loop)

    def _begin(self, loop: asyncio.AbstractEventLoop) -> _Commit | None:
        """With the store lock held: a commit for every waiting batch (None: nothing to
        sync, and the waiting batches are durable already)."""
        if not self._awaiting_commit:
            return None
        waiting, self._awaiting_commit = self._awaiting_commit, []
        try:
            sync = self._begin_commit()
        except BaseException as exc:  # not durable: nobody gets an ack
            for _, durable in waiting:
                _fail(durable, exc)
            sync = None
        if sync is None:
            loop.call_soon_threadsafe(self._committed, [batch for batch, _ in waiting])
            return None
        self.commits += 1
        return waiting, sync

    def _commit(self, started: _Commit, loop: asyncio.AbstractEventLoop) -> None:
        """On the committer thread: run commits back to back while batches wait for one.

        The next commit is begun here, as soon as a sync ends, rather than by the store
        thread after its current batch: that wait was a third of the time between syncs.
        """
        commit: _Commit | None = started
        while commit is not None:
            waiting, sync = commit
            try:
                sync()
            except BaseException as exc:
                for _, durable in waiting:
                    _fail(durable, exc)
            loop.call_soon_threadsafe(self._committed, [batch for batch, _ in waiting])
            with self._store_lock:
                commit = self._begin(loop)
                self._committing = commit is not None

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

        def locked() -> T:
            with self._store_lock:
                return work()

        return self._executor.submit(locked).result()

    def shutdown(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self._executor.shutdown(wait=True)
        self._committer.shutdown(wait=True)


def log_failure(what: str, level: int = logging.WARNING) -> Callable[[asyncio.Future[Any]], None]:
    """A done-callback for a job nobody awaits: its failure logged as `what`, never lost
    (and never "exception was never retrieved")."""

    def logged(future: asyncio.Future[Any]) -> None:
        if not future.cancelled() and (error := future.exception()) is not None:
            logger.log(level, "%s: %s", what, error)

    return logged


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


def _failure(future: asyncio.Future[Any]) -> BaseException | None:
    if future.cancelled():
        return asyncio.CancelledError()
    return future.exception()


class Batched:
    """Callables run on one thread of their own, in batches: everything queued while the
    thread was busy goes in its next hop, and the whole batch is answered with one wake of
    the loop (a record's redaction: a hop each, with 16 records in flight, cost a third of
    the rate of records that held a secret). `submit` is called on the event loop only."""

    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._queue: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        self._busy = False

    def submit(self, work: Callable[[], T]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.append((work, future))
        if not self._busy:
            self._hand_over(loop)
        return future

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self._queue = self._queue, []
        self._busy = True
        self._executor.submit(self._run, batch, loop)

    def _run(
        self,
        batch: list[tuple[Callable[[], Any], asyncio.Future[Any]]],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        for work, future in batch:
            if future.cancelled():
                continue
            try:
                outcomes.append((future, work(), None))
            except BaseException as exc:  # every failure goes to its caller
                outcomes.append((future, None, exc))
        loop.call_soon_threadsafe(self._done, outcomes)

    def _done(self, outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
        for future, result, error in outcomes:
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)
        self._busy = False
        if self._queue:
            self._hand_over(asyncio.get_running_loop())

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True)
