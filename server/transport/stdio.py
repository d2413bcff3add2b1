"""The stdio transport: bytes from stdin through the frame decoder into one connection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from typing import BinaryIO

from server.rpc.framing import Event, FrameDecoder
from server.transport.early import Opening
from server.transport.pipes import BatchedOutput, read_input
from server.transport.served import Served

logger = logging.getLogger("sessiond.stdio")
DRAIN_SECONDS = 30.0


async def serve_stdio(
    server: Served,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    opening: Opening | None = None,
) -> int:
    """Serve one client until `exit`, end of input or a signal; return the exit code.
    `opening`: what was read (and perhaps answered) before the server started
    (server/transport/early.py)."""
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

    output = BatchedOutput(out, stop_now)

    connection = server.connect(output.write)
    decoder = opening.decoder if opening else FrameDecoder(server.config.max_frame)
    if opening and opening.answered:  # as the handshake's `initialize` would have left it
        connection.framing = decoder.framing
        connection.workspace_folders = opening.folders
        connection.client_info = opening.client_info
        connection.initialized = True
        server.workspace_changed()

    def handle(events: list[Event]) -> None:
        for event in events:
            connection.handle_event(event, decoder.framing)
            if connection.exit_requested:
                ended.set()
                return

    def feed(chunk: bytes) -> None:
        handle(decoder.feed(chunk))

    if opening:
        handle(opening.events)
        if opening.ended:
            ended.set()
    if not ended.is_set():
        await read_input(stdin, feed, ended)
    await ended.wait()
    pending = [f for f in list(connection.in_flight.values()) if not f.done()]
    if pending and not stop.is_set():
        # Input ended with requests in flight: answer them before leaving.
        with contextlib.suppress(Exception):
            await asyncio.wait(pending, timeout=DRAIN_SECONDS)
    if not stop.is_set() and not connection.shutdown_requested:
        # The client left without `shutdown` (end of input, `exit` alone): its sessions end
        # here as a WebSocket client's do, recorded and with their SessionEnd hooks. (After
        # `shutdown` they stay open until the exit, so its SessionEnd hooks are recorded.)
        await server.disconnect(connection)
    await server.stop_watching()
    await server.stop_hooks()  # no hook process outlives the server
    output.flush()
    if connection.exit_requested and not connection.shutdown_requested:
        return 1  # LSP: exit without shutdown is an error exit
    return 0


def run_stdio(server: Served, opening: Opening | None = None) -> int:
    try:
        return asyncio.run(serve_stdio(server, opening=opening))
    finally:
        server.close()
