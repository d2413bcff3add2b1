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
from typing import BinaryIO

from server.app import SessiondServer
from server.framing import FrameDecoder

logger = logging.getLogger("sessiond.stdio")
CHUNK = 1 << 16
DRAIN_SECONDS = 30.0


async def _open_reader(stdin: BinaryIO) -> asyncio.StreamReader:
    """A stream reader on stdin: a pipe transport when possible, else a reader thread."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=CHUNK)
    mode = os.fstat(stdin.fileno()).st_mode
    try:
        # /dev/null and regular files cannot be polled: epoll refuses them only later, in
        # a callback, which would leave the server waiting forever for input.
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(stdin.fileno())):
            raise ValueError("not pollable")
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    except (ValueError, OSError):  # a regular file: pipe transports refuse those

        def pump() -> None:
            while chunk := os.read(stdin.fileno(), CHUNK):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)

        threading.Thread(target=pump, name="sessiond-stdin", daemon=True).start()
    return reader


async def serve_stdio(
    server: SessiondServer, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> int:
    """Serve one client until `exit`, end of input or a signal; return the exit code."""
    stdin = stdin or sys.stdin.buffer
    out = stdout or sys.stdout.buffer
    loop = asyncio.get_running_loop()
    server.loop = loop
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    def send(data: bytes) -> None:
        try:
            out.write(data)
            out.flush()
        except (BrokenPipeError, ValueError):
            stop.set()  # the client is gone; nobody is left to answer

    connection = server.connect(send)
    decoder = FrameDecoder(server.config.max_frame)
    reader = await _open_reader(stdin)
    stopped = asyncio.ensure_future(stop.wait())
    while not connection.exit_requested and not stop.is_set():
        read = asyncio.ensure_future(reader.read(CHUNK))
        await asyncio.wait({read, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not read.done():
            read.cancel()
            break
        chunk = read.result()
        if not chunk:
            break
        for event in decoder.feed(chunk):
            connection.handle_event(event, decoder.framing)
            if connection.exit_requested:
                break
    stopped.cancel()
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
    await server.stop_hooks()  # no hook process outlives the server
    if connection.exit_requested and not connection.shutdown_requested:
        return 1  # LSP: exit without shutdown is an error exit
    return 0


def run_stdio(server: SessiondServer) -> int:
    try:
        return asyncio.run(serve_stdio(server))
    finally:
        server.close()
