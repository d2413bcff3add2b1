"""Thread notices (`thread/started`, `thread/updated`) as the server sends them: in the
order they were announced, and never held behind store work they do not need.

A real SessiondServer on a real data dir, its real store worker and event loop; the
clients are recorders of what the server sends them (what is under test is the server's
ordering, not a transport: the wire's is tests/test_subagent_threads.py's)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from server.app import SessiondServer
from server.config import ServerConfig
from server.host import thread_notice


class Recorder:
    """A connected, initialized client: what it was sent, in order."""

    initialized = True

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def notify(self, method: str, params: Any) -> None:
        self.sent.append((method, params["thread"]["threadId"]))


def _server(home: Path) -> tuple[SessiondServer, Recorder]:
    server = SessiondServer(ServerConfig(home=str(home), durability="none"))
    client = Recorder()
    server.connections.append(client)  # type: ignore[arg-type]
    return server, client


def test_a_notice_with_nothing_to_count_is_sent_while_the_store_thread_is_busy(
    tmp_path: Path,
) -> None:
    """A new thread's notice (no sub-agents yet: nothing to count) goes out at once, so the
    answer of the request that announces it (a `thread/continue` reset's, awaiting it)
    does not wait behind whatever the store thread took up meanwhile."""
    server, client = _server(tmp_path / "home")
    gate = threading.Event()

    async def scenario() -> None:
        busy = server.worker.submit(gate.wait, 10)  # another client's long job
        sent = server.announce_threads([thread_notice({"threadId": "t-new", "childCount": 0},
                                                      started=True)])  # fmt: skip
        await asyncio.sleep(0)
        assert client.sent == [("thread/started", "t-new")]
        assert sent.done()
        gate.set()
        await busy

    try:
        asyncio.run(scenario())
    finally:
        gate.set()
        server.close()


def test_notices_keep_their_order_when_an_earlier_one_waits_for_its_counts(
    tmp_path: Path,
) -> None:
    """One announced while an earlier one is still being counted on the store thread comes
    after it, though it has nothing to count itself: a client applies them in order."""
    server, client = _server(tmp_path / "home")
    gate = threading.Event()

    async def scenario() -> None:
        busy = server.worker.submit(gate.wait, 10)
        counted = server.announce_threads([thread_notice({"threadId": "t-a", "childCount": None})])
        plain = server.announce_threads([thread_notice({"threadId": "t-b", "childCount": 0})])
        await asyncio.sleep(0.05)
        assert client.sent == []  # both wait: the first for its count, the second for it
        gate.set()
        await asyncio.gather(busy, counted, plain)
        assert client.sent == [("thread/updated", "t-a"), ("thread/updated", "t-b")]
        later = server.announce_threads([thread_notice({"threadId": "t-c", "childCount": 0})])
        assert later.done() and client.sent[-1] == ("thread/updated", "t-c")

    try:
        asyncio.run(scenario())
    finally:
        gate.set()
        server.close()
