"""`sessiond client`: a headless WebSocket client, and the reference for editor plugins.

It does what a Neovim or Emacs plugin would: find a running server through its discovery
lock file, connect with the token, `initialize`, send requests and print the answers.
See docs/headless-clients.md for the exchange on the wire.

A session (the lease to write a thread) lives as long as the connection that opened it,
so `record` resumes and records over one connection; a `resume` printed by one command
is released when that command exits.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from protocol import PROTOCOL_VERSION
from server.config import ServerConfig
from server.transport.discovery import live_servers

if TYPE_CHECKING:  # websockets is imported by the commands that connect, not by `serve`
    from websockets.asyncio.client import ClientConnection

CLIENT_NAME = "sessiond-client"


class RemoteError(Exception):
    """An error answer from the server: its code, message and `data` (with `kind`); as a
    string, the one line a person reads (`ThreadNotFound: no thread …`)."""

    def __init__(self, error: dict[str, Any]) -> None:
        kind = (error.get("data") or {}).get("kind") or f"error {error.get('code')}"
        super().__init__(f"{kind}: {error.get('message')}")
        self.error = error


def discover(home: Path, cwd: str | None = None, port: int | None = None) -> dict[str, Any]:
    """The server to talk to: the one on `port`, else the one whose workspace folder holds
    `cwd` most closely (the innermost folder wins), else the newest."""
    servers = live_servers(home)
    if port is not None:
        servers = [s for s in servers if s.get("port") == port]
    if not servers:
        where = f" on port {port}" if port is not None else ""
        raise LookupError(
            f"no running sessiond{where} in {home / 'servers'}: "
            "start one with `sessiond serve --ws 0`"
        )
    if cwd is not None:
        serving = [
            (len(folder), -rank, record)
            for rank, record in enumerate(servers)
            for folder in record.get("workspaceFolders") or []
            if cwd == folder or cwd.startswith(folder.rstrip("/") + "/")
        ]
        if serving:
            return max(serving, key=lambda match: match[:2])[2]
    return servers[0]


class Client:
    """One authenticated connection; answers are matched to requests by id."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self.notifications: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, record: dict[str, Any], *, folders: list[str] | None = None) -> Client:
        from websockets.asyncio.client import connect

        ws = await connect(
            f"ws://{record['host']}:{record['port']}"
            if ":" not in record["host"]
            else f"ws://[{record['host']}]:{record['port']}",
            additional_headers={"Authorization": f"Bearer {record['token']}"},
            max_size=None,
            compression=None,
        )
        client = cls(ws)
        await client.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientInfo": {"name": CLIENT_NAME, "version": "1"},
                "workspaceFolders": [{"path": folder} for folder in folders or []],
            },
        )
        await client.notify("initialized")
        return client

    async def _read(self) -> None:
        async for frame in self.ws:
            message = orjson.loads(frame)
            if "method" in message:
                self.notifications.put_nowait(message)
            elif (future := self._waiting.pop(message.get("id"), None)) is not None:
                future.set_result(message)
        for future in self._waiting.values():
            future.set_exception(ConnectionError("the server closed the connection"))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        msg_id = next(self._ids)
        answer = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = answer
        await self.ws.send(
            orjson.dumps(
                {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}}
            ).decode()
        )
        reply = await answer
        if "error" in reply:
            raise RemoteError(reply["error"])
        return reply["result"]

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        await self.ws.send(orjson.dumps(message).decode())

    async def close(self) -> None:
        await self.ws.close()
        await self._reader


def add_arguments(client: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The `client` subcommand's own subcommands (each takes the common options too)."""
    client.add_argument("--port", type=int, help="the server's port (default: discover)")
    actions = client.add_subparsers(dest="client_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="list threads, newest first", parents=[common])
    listing.add_argument("--workspace-folder", help="only threads in or under this folder")
    listing.add_argument("--limit", type=int, default=50)
    resume = actions.add_parser(
        "resume", help="resume a thread and print its restore report", parents=[common]
    )
    resume.add_argument("thread_id")
    resume.add_argument("--accept-drift", action="store_true")
    record = actions.add_parser(
        "record", help="resume a thread and record one message", parents=[common]
    )
    record.add_argument("thread_id")
    record.add_argument("--message", required=True)
    record.add_argument("--role", choices=("user", "assistant", "system"), default="user")


async def _run(home: Path, args: argparse.Namespace) -> Any:
    cwd = os.getcwd()
    client = await Client.open(discover(home, cwd, args.port), folders=[cwd])
    try:
        if args.client_command == "list":
            params: dict[str, Any] = {"limit": max(1, min(args.limit, 200))}
            if args.workspace_folder:
                params["workspaceFolder"] = args.workspace_folder
            return await client.request("thread/list", params)
        report = await client.request(
            "thread/resume",
            {"threadId": args.thread_id, "acceptDrift": getattr(args, "accept_drift", False)},
        )
        if args.client_command == "resume":
            return report
        session_id = report["session"]["sessionId"]
        if session_id is None:
            return report  # needs review: nothing is recorded into a drifted workspace
        item = {
            "type": "message",
            "id": str(uuid.uuid4()),
            "role": args.role,
            "content": args.message,
        }
        return await client.request(
            "thread/record",
            {"threadId": args.thread_id, "sessionId": session_id, "items": [item]},
        )
    finally:
        await client.close()


def run(config: ServerConfig, args: argparse.Namespace) -> int:
    """Print the answer as JSON; a failure is one line on stderr, as in every subcommand."""
    try:
        answer = asyncio.run(_run(Path(config.home), args))
    except RemoteError as remote:
        print(f"sessiond: {remote}", file=sys.stderr)
        return 2
    except LookupError as missing:
        print(f"sessiond: {missing}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"sessiond: cannot reach the server: {exc}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(orjson.dumps(answer, option=orjson.OPT_INDENT_2) + b"\n")
    return 0 if not isinstance(answer, dict) or answer.get("status") != "needs_review" else 1
