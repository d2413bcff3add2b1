"""The WebSocket transport: many local clients, each authenticated, each its own connection.

Why our own `websockets` server and not pygls's: pygls's WebSocket server serves a single
client and checks nothing, and a localhost WebSocket that accepts any web page is how an
IDE agent extension got CVE-2025-52882. This one binds loopback only, refuses every
handshake that carries a browser `Origin`, comes from a non-loopback peer or lacks the
per-server token, and gives each client its own `SessiondProtocol` (handshake state,
requests in flight, leases). The token and port are published in a discovery lock file.

One JSON-RPC message per text frame. Outgoing messages of a connection go through one
queue and one writer task (server/transport/outbox.py): handlers finish and notifications arrive
from many places, and a single writer is what keeps them in the order they were produced
(concurrent `send` calls would each wait for the socket to drain and could overtake each
other). The queues are bounded per client and for all clients together.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import secrets
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

from restore.home.state import open_home
from server.app import SessiondServer
from server.rpc.framing import FrameTooLarge
from server.rpc.refusals import RateLimitedLog
from server.transport.discovery import LockFile, live_servers
from server.transport.outbox import Outbox, OutboxBudget

if TYPE_CHECKING:
    from server.rpc.dispatch import SessiondProtocol

logger = logging.getLogger("sessiond.ws")
refusals = RateLimitedLog(logger)
BEARER_SUBPROTOCOL = "sessiond.bearer."
OUTBOX_FRAMES = 4
"""Bytes queued for a client that does not read, in frames of --max-frame; past them the
client is dropped and what was queued for it is freed."""
TOTAL_OUTBOX_FRAMES = 4
"""Bytes queued for all clients together, in frames of --max-frame: no more than one
stalled client may hold, however many stall; past it the slowest are dropped."""
MAX_UNAUTHENTICATED = 64
"""Connections still in their opening handshake; past this the oldest is closed, so idle
sockets cannot use up the server's file descriptors."""
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


class BindRefused(ValueError):
    """A `--ws` address sessiond will not listen on."""


def parse_address(value: str) -> tuple[str, int]:
    """`[HOST:]PORT` (IPv6 hosts in brackets) → a loopback host and a port; else BindRefused."""
    host, _, port_text = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if host == "localhost":
        host = "127.0.0.1"  # one socket: "localhost" may bind two, on two different ports
    try:
        port = int(port_text)
    except ValueError:
        raise BindRefused(f"not a port: {port_text!r} (expected [HOST:]PORT)") from None
    if not 0 <= port <= 65535:
        raise BindRefused(f"port out of range: {port}")
    if not is_loopback(host):
        raise BindRefused(
            f"refusing to listen on {host}: sessiond binds loopback addresses only "
            "(127.0.0.1, ::1), because its clients can read and write your sessions"
        )
    return host, port


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _host_name(request: Request) -> str | None:
    """The name in the `Host` header, without its port (None: no single Host header)."""
    hosts = request.headers.get_all("Host")
    if len(hosts) != 1:
        return None
    host = hosts[0].strip().lower()
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0] if ":" in host else host


def _offered_token(request: Request) -> tuple[str | None, Subprotocol | None]:
    """The token from `Authorization: Bearer …` or from a `sessiond.bearer.…` subprotocol."""
    authorization = (request.headers.get_all("Authorization") or [""])[0]
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip(), None
    for header in request.headers.get_all("Sec-WebSocket-Protocol"):
        for offered in header.split(","):
            offered = offered.strip()
            if offered.startswith(BEARER_SUBPROTOCOL):
                return offered[len(BEARER_SUBPROTOCOL) :], Subprotocol(offered)
    return None, None


