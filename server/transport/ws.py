"""The WebSocket transport: many local clients, each authenticated, each its own connection.

Why our own `websockets` server and not pygls's: pygls's WebSocket server serves a single
client and checks nothing, and a localhost WebSocket that accepts any web page is how an
IDE agent extension got CVE-2025-52882. This one binds loopback only, refuses every
handshake that carries a browser `Origin`, comes from a non-loopback peer or lacks the
per-server token (or a proof of it: server/transport/proof.py, answered with the server's
own), and gives each client its own `SessiondProtocol` (handshake state, requests in
flight, leases). The token, port and socket are published in a discovery lock file.

Two doors, one server: a Unix socket `servers/<port>.sock` inside the 0700 data dir, the
door windows use (no other user can reach it: nothing to squat, nothing to flood, and
each side sees the other's uid and pid), and the loopback port, for clients that need
one. A connection from another user is closed as it arrives, before it takes a handshake
slot: on the socket by `SO_PEERCRED`, on the port by the owner the kernel reports for the
peer's socket (server/transport/peers.py).

One JSON-RPC message per text frame. Outgoing messages of a connection go through one
queue and one writer task (server/transport/outbox.py): handlers finish and notifications arrive
from many places, and a single writer is what keeps them in the order they were produced
(concurrent `send` calls would each wait for the socket to drain and could overtake each
other). The queues are bounded per client and for all clients together.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import os
import secrets
import signal
import socket
import stat
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from websockets.asyncio.server import Server, ServerConnection, serve, unix_serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

from restore.home.state import open_home
from server.rpc.framing import FrameTooLarge
from server.rpc.refusals import RateLimitedLog
from server.transport import peers, proof
from server.transport.discovery import LockFile, checked_servers_dir, live_servers
from server.transport.linger import Linger
from server.transport.outbox import Outbox, OutboxBudget
from server.transport.served import Served

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
    handshakes at once gets through while idle sockets keep arriving. A connection from
    another user never gets this far: it is closed as it arrives (`owner`), so only this
    user's own processes compete for the slots."""

    def __init__(self, cap: int, owner: Callable[[asyncio.BaseTransport], int | None]) -> None:
        self.cap = cap
        self.owner = owner
        """The uid at the other end of a new connection (None: not known here)."""
        self.pending: dict[ServerConnection, None] = {}

    def connection_class(self) -> type[ServerConnection]:
        tracker = self
        uid = os.getuid()

        class Tracked(ServerConnection):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                super().connection_made(transport)
                owner = tracker.owner(transport)
                if owner is not None and owner != uid:
                    refusals.warning(
                        "refused WebSocket connection from uid %d: another user's process",
                        owner,
                    )
                    self.transport.abort()
                    return
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
        self, server: Served, host: str, port: int, folders: list[str] | None = None
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
        self._unix_listener: Server | None = None
        self.socket_path: Path | None = None
        self._socket_inode: tuple[int, int] | None = None
        self._handshaking = _Handshaking(MAX_UNAUTHENTICATED, _tcp_owner)
        self._unix_handshaking = _Handshaking(MAX_UNAUTHENTICATED, _unix_owner)
        self._outboxes = OutboxBudget(TOTAL_OUTBOX_FRAMES * server.config.max_frame)
        self._dropping: set[asyncio.Future[None]] = set()  # disconnects of dropped clients
        self.linger: Linger | None = None
        """With `--linger`: counts authenticated clients and ends the server once none has
        been attached for the grace (server/transport/linger.py)."""

    def _options(self, handshaking: _Handshaking) -> dict[str, Any]:
        return {
            "process_response": self._prove,
            "select_subprotocol": self._select_subprotocol,
            # Frames up to twice the limit are read and answered with a typed PayloadTooLarge
            # (the connection stays usable); anything larger closes it (code 1009).
            "max_size": 2 * self.server.config.max_frame,
            "compression": None,  # small JSON frames: deflate costs more CPU than it saves
            "server_header": None,
            "create_connection": handshaking.connection_class(),
        }

    async def start(self) -> int:
        home = Path(self.server.config.home)
        directory = checked_servers_dir(home)  # no link followed, before anything listens
        self._listener = await serve(
            self._serve_client,
            self.host,
            self.requested_port,
            process_request=self._authorize,
            **self._options(self._handshaking),
        )
        self.port = self._listener.sockets[0].getsockname()[1]
        live_servers(home)  # clears stale lock files of servers that died without cleaning up
        await self._listen_unix(directory / f"{self.port}.sock")
        socket_name = self.socket_path.name if self.socket_path is not None else None
        self.lock = LockFile(home, self.host, self.port, self.token, socket_name)
        self._publish_folders()
        self.server.workspace_listeners.append(self._publish_folders)
        doors = f"ws://{self.host}:{self.port}" + (
            f" and {self.socket_path}" if self.socket_path is not None else ""
        )
        print(
            f"sessiond: listening on {doors} (token in {self.lock.path})",
            file=sys.stderr,
            flush=True,
        )
        return self.port

    async def _listen_unix(self, path: Path) -> None:
        """The Unix socket windows connect to, in the private `servers/` directory. One a
        dead server left under this name is removed first (only this user can have made
        it there); where none can be made (a name too long, not Linux), clients use the
        port, and the log says why."""
        try:
            directory_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            from restore.home.files import private_dirs

            private_dirs(path.parent)
            directory_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        os.chmod(directory_fd, 0o700)
        os.close(directory_fd)
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    path.unlink()
            with peers.unix_address(path) as address:
                listening.bind(address)
                os.chmod(address, 0o600)
            made = os.lstat(path)
            listening.listen(128)
            self._unix_listener = await unix_serve(
                self._serve_client,
                sock=listening,
                process_request=self._authorize_unix,
                **self._options(self._unix_handshaking),
            )
        except OSError as exc:
            listening.close()
            logger.warning("no Unix socket at %s (%s): clients use the port", path, exc)
            return
        self.socket_path = path
        self._socket_inode = (made.st_dev, made.st_ino)

    async def close(self) -> None:
        """Stop listening, let connected clients go, then remove the discovery file.

        In that order: a client's disconnect rewrites the file (its folders leave), and a
        rewrite after the removal would leave a file naming a dead port behind."""
        if self._publish_folders in self.server.workspace_listeners:
            self.server.workspace_listeners.remove(self._publish_folders)
        try:
            for listener in (self._listener, self._unix_listener):
                if listener is not None:
                    listener.close()
            for listener in (self._listener, self._unix_listener):
                if listener is not None:
                    await listener.wait_closed()
        finally:
            if self.lock is not None:
                self.lock.remove()
            self._remove_socket()

    def _remove_socket(self) -> None:
        """The socket file, if it is still the one this server made."""
        path, made = self.socket_path, self._socket_inode
        with contextlib.suppress(OSError):
            if path is not None and made is not None:
                found = os.lstat(path)
                if (found.st_dev, found.st_ino) == made:
                    path.unlink()

    def _publish_folders(self) -> None:
        if self.lock is not None:
            self.lock.write(dict.fromkeys([*self.folders, *self.server.workspace_folders()]))

    # --- handshake ---------------------------------------------------------------------

    def _authorize(self, connection: ServerConnection, request: Request) -> Response | None:
        """Refuse (and log) before any JSON-RPC is read: no state is created for a refusal."""
        peer = connection.remote_address[0] if connection.remote_address else "?"
        if not is_loopback(str(peer)):
            return self._refuse(connection, 403, peer, "peer is not on this machine")
        return self._authorize_request(connection, request, peer)

    def _authorize_unix(self, connection: ServerConnection, request: Request) -> Response | None:
        """The Unix socket's: its peer is this user's (checked as it connected)."""
        return self._authorize_request(connection, request, "the Unix socket")

    def _authorize_request(
        self, connection: ServerConnection, request: Request, peer: Any
    ) -> Response | None:
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
        nonces = request.headers.get_all(proof.NONCE_HEADER)
        if len(nonces) > 1 or (nonces and not proof.NONCE.fullmatch(nonces[0])):
            return self._refuse(connection, 400, peer, f"a malformed {proof.NONCE_HEADER}")
        authorization = (request.headers.get_all("Authorization") or [""])[0]
        scheme, _, offered = authorization.partition(" ")
        if scheme.lower() == proof.SCHEME.lower():
            if not nonces:
                return self._refuse(connection, 401, peer, "a proof without its nonce")
            if not proof.valid(self.token, "client", nonces[0], offered):
                return self._refuse(connection, 401, peer, "wrong proof")
            return None
        token, _ = _offered_token(request)
        if token is None:
            return self._refuse(connection, 401, peer, "no token")
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            return self._refuse(connection, 401, peer, "wrong token")
        return None

    def _prove(
        self, connection: ServerConnection, request: Request, response: Response
    ) -> Response:
        """An accepted handshake that came with a nonce is answered with this server's
        proof of the token (server/transport/proof.py): the client checks it before it
        sends anything. A refused one gets none."""
        nonces = request.headers.get_all(proof.NONCE_HEADER)
        if response.status_code == 101 and nonces:
            response.headers[proof.PROOF_HEADER] = proof.proof(self.token, "server", nonces[0])
        return response

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

    def withdraw(self) -> None:
        """Remove the discovery file now, before the server stops: a window opening while
        this one shuts down spawns a new server instead of connecting to a closing one."""
        if self.lock is not None:
            self.lock.remove()
        self._remove_socket()

    async def _serve_client(self, ws: ServerConnection) -> None:
        self._handshaking.authenticated(ws)
        self._unix_handshaking.authenticated(ws)
        if self.linger is not None:
            self.linger.attached()
        try:
            await self._serve_attached(ws)
        finally:
            if self.linger is not None:
                self.linger.detached()

    async def _serve_attached(self, ws: ServerConnection) -> None:

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


