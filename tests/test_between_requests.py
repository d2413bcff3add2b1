"""The server's own store work that no client waits for (the file watcher's look at what
changed) runs between requests: never beside an answer being made, where the store
thread's stats and the loop's writing took the interpreter lock from each other (the look
~5x slower, the answer held), and never starved by a steady stream of requests.

A real SessiondServer on a real data dir, its real store worker and event loop; the
connections are stand-ins holding requests in flight, as a connection's dispatcher does
(server/rpc/dispatch.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from server import app
from server.app import SessiondServer
from server.config import ServerConfig


class Client:
    """A connection with requests in flight (their futures, as the dispatcher keeps them)."""

    initialized = True

    def __init__(self) -> None:
        self.in_flight: dict[int, asyncio.Future[Any]] = {}


def _server(home: Path, clients: int) -> tuple[SessiondServer, list[Client]]:
    server = SessiondServer(ServerConfig(home=str(home), durability="none"))
    connected = [Client() for _ in range(clients)]
    server.connections.extend(connected)  # type: ignore[arg-type]
    return server, connected


def test_own_work_waits_until_every_request_in_flight_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app, "QUIET_WAIT_SECONDS", 60.0)  # only the answers can let it run
    server, (one, two) = _server(tmp_path / "home", 2)
    ran: list[str] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        one.in_flight[1], two.in_flight[7] = loop.create_future(), loop.create_future()
        look = asyncio.ensure_future(server.run_between_requests(ran.append, "look"))
        await server.run_in_worker(lambda: None)  # the store thread was free all along
        await asyncio.sleep(0.05)
        assert ran == [] and not look.done()
        one.in_flight.pop(1).set_result({})  # answered: the other one is still being made
        await server.run_in_worker(lambda: None)
        await asyncio.sleep(0.05)
        assert ran == []
        two.in_flight.pop(7).set_result({})
        await asyncio.wait_for(look, 10)
        assert ran == ["look"]

    try:
        asyncio.run(scenario())
    finally:
        server.close()


def test_own_work_runs_at_once_when_no_request_is_in_flight(tmp_path: Path) -> None:
    server, _ = _server(tmp_path / "home", 1)

    async def scenario() -> None:
        assert await asyncio.wait_for(server.run_between_requests(lambda: "looked"), 10) == "looked"

    try:
        asyncio.run(scenario())
    finally:
        server.close()


def test_a_steady_stream_of_requests_does_not_starve_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One request always in flight (each answered as the next arrives): the look runs
    anyway, `QUIET_WAIT_SECONDS` later."""
    monkeypatch.setattr(app, "QUIET_WAIT_SECONDS", 0.2)
    server, (client,) = _server(tmp_path / "home", 1)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        client.in_flight[0] = loop.create_future()
        look = asyncio.ensure_future(server.run_between_requests(lambda: "looked"))
        for n in range(1, 10_000):
            if look.done():
                break
            client.in_flight[n] = loop.create_future()  # the next arrives, then one is answered
            client.in_flight.pop(n - 1).set_result({})
            await asyncio.sleep(0.005)
        assert look.done() and look.result() == "looked"

    try:
        asyncio.run(scenario())
    finally:
        server.close()