class _Handshaking:
    """Connections still in their opening handshake, oldest first; past the cap the oldest
    is closed. Closing the oldest rather than refusing the newest means a real client that
    handshakes at once gets through while idle sockets keep arriving."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.pending: dict[ServerConnection, None] = {}

    def connection_class(self) -> type[ServerConnection]:
        tracker = self

        class Tracked(ServerConnection):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                super().connection_made(transport)
                tracker.pending[self] = None
                while len(tracker.pending) > tracker.cap:
                    oldest = next(iter(tracker.pending))
                    del tracker.pending[oldest]
                    refusals.warning(
                        "closing an unauthenticated WebSocket connection: more than %d "
                        "are waiting for their handshake",
                        tracker.cap,
                    )
                    oldest.transport.abort()

            def connection_lost(self, exc: Exception | None) -> None:
                tracker.pending.pop(self, None)
                super().connection_lost(exc)

        return Tracked

    def authenticated(self, connection: ServerConnection) -> None:
        self.pending.pop(connection, None)


class WebSocketTransport:
    """The listening socket, its token and lock file, and one task per client."""

    def __init__(
        self, server: SessiondServer, host: str, port: int, folders: list[str] | None = None
    ) -> None:
        self.server = server
        self.host = host
        self.requested_port = port
        self.folders = folders or []
        """The folders it was started for (`--folder`, else its cwd), published before any
        client names its own, so "the server whose folders contain my file" matches."""
        self.token = secrets.token_urlsafe(32)
        self.port = 0
        self.lock: LockFile | None = None
        self._listener: Server | None = None
        self._handshaking = _Handshaking(MAX_UNAUTHENTICATED)
        self._outboxes = OutboxBudget(TOTAL_OUTBOX_FRAMES * server.config.max_frame)
        self._dropping: set[asyncio.Future[None]] = set()  # disconnects of dropped clients

    async def start(self) -> int:
        self._listener = await serve(
            self._serve_client,
            self.host,
            self.requested_port,
            process_request=self._authorize,
            select_subprotocol=self._select_subprotocol,
            # Frames up to twice the limit are read and answered with a typed PayloadTooLarge
            # (the connection stays usable); anything larger closes it (code 1009).
            max_size=2 * self.server.config.max_frame,
            compression=None,  # small JSON frames: deflate costs more CPU than it saves
            server_header=None,
            create_connection=self._handshaking.connection_class(),
        )
        self.port = self._listener.sockets[0].getsockname()[1]
        home = Path(self.server.config.home)
        live_servers(home)  # clears stale lock files of servers that died without cleaning up
        self.lock = LockFile(home, self.host, self.port, self.token)
        self._publish_folders()
        self.server.workspace_listeners.append(self._publish_folders)
        print(
            f"sessiond: listening on ws://{self.host}:{self.port} (token in {self.lock.path})",
            file=sys.stderr,
            flush=True,
        )
        return self.port

    async def close(self) -> None:
        """Stop listening, let connected clients go, then remove the discovery file.

        In that order: a client's disconnect rewrites the file (its folders leave), and a
        rewrite after the removal would leave a file naming a dead port behind."""
        if self._publish_folders in self.server.workspace_listeners:
            self.server.workspace_listeners.remove(self._publish_folders)
        try:
            if self._listener is not None:
                self._listener.close()
                await self._listener.wait_closed()
        finally:
            if self.lock is not None:
                self.lock.remove()

    def _publish_folders(self) -> None:
        if self.lock is not None:
            self.lock.write(dict.fromkeys([*self.folders, *self.server.workspace_folders()]))

    # --- handshake ---------------------------------------------------------------------

    def _authorize(self, connection: ServerConnection, request: Request) -> Response | None:
        """Refuse (and log) before any JSON-RPC is read: no state is created for a refusal."""
        peer = connection.remote_address[0] if connection.remote_address else "?"
        if not is_loopback(str(peer)):
            return self._refuse(connection, 403, peer, "peer is not on this machine")
        if "Origin" in request.headers:
            origin = request.headers.get_all("Origin")[0]
            return self._refuse(connection, 403, peer, f"browser Origin {origin!r} is not allowed")
        host = _host_name(request)
        if host not in LOOPBACK_NAMES and host != self.host:
            # DNS rebinding: a name that resolves to 127.0.0.1 is still not this server's.
            shown = request.headers.get_all("Host")
            return self._refuse(connection, 403, peer, f"Host {shown!r} is not a loopback name")
        if len(request.headers.get_all("Authorization")) > 1:
            return self._refuse(connection, 400, peer, "more than one Authorization header")
        token, _ = _offered_token(request)
        if token is None:
            return self._refuse(connection, 401, peer, "no token")
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            return self._refuse(connection, 401, peer, "wrong token")
        return None

    @staticmethod
    def _refuse(connection: ServerConnection, status: int, peer: Any, reason: str) -> Response:
        refusals.warning("refused WebSocket connection from %s: %s", peer, reason)
        response = connection.respond(status, f"sessiond: {reason}\n")
        if status == 401:
            response.headers["WWW-Authenticate"] = 'Bearer realm="sessiond"'
        return response

    @staticmethod
    def _select_subprotocol(connection: ServerConnection, subprotocols: Any) -> Subprotocol | None:
        """Answer with the bearer subprotocol the client offered (browsers require the echo)."""
        _, offered = _offered_token(connection.request) if connection.request else (None, None)
        return offered if offered in subprotocols else None

    # --- one client --------------------------------------------------------------------

    async def _serve_client(self, ws: ServerConnection) -> None:
        self._handshaking.authenticated(ws)

        def send(data: bytes) -> None:
            if not ws.transport.is_closing():
                outbox.put(data)

        connection = self.server.connect(send)
        connection.framing = None  # one message per frame: no header, no newline
        outbox = Outbox(
            self._outboxes,
            OUTBOX_FRAMES * self.server.config.max_frame,
            str(connection.connection_id),
            send=lambda data: ws.send(data, text=True),
            close=lambda reason: ws.close(code=1008, reason=reason),
            abort=ws.transport.abort,
            notice=_dropped_notice,
            on_drop=lambda: self._disconnect_dropped(connection),
        )
        writer = asyncio.create_task(outbox.run())
        logger.info(
            "WebSocket client %d connected from %s", connection.connection_id, ws.remote_address
        )
        try:
            async for message in ws:
                if outbox.dropped:  # nothing more is read from a dropped client
                    break
                body = message.encode() if isinstance(message, str) else message
                if len(body) > self.server.config.max_frame:
                    connection.handle_event(
                        FrameTooLarge(len(body), self.server.config.max_frame), None
                    )
                else:
                    connection.handle_body(body)
                if connection.exit_requested:
                    break
        except ConnectionClosed:
            pass
        finally:
            await self.server.disconnect(connection)
            outbox.finish()
            await writer
            logger.info("WebSocket client %d disconnected", connection.connection_id)

    def _disconnect_dropped(self, connection: SessiondProtocol) -> None:
        """A dropped client's leases are released at once, as for any disconnect (its
        connection may stay open a while, for the notification)."""
        task = asyncio.ensure_future(self.server.disconnect(connection))
        self._dropping.add(task)
        task.add_done_callback(self._dropping.discard)


def _dropped_notice(reason: str, queued: int) -> bytes:
    """The one message a dropped client gets: why, and how much was waiting for it."""
    params = {"reason": reason, "queuedBytes": queued}
    return orjson.dumps({"jsonrpc": "2.0", "method": "connection/dropped", "params": params})


async def serve_ws(
    server: SessiondServer,
    host: str,
    port: int,
    *,
    with_stdio: bool,
    folders: list[str] | None = None,
) -> int:
    """Serve WebSocket clients (and stdio, when asked) until exit or a signal."""
    loop = asyncio.get_running_loop()
    server.loop = loop
    transport = WebSocketTransport(server, host, port, folders)
    # Signal handlers go in before the lock file is written: a client (or a test) that
    # sees the file may signal at once, and must get a clean shutdown, not a dead process.
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await transport.start()
    try:
        if with_stdio:
            from server.transport.stdio import serve_stdio

            return await serve_stdio(server)  # ends on exit, end of input or a signal
        await stop.wait()
        await server.stop_watching()
        await server.stop_hooks()  # SessionEnd hooks get their grace, then none outlives us
        return 0
    finally:
        await transport.close()


def run(
    server: SessiondServer, address: str, *, with_stdio: bool, folders: list[str] | None = None
) -> int:
    """`sessiond serve --ws [HOST:]PORT`; a non-loopback address is refused before binding,
    and a data directory that cannot hold the discovery file before listening."""
    host, port = parse_address(address)  # BindRefused: the command line says it, exit 2
    home = open_home(Path(server.config.home))
    if home.read_only is not None:  # clients find a WebSocket server only by its file there
        raise home.refuse_write(
            "a WebSocket server publishes its port and token there; serve this one with --stdio"
        )
    try:
        return asyncio.run(serve_ws(server, host, port, with_stdio=with_stdio, folders=folders))
    finally:
        server.close()
