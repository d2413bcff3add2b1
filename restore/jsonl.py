"""The thread file format: one JSON object per line, read tolerantly.

A torn last line, a UTF-8 BOM, a garbage line in the middle or an unknown item type never
hide the rest of a thread: bad lines are skipped, counted and reported, and kept on disk.
docs/storage.md describes the format precisely enough to write an independent reader.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from protocol.errors import ErrorKind, ProtocolError

FORMAT_VERSION = 1
BOM = b"\xef\xbb\xbf"
REQUIRED_FIELDS = ("seq", "type", "id")


def now_ts() -> str:
    """Fixed-width UTC timestamp with microseconds, so timestamps sort as text."""
    # isoformat is about twice as fast as strftime, and this runs for every append.
    return datetime.now(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def ts_at(seconds: float) -> str:
    """`now_ts`'s format for a `time.time()` value."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="microseconds")[:-6] + "Z"


@dataclass(frozen=True)
class SkippedLine:
    """A line the reader could not use; reported, never deleted."""

    lineNo: int
    byteOffset: int
    reason: str
    preview: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "lineNo": self.lineNo,
            "byteOffset": self.byteOffset,
            "reason": self.reason,
            "preview": self.preview,
        }


@dataclass
class ThreadFile:
    """Everything a read of one thread file found."""

    items: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[SkippedLine] = field(default_factory=list)
    bom: bool = False
    torn_tail_offset: int | None = None
    """Byte offset of an unparsable last line with no newline (a write cut short)."""
    unterminated_tail: bool = False
    """The last line parsed but lacks its newline; a writer must add it before appending."""
    size: int = 0
    """File offset where the parsed bytes end."""
    lines: int = 0
    """Line count up to `size` (including any before `base_offset` when parsing a tail)."""
    last_line_start: int | None = None
    """File offset of the last newline-terminated line: snapshots verify themselves by it."""


@dataclass(frozen=True)
class LineMark:
    """One line of a file, by position and sha256. Thread files are append-only, so while
    this line is still where it was, so is everything before it: derived state (index rows,
    offset maps) verifies with it that the bytes it covers have not changed."""

    start: int
    end: int
    sha: str

    @classmethod
    def of(cls, fd: int, start: int, end: int) -> LineMark:
        return cls(start, end, hashlib.sha256(os.pread(fd, end - start, start)).hexdigest())

    def holds(self, fd: int) -> bool:
        """Whether the file still has this line where it was."""
        if not 0 <= self.start < self.end:
            return False
        data = os.pread(fd, self.end - self.start, self.start)
        return len(data) == self.end - self.start and hashlib.sha256(data).hexdigest() == self.sha


def encode_line(item: dict[str, Any]) -> bytes:
    """An item as its stored line. What the encoder refuses (nested past its 255 levels,
    say, from a path that did not check) is InvalidParams naming the item, not a crash."""
    try:
        return orjson.dumps(item) + b"\n"
    except orjson.JSONEncodeError as exc:
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS,
            f"item {item.get('id')!r} cannot be stored: {exc}",
            id=item.get("id"),
        ) from None


def parse_bytes(data: bytes, base_offset: int = 0, base_lines: int = 0) -> ThreadFile:
    """Split a thread file's bytes into items and skipped lines.

    `data` may be a tail of the file starting at `base_offset` (after a snapshot), in which
    case offsets and line numbers are reported as positions in the whole file.
    """
    result = ThreadFile(size=base_offset + len(data))
    offset = 0
    if base_offset == 0 and data.startswith(BOM):
        result.bom = True
        offset = len(BOM)
    line_no = base_lines
    length = len(data)
    while offset < length:
        line_no += 1
        end = data.find(b"\n", offset)
        terminated = end != -1
        if not terminated:
            end = length
        else:
            result.last_line_start = base_offset + offset
        raw = data[offset:end]
        if raw.strip():
            item, reason = decode_line(raw)
            if item is not None:
                result.items.append(item)
                if not terminated:
                    result.unterminated_tail = True
            else:
                if not terminated:
                    result.torn_tail_offset = offset
                    reason = "torn_tail"
                preview = raw[:80].decode("utf-8", "replace")
                result.skipped.append(SkippedLine(line_no, base_offset + offset, reason, preview))
        offset = end + 1
    result.lines = line_no
    if result.torn_tail_offset is not None:
        result.torn_tail_offset += base_offset
    return result


def decode_line(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, "invalid_json"
    if not isinstance(value, dict):
        return None, "not_an_object"
    # Spelled out (REQUIRED_FIELDS): this runs for every line of every page and replay.
    if "seq" not in value or "type" not in value or "id" not in value:
        return None, "missing_fields"
    if not isinstance(value["seq"], int):
        return None, "missing_fields"
    return value, ""
