"""The stdio transport: bytes from stdin through the frame decoder into one connection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable
from typing import BinaryIO

from server.app import SessiondServer
from server.framing import FrameDecoder

logger = logging.getLogger("sessiond.stdio")
CHUNK = 1 << 16
DRAIN_SECONDS = 30.0


class _Input(asyncio.Protocol):
    """Bytes from stdin straight into the frame decoder, as the loop receives them.

    A protocol rather than a StreamReader: a read task and an `asyncio.wait` per chunk
    cost more CPU than decoding the chunk's messages.
    """

    def __init__(self, feed: Callable[[bytes], None], ended: asyncio.Event) -> None:
        self.feed = feed
        self.ended = ended

    def data_received(self, data: bytes) -> None:
        if not self.ended.is_set():
            self.feed(data)

    def eof_received(self) -> bool:
        self.ended.set()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended.set()


async def _read_input(stdin: BinaryIO, protocol: _Input) -> None:
    """Feed `protocol` from stdin: a pipe transport when possible, else a reader thread."""
    loop = asyncio.get_running_loop()
    mode = os.fstat(stdin.fileno()).st_mode
    try:
        # /dev/null and regular files cannot be polled: epoll refuses them only later, in
        # a callback, which would leave the server waiting forever for input.
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(stdin.fileno())):
            raise ValueError("not pollable")
        await loop.connect_read_pipe(lambda: protocol, stdin)
    except (ValueError, OSError):  # a regular file: pipe transports refuse those

        def pump() -> None:
            while chunk := os.read(stdin.fileno(), CHUNK):
                loop.call_soon_threadsafe(protocol.data_received, chunk)
            loop.call_soon_threadsafe(protocol.eof_received)

        threading.Thread(target=pump, name="sessiond-stdin", daemon=True).start()


async def serve_stdio(
    server: SessiondServer, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> int:
    """Serve one client until `exit`, end of input or a signal; return the exit code."""
    stdin = stdin or sys.stdin.buffer
    out = stdout or sys.stdout.buffer
    loop = asyncio.get_running_loop()
    server.loop = loop
    ended = asyncio.Event()  # exit, end of input, a signal, or the client gone
    stop = asyncio.Event()  # a signal, or the client gone: leave without draining

    def stop_now() -> None:
        stop.set()
        ended.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop_now)

    flush_scheduled = False

    def flush() -> None:
        nonlocal flush_scheduled
        flush_scheduled = False
        try:
            out.flush()
        except (BrokenPipeError, ValueError):
            stop_now()  # the client is gone; nobody is left to answer

    def send(data: bytes) -> None:
        # Messages written in one turn of the loop (a batch of answers) leave in one write.
        nonlocal flush_scheduled
        try:
            out.write(data)
        except (BrokenPipeError, ValueError):
            stop_now()
            return
        if not flush_scheduled:
            flush_scheduled = True
            loop.call_soon(flush)

    connection = server.connect(send)
    decoder = FrameDecoder(server.config.max_frame)

    def feed(chunk: bytes) -> None:
        for event in decoder.feed(chunk):
            connection.handle_event(event, decoder.framing)
            if connection.exit_requested:
                ended.set()
                return

    await _read_input(stdin, _Input(feed, ended))
    await ended.wait()
    pending = [f for f in list(connection._request_futures.values()) if not f.done()]
    if pending and not stop.is_set():
        # Input ended with requests in flight: answer them before leaving.
        with contextlib.suppress(Exception):
            await asyncio.wait(
                [
                    asyncio.wrap_future(f) if not isinstance(f, asyncio.Future) else f
                    for f in pending
                ],
                timeout=DRAIN_SECONDS,
            )
    if not stop.is_set() and not connection.shutdown_requested:
        # The client left without `shutdown` (end of input, `exit` alone): its sessions end
        # here as a WebSocket client's do, recorded and with their SessionEnd hooks. (After
        # `shutdown` they stay open until the exit, so its SessionEnd hooks are recorded.)
        await server.disconnect(connection)
    await server.stop_watching()
    await server.stop_hooks()  # no hook process outlives the server
    flush()
    if connection.exit_requested and not connection.shutdown_requested:
        return 1  # LSP: exit without shutdown is an error exit
    return 0


def run_stdio(server: SessiondServer) -> int:
    try:
        return asyncio.run(serve_stdio(server))
    finally:
        server.close()
