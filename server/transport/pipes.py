"""stdin and stdout on the event loop, for `sessiond serve --stdio` and `sessiond acp`.

Input goes straight into a frame decoder as it arrives; output written in one turn of the
loop leaves in one flush. Importing this loads no server state.
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from collections.abc import Callable
from typing import BinaryIO

CHUNK = 1 << 16


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


async def read_input(stdin: BinaryIO, feed: Callable[[bytes], None], ended: asyncio.Event) -> None:
    """Start feeding `feed` from stdin; `ended` is set at end of input."""
    await _read_input(stdin, _Input(feed, ended))


class BatchedOutput:
    """Writes to stdout; everything written in one turn of the loop leaves in one flush.
    `on_gone` is called when the reader is gone (a broken pipe)."""

    def __init__(self, out: BinaryIO, on_gone: Callable[[], None]) -> None:
        self._out = out
        self._on_gone = on_gone
        self._scheduled = False

    def write(self, data: bytes) -> None:
        try:
            self._out.write(data)
        except (BrokenPipeError, ValueError):
            self._on_gone()
            return
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        try:
            self._out.flush()
        except (BrokenPipeError, ValueError):
            self._on_gone()  # the reader is gone; nobody is left to answer
