"""The store worker: all thread work on one thread, in arrival order, several jobs per hop.

One thread means the store needs no locks and fsync never blocks the event loop. Jobs are
queued on the loop and handed over in batches: everything that arrived while the worker
was busy goes in its next hop. A hop per job (executor submit, two futures, a self-pipe
write to wake the loop) cost as much CPU as appending a record, so under load batching
is what keeps `thread/record` close to the disk's limit.

It is also where group commit happens: a batch that holds durable jobs ends with one
`commit` (one fdatasync per file written), and only then are those jobs answered. Records
that arrive during that sync wait for the next batch and share its sync.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
logger = logging.getLogger("sessiond.worker")


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

    def __init__(self, commit: Callable[[], object]) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessiond-store")
        self._commit = commit
        self._queue: list[_Job] = []
        self._busy = False
        self.hops = 0  # batches handed to the thread so far: jobs per hop says how well it batches

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
        batch, self._queue = self._queue, []
        self._busy = True
        self.hops += 1
        done = self._executor.submit(self._run, batch)
        done.add_done_callback(lambda _: loop.call_soon_threadsafe(self._answer, batch, loop))

    def _run(self, batch: list[_Job]) -> None:
        """On the worker thread: each job in order, then the commit its durable jobs need."""
        durable = []
        for job in batch:
            if job.future.cancelled():
                continue  # cancelled before it started: do nothing, as the client was told
            try:
                job.result = job.work()
            except BaseException as exc:  # every failure goes to its caller
                job.error = exc
                continue
            if job.durable:
                durable.append(job)
        if durable:
            try:
                self._commit()
            except BaseException as exc:  # not durable: nobody gets an ack
                for job in durable:
                    job.error = exc

    def _answer(self, batch: list[_Job], loop: asyncio.AbstractEventLoop) -> None:
        self._busy = False
        for job in batch:
            if job.future.done():
                continue
            if job.error is None and job.then is not None:
                try:
                    job.result = job.then(job.result)
                except Exception as exc:
                    job.error = exc
            if job.error is not None:
                job.future.set_exception(job.error)
            else:
                job.future.set_result(job.result)
        if self._queue:
            self._hand_over(loop)

    def run_blocking(self, work: Callable[[], T]) -> T:
        """For shutdown, when the loop no longer runs: wait for `work` on the thread."""
        return self._executor.submit(work).result()

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True)
