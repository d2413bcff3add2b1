"""Real WebSocket servers for tests, and a small asyncio JSON-RPC client over `websockets`.

Like tests/support/rpc_client.py, the client is written for the tests (it does not reuse
server/cli/client.py), so a bug in the product's client cannot hide one in the server.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect

from tests.support.rpc_client import HANG_GUARD, REPO, RpcError
from tests.support.wire_check import WireChecked


def server_env(durability: str = "none", extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "SESSIOND_DURABILITY": durability, **(extra or {})}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def wait_for_record(home: Path, pid: int) -> dict[str, Any]:
    """The discovery record the server with `pid` wrote (polled: a hang guard, not a limit)."""
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline:
        for path in (home / "servers").glob("*.json"):
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if record.get("pid") == pid:
                return record
        time.sleep(0.02)
    raise TimeoutError(f"server {pid} wrote no discovery file")


class WsServerProcess:
    """`sessiond serve --ws 0` (WebSocket only) as a subprocess."""

    def __init__(
        self, home: Path, *args: str, durability: str = "none", env: dict[str, str] | None = None
    ) -> None:
        self.home = home
        self.stderr_path = home.parent / f"ws-stderr-{id(self)}.log"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "--home", str(home), "serve", "--ws", "0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            cwd=REPO,
            env=server_env(durability, env),
        )
        self.record = wait_for_record(home, self.proc.pid)

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=HANG_GUARD)
        self._stderr.close()


class WsClient(WireChecked):
    """One connection: requests matched by id, notifications collected in arrival order,
    each answer and notification held to the protocol (tests/support/wire_check.py)."""

    def __init__(self, ws: ClientConnection) -> None:
        super().__init__()
        self.ws = ws
        self._ids = itertools.count(1)
        self._waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.notifications: list[dict[str, Any]] = []
        self.orphans: list[dict[str, Any]] = []
        self.arrivals: list[str] = []  # every message's id or method, in arrival order
        self._arrived = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(
        cls,
        record: dict[str, Any],
        *,
        name: str = "pytest",
        folders: list[str] | None = None,
        initialize: bool = True,
    ) -> WsClient:
        ws = await connect(
            f"ws://127.0.0.1:{record['port']}",
            additional_headers={"Authorization": f"Bearer {record['token']}"},
            max_size=None,
            open_timeout=HANG_GUARD,
        )
        client = cls(ws)
        if initialize:
            await client.request(
                "initialize",
                {
                    "clientInfo": {"name": name, "version": "1"},
                    "workspaceFolders": [{"path": folder} for folder in folders or []],
                },
            )
            await client.notify("initialized")
        return client

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                message = orjson.loads(frame)
                self.arrivals.append(message.get("method") or str(message.get("id")))
                self.received(message)
                if "method" in message:
                    self.notifications.append(message)
                    self._arrived.set()
                elif (future := self._waiting.pop(message.get("id"), None)) is not None:
                    future.set_result(message)
                else:
                    self.orphans.append(message)
                    self._arrived.set()
        finally:
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(ConnectionError("connection closed"))
            self._arrived.set()

    async def send(self, message: Any) -> None:
        """A closed connection is a ConnectionError here as in `_read` (websockets raises
        its own ConnectionClosed on a send: the server went away between two requests)."""
        from websockets.exceptions import ConnectionClosed

        try:
            await self.ws.send(message if isinstance(message, str | bytes) else json.dumps(message))
        except ConnectionClosed as exc:
            raise ConnectionError(f"connection closed: {exc}") from exc

    async def start_request(
        self, method: str, params: Any = None
    ) -> asyncio.Future[dict[str, Any]]:
        """Send a request; the returned future resolves to its answer (result or error)."""
        msg_id = next(self._ids)
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = answer
        self.sent(msg_id, method)
        await self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}})
        return answer

    async def request(self, method: str, params: Any = None) -> Any:
        reply = await asyncio.wait_for(await self.start_request(method, params), HANG_GUARD)
        self.check_wire()
        if "error" in reply:
            raise RpcError(reply["error"])
        return reply["result"]

    async def notify(self, method: str, params: Any = None) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params or {}})

    async def wait_for(self, condition: Any) -> None:
        """Until `condition()` holds, re-checked whenever a message arrives (hang-guarded)."""

        async def wait() -> None:
            while not condition():
                self._arrived.clear()
                if self._reader.done():
                    raise ConnectionError("connection closed while waiting")
                await self._arrived.wait()

        await asyncio.wait_for(wait(), HANG_GUARD)

    async def close(self) -> None:
        await self.ws.close()
        await self._reader
