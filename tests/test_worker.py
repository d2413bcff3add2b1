"""The store worker's contract: arrival order, batching, group commit, cancellation.

These run the real StoreWorker (real threads and a real event loop); the jobs and syncs
are plain callables, because the contract is about when and in which order they run and
are answered, whatever they do. The syncs of real files: tests/test_store.py.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from protocol.errors import ErrorKind, ProtocolError
from server.worker import StoreWorker


def run(coro_factory) -> None:  # type: ignore[no-untyped-def]
    asyncio.run(coro_factory())


def test_jobs_run_in_arrival_order_and_later_ones_share_a_hop() -> None:
    ran: list[int] = []
    gate = threading.Event()
    worker = StoreWorker(begin_commit=lambda: None)

    async def scenario() -> None:
        first = worker.submit(gate.wait)  # holds the worker while the others queue
        rest = [worker.submit(ran.append, n) for n in range(10)]
        gate.set()
        await first
        await asyncio.gather(*rest)

    run(scenario)
    worker.shutdown()
    assert ran == list(range(10))
    assert worker.hops == 2  # everything queued behind the busy worker went in one hop


def test_durable_jobs_are_answered_only_after_their_sync_and_in_order() -> None:
    events: list[str] = []
    gate = threading.Event()
    worker = StoreWorker(begin_commit=lambda: lambda: events.append("sync"))

    async def scenario() -> None:
        busy = worker.submit(gate.wait)
        answers = [
            worker.submit(events.append, "write a", durable=True),
            worker.submit(events.append, "read b"),
        ]
        gate.set()
        await busy
        for answer in asyncio.as_completed(answers):
            await answer
            events.append("answered")

    run(scenario)
    worker.shutdown()
    assert events == ["write a", "read b", "sync", "answered", "answered"]


def test_writes_made_during_a_sync_share_the_next_one() -> None:
    """Group commit: while one sync runs, every durable batch that finishes waits, and a
    single next sync covers them all; answers still come in the order sent."""
    syncing = threading.Event()
    release = threading.Event()
    syncs: list[int] = []
    written: list[int] = []

    def begin_commit():  # type: ignore[no-untyped-def]
        covered = len(written)

        def sync() -> None:
            syncs.append(covered)
            if len(syncs) == 1:
                syncing.set()
                release.wait()

        return sync

    worker = StoreWorker(begin_commit=begin_commit)
    answered: list[int] = []

    async def scenario() -> None:
        def record(n: int) -> int:
            written.append(n)
            return n

        first = worker.submit(record, 0, durable=True)
        while not syncing.is_set():
            await asyncio.sleep(0.001)
        later = []
        for n in range(1, 6):  # the store thread is idle: most go in a batch of their own
            later.append(worker.submit(record, n, durable=True))
            await asyncio.sleep(0)
        while len(written) < 6:
            await asyncio.sleep(0.001)
        release.set()
        for future in [first, *later]:
            future.add_done_callback(lambda f: answered.append(f.result()))
        await asyncio.gather(first, *later)

    run(scenario)
    worker.shutdown()
    assert syncs == [1, 6]  # the second sync covers all five later writes
    assert worker.commits == 2
    assert answered == [0, 1, 2, 3, 4, 5]


def test_a_failed_sync_fails_the_durable_jobs_only() -> None:
    def failing_sync() -> None:
        raise ProtocolError(ErrorKind.STORAGE_ERROR, "fdatasync failed: EIO")

    gate = threading.Event()
    worker = StoreWorker(begin_commit=lambda: failing_sync)

    async def scenario() -> tuple[BaseException | None, object]:
        busy = worker.submit(gate.wait)
        durable = worker.submit(lambda: "written", durable=True)
        plain = worker.submit(lambda: "read")
        gate.set()
        await busy
        results = await asyncio.gather(durable, plain, return_exceptions=True)
        return results[0], results[1]

    durable, plain = asyncio.run(scenario())
    worker.shutdown()
    assert isinstance(durable, ProtocolError) and durable.kind == ErrorKind.STORAGE_ERROR
    assert plain == "read"


def test_a_job_cancelled_before_it_starts_never_runs() -> None:
    ran: list[str] = []
    gate = threading.Event()
    worker = StoreWorker(begin_commit=lambda: None)

    async def scenario() -> None:
        busy = worker.submit(gate.wait)
        doomed = worker.submit(ran.append, "cancelled")
        kept = worker.submit(ran.append, "kept")
        doomed.cancel()
        gate.set()
        await busy
        await kept
        with pytest.raises(asyncio.CancelledError):
            await doomed

    run(scenario)
    worker.shutdown()
    assert ran == ["kept"]


def test_then_finishes_the_answer_on_the_loop() -> None:
    worker = StoreWorker(begin_commit=lambda: None)
    threads: list[str] = []

    def finish(value: int) -> dict[str, int]:
        threads.append(threading.current_thread().name)
        return {"value": value + 1}

    async def scenario() -> object:
        return await worker.submit(lambda: 41, then=finish)

    assert asyncio.run(scenario()) == {"value": 42}
    worker.shutdown()
    assert threads == [threading.main_thread().name]


def test_an_error_in_a_job_reaches_its_caller_and_the_next_job_still_runs() -> None:
    worker = StoreWorker(begin_commit=lambda: None)

    async def scenario() -> tuple[object, object]:
        broken = worker.submit(lambda: 1 / 0)
        fine = worker.submit(lambda: "ok")
        results = await asyncio.gather(broken, fine, return_exceptions=True)
        return results[0], results[1]

    broken, fine = asyncio.run(scenario())
    worker.shutdown()
    assert isinstance(broken, ZeroDivisionError)
    assert fine == "ok"
