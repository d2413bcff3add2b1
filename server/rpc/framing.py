"""Message framing on a byte stream, without I/O: LSP `Content-Length` or one JSON per line.

Why detect instead of configure: vscode-jsonrpc sends `Content-Length` headers, Codex- and
ACP-style clients send newline-delimited JSON, and both start sessiond the same way. The
first non-blank byte decides for the whole connection: `{` or `[` means lines, anything
else means headers. Frames larger than `max_frame` are skipped without being buffered and
reported as `FrameTooLarge`, so one huge message costs no memory and the stream stays in
sync for the next one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

DEFAULT_MAX_FRAME = 16 * 1024 * 1024
MAX_HEADER_BYTES = 8 * 1024
_CONTENT_LENGTH = re.compile(rb"^content-length:\s*(\d+)\s*$", re.IGNORECASE | re.MULTILINE)


class Framing(StrEnum):
    HEADERS = "content-length"
    LINES = "newline"


@dataclass(frozen=True)
class Frame:
    body: bytes


@dataclass(frozen=True)
class FrameTooLarge:
    size: int
    limit: int


@dataclass(frozen=True)
class BadHeader:
    header: bytes


Event = Frame | FrameTooLarge | BadHeader


class FrameDecoder:
    """Feed bytes in, get complete frames (or framing errors) out."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self.framing: Framing | None = None
        self._buffer = bytearray()
        self._body_length: int | None = None
        self._discard = 0  # bytes of an oversized body still to drop
        self._discarding_line = False

    def feed(self, data: bytes) -> list[Event]:
        self._buffer += data
        events: list[Event] = []
        while True:
            if self.framing is None and not self._detect():
                return events
            event = self._next_lines() if self.framing is Framing.LINES else self._next_headers()
            if event is None:
                return events
            events.append(event)

    def _detect(self) -> bool:
        stripped = self._buffer.lstrip()
        if not stripped:
            self._buffer.clear()
            return False
        del self._buffer[: len(self._buffer) - len(stripped)]
        self.framing = Framing.LINES if stripped[0] in b"{[" else Framing.HEADERS
        return True

    def _next_lines(self) -> Event | None:
        while True:
            newline = self._buffer.find(b"\n")
            if self._discarding_line:
                if newline == -1:
                    self._buffer.clear()
                    return None
                del self._buffer[: newline + 1]
                self._discarding_line = False
                continue
            if newline == -1:
                if len(self._buffer) > self.max_frame:
                    size = len(self._buffer)
                    self._buffer.clear()
                    self._discarding_line = True
                    return FrameTooLarge(size, self.max_frame)
                return None
            line = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            if len(line) > self.max_frame:
                return FrameTooLarge(len(line), self.max_frame)
            if line.strip():
                return Frame(line)

    def _next_headers(self) -> Event | None:
        while True:
            if self._discard:
                dropped = min(self._discard, len(self._buffer))
                del self._buffer[:dropped]
                self._discard -= dropped
                if self._discard:
                    return None
            if self._body_length is not None:
                if len(self._buffer) < self._body_length:
                    return None
                body = bytes(self._buffer[: self._body_length])
                del self._buffer[: self._body_length]
                self._body_length = None
                return Frame(body)
            end, separator = self._header_end()
            if end == -1:
                if len(self._buffer) > MAX_HEADER_BYTES:
                    return self._resync()
                return None
            header = bytes(self._buffer[:end])
            del self._buffer[: end + separator]
            match = _CONTENT_LENGTH.search(header)
            if match is None:
                if not header.strip():
                    continue
                return BadHeader(header[:200])
            length = int(match.group(1))
            if length > self.max_frame:
                self._discard = length
                return FrameTooLarge(length, self.max_frame)
            self._body_length = length

    def _header_end(self) -> tuple[int, int]:
        crlf = self._buffer.find(b"\r\n\r\n")
        lf = self._buffer.find(b"\n\n")
        if crlf != -1 and (lf == -1 or crlf < lf):
            return crlf, 4
        return (lf, 2) if lf != -1 else (-1, 0)

    def _resync(self) -> Event:
        """Headers too long: drop up to the next `Content-Length` so later frames still work."""
        found = self._buffer.lower().find(b"content-length", 1)
        junk = bytes(self._buffer[:200])
        if found == -1:
            self._buffer.clear()
        else:
            del self._buffer[:found]
        return BadHeader(junk)


def encode(framing: Framing, body: bytes) -> bytes:
    """Frame an outgoing message the way the client framed its first one."""
    if framing is Framing.LINES:
        return body + b"\n"
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
