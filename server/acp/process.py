"""The `sessiond acp` process: the editor on stdin/stdout, proxied to AGENT until either
side ends (server/acp/proxy.py does the proxying)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from protocol.errors import ErrorKind, ProtocolError
from server.acp.checks import line_decoder
from server.acp.proxy import AcpProxy
from server.processes.watchdog import Watchdog
from server.rpc.framing import Frame, FrameTooLarge

logger = logging.getLogger("sessiond.acp")


class EditorOutput:
    """stdout, the editor's end: what one turn of the loop writes leaves in one write,
    after the records it shows are written (`before_flush`: durable before shown). Its own
    buffer, whatever Python's (PYTHONUNBUFFERED makes each write of sys.stdout a system
    call: 20,000 updates took a second of writes alone)."""

    def __init__(self, fd: int, on_gone: Callable[[], None]) -> None:
        self._fd = fd
        self._on_gone = on_gone
        self._chunks: list[bytes] = []
        self._scheduled = False
        self.before_flush: Callable[[], None] | None = None

    def write(self, data: bytes) -> None:
        self._chunks.append(data)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if self.before_flush is not None:
            self.before_flush()
        if not self._chunks:
            return
        view = memoryview(b"".join(self._chunks))
        self._chunks.clear()
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except (BrokenPipeError, OSError):
            self._on_gone()  # the editor is gone; nobody is left to answer


async def serve(
    home: Path,
    argv: list[str],
    store: str | None = None,
    watchdog: Watchdog | None = None,
    redaction: str | None = None,
) -> int:
    """Proxy the editor on stdin/stdout to AGENT until either side ends."""
    from server.transport.pipes import read_input

    loop = asyncio.get_running_loop()
    ended = asyncio.Event()
    output = EditorOutput(sys.stdout.fileno(), ended.set)
    proxy = AcpProxy(home, argv, output.write, store, watchdog, redaction)
    output.before_flush = proxy._write_batches
    try:
        await proxy.start_agent()
    except OSError as exc:
        print(f"sessiond acp: cannot start {argv[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, ended.set)
    decoder = line_decoder()

    def feed(chunk: bytes) -> None:
        for event in decoder.feed(chunk):
            if isinstance(event, Frame):
                proxy.editor_bytes(event.body)
            elif isinstance(event, FrameTooLarge):
                logger.warning("the editor sent a %d-byte message; refused", event.size)
                error = ProtocolError(ErrorKind.PAYLOAD_TOO_LARGE, f"message of {event.size} bytes")
                proxy._answer_error(None, error)

    try:
        await read_input(sys.stdin.buffer, feed, ended)
        await ended.wait()
        output.flush()
        await proxy.stop()
    finally:
        proxy.close()
    return 0


def main(
    home: Path, argv: list[str], store: str | None = None, redaction: str | None = None
) -> int:
    if not argv:
        print(
            "sessiond acp: name the agent to run: sessiond acp -- AGENT [ARGS...]", file=sys.stderr
        )
        return 2
    watchdog = Watchdog.start() if os.name == "posix" else None  # server/processes/watchdog.py
    return asyncio.run(serve(home, argv, store, watchdog, redaction))
