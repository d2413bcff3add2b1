"""`sessiond client`: a headless WebSocket client, and the reference for editor plugins.

It does what a Neovim or Emacs plugin would: find a running server through its discovery
lock file, connect (its Unix socket in the data dir, else its loopback port), prove it
holds the token and have the server prove it too before anything is sent
(server/transport/proof.py), `initialize`, send requests and print the answers.
See docs/headless-clients.md for the exchange on the wire. With `--spawn` it does what the
VS Code extension does for every window: connect to the server already running for this
user and data dir, else start one that lingers (server/cli/spawn.py), so only the first
window pays for a process start.

A session (the lease to write a thread) lives as long as the connection that opened it,
so `record` resumes and records over one connection; a `resume` printed by one command
is released when that command exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import logging
import os
import socket
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from protocol import PROTOCOL_VERSION
from protocol.errors import ErrorKind, ProtocolError
from server.cli.terminal import safe
from server.config import ServerConfig
from server.transport import peers, proof
from server.transport.discovery import forget_socket, live_servers, servers_dir, socket_path
from server.transport.linger import DEFAULT_LINGER_SECONDS

if TYPE_CHECKING:  # websockets is imported by the commands that connect, not by `serve`
    from websockets.asyncio.client import ClientConnection

CLIENT_NAME = "sessiond-client"
ANSWER_SECONDS = 5.0
"""How long a discovered server may take to complete the handshake and answer
`initialize` (from memory: milliseconds) before this client looks elsewhere."""
logger = logging.getLogger("sessiond.client")


class NotOurServer(Exception):
    """What answers where a discovery record points is not the server it describes:
    another user's process, or one that cannot prove it holds the record's token."""


class RemoteError(Exception):
    """An error answer from the server: its code, message and `data` (with `kind`); as a
    string, the one line a person reads (`ThreadNotFound: no thread …`)."""

    def __init__(self, error: dict[str, Any]) -> None:
        kind = (error.get("data") or {}).get("kind") or f"error {error.get('code')}"
        super().__init__(f"{kind}: {error.get('message')}")
        self.error = error


def candidates(home: Path, cwd: str | None = None, port: int | None = None) -> list[dict[str, Any]]:
    """The servers to try, best first: the one on `port` alone if given; else the one whose
    workspace folder holds `cwd` most closely (the innermost folder wins), then the rest,
    newest first. Records whose pid is dead are already dropped (and their files removed)."""
    servers = live_servers(home)
    if port is not None:
        return [s for s in servers if s.get("port") == port]
    if cwd is None:
        return servers
    depth = {
        rank: len(folder)
        for rank, record in enumerate(servers)
        for folder in record.get("workspaceFolders") or []
        if cwd == folder or cwd.startswith(folder.rstrip("/") + "/")
    }
    order = sorted(range(len(servers)), key=lambda rank: (-depth.get(rank, -1), rank))
    return [servers[rank] for rank in order]


def _missing(home: Path, port: int | None) -> LookupError:
    where = f" on port {port}" if port is not None else ""
    return LookupError(
        f"no running sessiond{where} in {home / 'servers'}: "
        "start one with `sessiond serve --ws 0` (or use `sessiond client --spawn`)"
    )


def discover(home: Path, cwd: str | None = None, port: int | None = None) -> dict[str, Any]:
    """The server to talk to (the first of `candidates`); LookupError if none runs."""
    servers = candidates(home, cwd, port)
    if not servers:
        raise _missing(home, port)
    return servers[0]


def _forget(home: Path, record: dict[str, Any]) -> None:
    """Remove the discovery file of a server that refused us or is not there, if it still
    says what we read (a new server on the same port writes the same name), and the
    socket it names."""
    same = ("pid", "port", "token")
    directory = servers_dir(home)
    for path in directory.glob("*.json"):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            current = orjson.loads(path.read_bytes())
            if all(current.get(key) == record.get(key) for key in same):
                forget_socket(directory, current)
                path.unlink()


async def connect_first(
    home: Path, servers: list[dict[str, Any]], folders: list[str]
) -> Client | None:
    """A client of the first server that completes the proven handshake and answers
    `initialize`. A pid being alive proves nothing (pids are reused): a record whose
    socket and port refuse the connection, belong to another user, are not a sessiond or
    cannot prove they hold the token is stale and removed; one that is merely slow is
    skipped and kept, and so is one of a sessiond too old to prove itself (its token
    would have to be sent)."""
    from websockets.exceptions import InvalidHandshake

    for record in servers:
        if record.get("proof") != proof.PROOF_NAME:
            logger.info(
                "not using the server on port %s: it gives no proof of its token "
                "(an older sessiond)",
                record.get("port"),
            )
            continue
        try:
            opened = Client.open(record, folders=folders, directory=servers_dir(home))
            return await asyncio.wait_for(opened, ANSWER_SECONDS)
        except (OSError, InvalidHandshake, NotOurServer, RemoteError, KeyError, TypeError) as exc:
            logger.info("not using the server on port %s: %s", record.get("port"), exc)
            _forget(home, record)
        except TimeoutError:
            logger.info("the server on port %s did not answer in time", record.get("port"))
    return None


async def open_socket(
    record: dict[str, Any], directory: Path | None
) -> tuple[socket.socket, str | None]:
    """A connected socket to the server `record` describes, and the Unix socket's path
    (None: the loopback port). The Unix socket first: its other end must be the record's
    pid, of this user; then the port, whose other end must be this user's
    (server/transport/peers.py). NotOurServer otherwise; OSError if neither connects."""
    loop = asyncio.get_running_loop()
    path = socket_path(directory, record) if directory is not None else None
    if path is not None and hasattr(socket, "AF_UNIX"):
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.setblocking(False)
        try:
            with peers.unix_address(path) as address:
                await loop.sock_connect(unix, address)
        except OSError as exc:
            unix.close()
            logger.info("no answer on %s (%s): trying the port", path, exc)
        else:
            peer = peers.unix_peer(unix)
            if peer is not None and (peer[1] != os.getuid() or peer[0] != record.get("pid")):
                unix.close()
                raise NotOurServer(f"{path} is held by pid {peer[0]} of uid {peer[1]}")
            return unix, str(path)
    host, port = record["host"], record["port"]
    if not isinstance(host, str) or not isinstance(port, int) or isinstance(port, bool):
        raise TypeError("a discovery record without a host and port")
    tcp = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    # A socket made here is proto 0, which asyncio does not take for TCP: it would leave
    # Nagle on, and a request written right behind a notification (`initialized`) would wait
    # for the server's delayed ACK, 40 ms (J1': 47 ms a second window, not 8).
    tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    tcp.setblocking(False)
    try:
        await loop.sock_connect(tcp, (host, port))
        owner = peers.tcp_peer_owner(tcp)
        if owner is not None and owner != os.getuid():
            raise NotOurServer(f"port {port} is another user's (uid {owner})")
    except BaseException:
        tcp.close()
        raise
    return tcp, None


async def answering_server(home: Path) -> dict[str, Any] | None:
    """The record of a server of this data dir that answers now (stale ones removed)."""
    client = await connect_first(home, candidates(home), [])
    if client is None:
        return None
    await client.close()
    return client.record


async def attach(
    home: Path,
    cwd: str,
    *,
    port: int | None = None,
    spawn: bool = False,
    linger: float = DEFAULT_LINGER_SECONDS,
    store: str | None = None,
) -> Client:
    """Connect to the server running for this data dir, else (with `spawn`) start one.

    The started server takes the spawn lock and looks again itself (`serve --shared`): of
    windows starting servers at once, one listens and the others exit, and every window
    connects to the one that listens. A server that exits between being found and being
    connected to (its grace ran out) is just one more stale record: look again."""
    folders = [cwd]
    client = await connect_first(home, candidates(home, cwd, port), folders)
    if client is not None:
        return client
    if not spawn or port is not None:
        raise _missing(home, port)
    from server.cli.spawn import spawn_server

    for _ in range(3):
        await spawn_server(home, linger, store)
        client = await connect_first(home, candidates(home, cwd), folders)
        if client is not None:
            return client
    raise OSError(f"no sessiond server in {servers_dir(home)} answered after starting one")


class Client:
    """One authenticated connection; answers are matched to requests by id."""

    def __init__(
        self, ws: ClientConnection, record: dict[str, Any] | None = None, socket: str | None = None
    ) -> None:
        self.ws = ws
        self.record = record or {}
        """The discovery record of the server this client is connected to."""
        self.socket = socket
        """The Unix socket it came in through (None: the loopback port)."""
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self.notifications: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(
        cls,
        record: dict[str, Any],
        *,
        folders: list[str] | None = None,
        directory: Path | None = None,
    ) -> Client:
        """Connected, both sides proven, `initialize` answered. `directory`: where the
        record was found (its Unix socket is there)."""
        from websockets.asyncio.client import connect

        token = record["token"]
        if not isinstance(token, str):
            raise TypeError("a discovery record without a token")
        sock, unix = await open_socket(record, directory)
        nonce = proof.new_nonce()
        headers = {
            proof.NONCE_HEADER: nonce,
            "Authorization": f"{proof.SCHEME} {proof.proof(token, 'client', nonce)}",
        }
        host = record["host"] if ":" not in record["host"] else f"[{record['host']}]"
        try:
            ws = await connect(
                "ws://localhost/" if unix else f"ws://{host}:{record['port']}",
                sock=sock,
                unix=unix is not None,
                additional_headers=headers,
                max_size=None,
                compression=None,
            )
        except BaseException:
            sock.close()
            raise
        offered = ws.response.headers.get(proof.PROOF_HEADER) if ws.response else None
        if offered is None or not proof.valid(token, "server", nonce, offered):
            ws.transport.abort()  # not a frame sent: no folder, no message, nothing
            raise NotOurServer("it cannot prove it holds the token of the server it replaced")
        client = cls(ws, record, unix)
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
    client.add_argument(
        "--spawn",
        action="store_true",
        help="if no server of this data dir answers, start one (`serve --ws 0 --linger`) "
        "that later windows connect to",
    )
    client.add_argument(
        "--linger",
        type=float,
        default=DEFAULT_LINGER_SECONDS,
        metavar="SECONDS",
        help="with --spawn: how long the started server stays once no client is connected "
        f"(default {DEFAULT_LINGER_SECONDS:g})",
    )
    actions = client.add_subparsers(dest="client_command", required=True, metavar="ACTION")
    actions.add_parser(
        "attach",
        help="connect (with --spawn: start a shared server if none answers) and print the "
        "server's pid, port and discovery file; no request is made",
        parents=[common],
    )
    listing = actions.add_parser("list", help="list threads, newest first", parents=[common])
    listing.add_argument("--workspace-folder", help="only threads in or under this folder")
    from server.cli.options import limit

    listing.add_argument(
        "--limit", type=limit, default=50, help="at most this many, 1 to 200 (default 50)"
    )
    thread_id = "a thread id, or its first 4 or more hex digits (as list and search print)"
    resume = actions.add_parser(
        "resume",
        help="resume a thread and print its RestoreReport as JSON (for a person: "
        "`sessiond resume ID`)",
        parents=[common],
    )
    resume.add_argument("thread_id", metavar="ID", help=thread_id)
    resume.add_argument(
        "--accept-drift",
        action="store_true",
        help="open a session though the workspace drifted from where the thread was "
        "recorded (recorded in the thread as drift_accepted)",
    )
    record = actions.add_parser(
        "record", help="resume a thread and record one message", parents=[common]
    )
    record.add_argument("thread_id", metavar="ID", help=thread_id)
    record.add_argument(
        "--message", required=True, metavar="TEXT", help="the message's content (plain text)"
    )
    record.add_argument(
        "--role",
        choices=("user", "assistant", "system"),
        default="user",
        help="who says it (default: user)",
    )


async def _run(home: Path, args: argparse.Namespace, store: str | None = None) -> Any:
    client = await attach(
        home, os.getcwd(), port=args.port, spawn=args.spawn, linger=args.linger, store=store
    )
    try:
        if args.client_command == "attach":
            record = client.record
            return {
                "pid": record.get("pid"),
                "port": record.get("port"),
                "url": record.get("url"),
                "transport": "unix" if client.socket else "tcp",
                "socket": client.socket,
                "discoveryFile": str(servers_dir(home) / f"{record.get('port')}.json"),
            }
        if args.client_command == "list":
            params: dict[str, Any] = {"limit": args.limit}
            if args.workspace_folder:
                params["workspaceFolder"] = args.workspace_folder
            return await client.request("thread/list", params)
        thread_id = await resolve(client, args.thread_id)
        report = await client.request(
            "thread/resume",
            {"threadId": thread_id, "acceptDrift": getattr(args, "accept_drift", False)},
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
            {"threadId": thread_id, "sessionId": session_id, "items": [item]},
        )
    finally:
        await client.close()


async def resolve(client: Client, typed: str) -> str:
    """The one thread a typed id or unique prefix names, asked of the server
    (`thread/resolve`: its store, whichever that is); a whole id as it is."""
    if len(typed.strip()) == 36:
        return typed.strip().lower()
    found = await client.request("thread/resolve", {"prefix": typed})
    if len(found["threads"]) == 1:
        return str(found["threads"][0]["threadId"])
    from restore.ids import id_prefix
    from restore.service.listing import not_one

    raise not_one(id_prefix(typed), found["threads"], more=found["more"])


def run(config: ServerConfig, args: argparse.Namespace) -> int:
    """Print the answer as JSON; a failure is one line on stderr, as in every subcommand."""
    if not args.linger >= 0:
        print("sessiond: --linger takes a number of seconds, 0 or more", file=sys.stderr)
        return 2
    home = Path(config.home)
    try:
        if args.spawn:  # the server it may start keeps its discovery file there
            from restore.home.state import open_home

            open_home(home)
        elif home.exists() and not home.is_dir():
            raise ProtocolError(ErrorKind.STORAGE_ERROR, f"{home} is not a directory")
        answer = asyncio.run(_run(home, args, config.store))
    except RemoteError as remote:
        print(f"sessiond: {remote}", file=sys.stderr)
        return 2
    except ProtocolError as failed:  # a prefix naming no thread, or several
        print(f"sessiond: {failed.kind}: {safe(failed.message, one_line=True)}", file=sys.stderr)
        return 2
    except LookupError as missing:
        print(f"sessiond: {missing}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"sessiond: cannot reach the server: {exc}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(orjson.dumps(answer, option=orjson.OPT_INDENT_2) + b"\n")
    return 0 if not isinstance(answer, dict) or answer.get("status") != "needs_review" else 1
