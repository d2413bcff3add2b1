"""The thread file format: one JSON object per line (restore/stores/api.py encodes them),
read tolerantly.

A torn last line, a UTF-8 BOM, a garbage line in the middle or an unknown item type never
hide the rest of a thread: bad lines are skipped, counted and reported, and kept on disk.
docs/storage.md describes the format precisely enough to write an independent reader.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import orjson

from restore.ids import sha256_of
from restore.stores.api import SkippedLine, ThreadFile

BOM = b"\xef\xbb\xbf"
REQUIRED_FIELDS = ("seq", "type", "id")


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
        return cls(start, end, sha256_of(os.pread(fd, end - start, start)))

    def holds(self, fd: int) -> bool:
        """Whether the file still has this line where it was."""
        if not 0 <= self.start < self.end:
            return False
        data = os.pread(fd, self.end - self.start, self.start)
        return len(data) == self.end - self.start and sha256_of(data) == self.sha


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