def _tcp_owner(transport: asyncio.BaseTransport) -> int | None:
    """The uid of the process at the other end of a loopback TCP connection."""
    own, peer = transport.get_extra_info("sockname"), transport.get_extra_info("peername")
    if not own or not peer:
        return None
    return peers.tcp_owner((peer[0], peer[1]), (own[0], own[1]))


def _unix_owner(transport: asyncio.BaseTransport) -> int | None:
    """The uid of the process at the other end of the Unix socket (`SO_PEERCRED`)."""
    found = transport.get_extra_info("socket")
    credentials = peers.unix_peer(found) if found is not None else None
    return credentials[1] if credentials is not None else None


def _dropped_notice(reason: str, queued: int) -> bytes:
    """The one message a dropped client gets: why, and how much was waiting for it."""
    params = {"reason": reason, "queuedBytes": queued}
    return orjson.dumps({"jsonrpc": "2.0", "method": "connection/dropped", "params": params})


async def serve_ws(
    server: Served,
    host: str,
    port: int,
    *,
    with_stdio: bool,
    folders: list[str] | None = None,
    linger: float | None = None,
    claim: Claim | None = None,
) -> int:
    """Serve WebSocket clients (and stdio, when asked) until exit or a signal; with
    `linger`, also until no client has been attached for that many seconds. With `claim`
    (a shared server), listening starts inside it: it yields the record of a server that
    already answers, and then this one exits at once instead."""
    loop = asyncio.get_running_loop()
    server.loop = loop
    transport = WebSocketTransport(server, host, port, folders)
    # Signal handlers go in before the lock file is written: a client (or a test) that
    # sees the file may signal at once, and must get a clean shutdown, not a dead process.
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if linger is not None:

        def expire() -> None:
            print(f"sessiond: no client for {linger:g} s, exiting", file=sys.stderr, flush=True)
            transport.withdraw()
            stop.set()

        transport.linger = Linger(loop, linger, expire)

        def home_lost() -> None:  # nobody's to restart: it leaves, and a window spawns anew
            print(
                f"sessiond: the data directory {server.config.home} was deleted: exiting",
                file=sys.stderr,
                flush=True,
            )
            transport.withdraw()
            stop.set()

        server.home_lost_listeners.append(home_lost)
    if claim is None:
        await transport.start()
    else:
        async with claim() as running:
            if running is not None:
                where = f"port {running.get('port')}, pid {running.get('pid')}"
                print(
                    f"sessiond: already running ({where}): not starting another",
                    file=sys.stderr,
                    flush=True,
                )
                return 0
            await transport.start()
    if transport.linger is not None:
        transport.linger.start()
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


Claim = Callable[[], AbstractAsyncContextManager[dict[str, Any] | None]]
"""Held while a shared server starts listening and publishes its discovery file
(server/cli/spawn.py's `claim`): yields the record of a server that already answers."""


def run(
    server: Served,
    address: str,
    *,
    with_stdio: bool,
    folders: list[str] | None = None,
    linger: float | None = None,
    claim: Claim | None = None,
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
        return asyncio.run(
            serve_ws(
                server,
                host,
                port,
                with_stdio=with_stdio,
                folders=folders,
                linger=linger,
                claim=claim,
            )
        )
    finally:
        server.close()
