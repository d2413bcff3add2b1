"""Message framing on a byte stream, without I/O: LSP `Content-Length` or one JSON per line.

Why detect instead of configure: vscode-jsonrpc sends `Content-Length` headers, Codex- and
ACP-style clients send newline-delimited JSON, and both start sessiond the same way. The
first message decides for the whole connection: `{` or `[` means lines, a `Content-Length`
(or `Content-Type`) header means headers. A first line that is neither (a person typing
at a terminal, a stray banner) is reported as `NotAMessage` and dropped, and the next
line is looked at afresh: one wrong line never silences the rest. Frames larger than
`max_frame` are skipped without being buffered and reported as `FrameTooLarge`, so one
huge message costs no memory and the stream stays in sync for the next one.
"""

from __future__ import annotations

import re
from enum import StrEnum  # loaded by `re` already

from server.config import DEFAULT_MAX_FRAME

MAX_HEADER_BYTES = 8 * 1024
_CONTENT_LENGTH = re.compile(rb"^content-length:\s*(\d+)\s*$", re.IGNORECASE | re.MULTILINE)
_FIRST_HEADER = re.compile(rb"content-(length|type)[ \t]*:", re.IGNORECASE)


class Framing(StrEnum):
    HEADERS = "content-length"
    LINES = "newline"


class _Event:
    """A decoded event: immutable, equal by value. Plain classes, not dataclasses: every
    stdio spawn imports this module before its first answer (server/transport/early.py),
    and `dataclasses` (with `inspect`) costs more than the rest of that answer."""

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Event)
            and type(other) is type(self)
            and other._values() == self._values()
        )

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"


class Frame(_Event):
    __slots__ = ("body",)

    def __init__(self, body: bytes) -> None:
        self.body = body


class FrameTooLarge(_Event):
    __slots__ = ("limit", "size")

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit


class BadHeader(_Event):
    __slots__ = ("header",)

    def __init__(self, header: bytes) -> None:
        self.header = header


class NotAMessage(_Event):
    """A first line that is neither JSON nor a header (its first 200 bytes)."""

    __slots__ = ("line",)

    def __init__(self, line: bytes) -> None:
        self.line = line


Event = Frame | FrameTooLarge | BadHeader | NotAMessage


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
            if self.framing is None:
                detected = self._detect()
                if isinstance(detected, NotAMessage):
                    events.append(detected)
                    continue
                if not detected:
                    return events
            event = self._next_lines() if self.framing is Framing.LINES else self._next_headers()
            if event is None:
                return events
            events.append(event)

    def _detect(self) -> bool | NotAMessage:
        """Decide the framing from the first message: True once decided, False to wait for
        more bytes, a NotAMessage for a first line that is neither (dropped: the next
        line decides)."""
        if self._discarding_line:  # the rest of an overlong first line
            newline = self._buffer.find(b"\n")
            if newline == -1:
                self._buffer.clear()
                return False
            del self._buffer[: newline + 1]
            self._discarding_line = False
        stripped = self._buffer.lstrip()
        if not stripped:
            self._buffer.clear()
            return False
        del self._buffer[: len(self._buffer) - len(stripped)]
        if stripped[0] in b"{[":
            self.framing = Framing.LINES
            return True
        if _FIRST_HEADER.match(self._buffer):
            self.framing = Framing.HEADERS
            return True
        newline = self._buffer.find(b"\n")
        if newline == -1:
            if len(self._buffer) <= MAX_HEADER_BYTES and _could_be_header(self._buffer):
                return False  # `Content-Le`: the rest is on its way
            junk = bytes(self._buffer[:200])
            self._buffer.clear()
            self._discarding_line = True
            return NotAMessage(junk)
        junk = bytes(self._buffer[: min(newline, 200)]).rstrip(b"\r")
        del self._buffer[: newline + 1]
        return NotAMessage(junk)

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


def _could_be_header(start: bytearray) -> bool:
    """The first bytes of a `Content-Length:` or `Content-Type:` header so far."""
    head = bytes(start[:14]).lower()
    return b"content-length".startswith(head) or b"content-type".startswith(head)


def encode(framing: Framing, body: bytes) -> bytes:
    """Frame an outgoing message the way the client framed its first one."""
    if framing is Framing.LINES:
        return body + b"\n"
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
