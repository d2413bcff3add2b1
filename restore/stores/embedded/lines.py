"""Lines of a thread file read in chunks, for pages and offset maps: each good line's JSON
text as the file has it (an answer embeds it), each bad one with where it is and why.

The hot path of every page: a chunk's whole lines are parsed in one `map` of
`orjson.loads`; only a chunk with a line that is not a good item (rare: damage) is taken
line by line, with offsets.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from restore.stores.embedded.jsonl import BOM, decode_line

WINDOW = 8 * 1024  # read per anchor probe
CHUNK = 256 * 1024  # read per step of counting lines, and of long lines
_FIRST_READ, _MAX_READ = 32 * 1024, 1024 * 1024  # a page's reads: small first, then doubling
MAX_ANCHOR_LINE = 16 * 1024 * 1024  # longer lines are not worth reading for an anchor


@dataclass(slots=True)
class Line:
    start: int
    """File offset of a bad line (a good line read in bulk does not need one: -1)."""
    end: int  # just past its newline (or the end of the file); -1 likewise
    item: dict[str, Any] | None
    raw: bytes = b""
    """A good line's JSON text, as sent in an answer (so its size there is exact)."""
    reason: str = ""
    preview: str = ""

    def skipped(self, line_no: int) -> dict[str, Any]:
        return {
            "lineNo": line_no,
            "byteOffset": self.start,
            "reason": self.reason,
            "preview": self.preview,
        }


def scan(fd: int, start: int, end: int, whole_items: bool = False) -> Iterator[Line]:
    """The non-blank lines in [start, end), read in chunks; `start` is a line start.

    Every page runs this over every line it reads, so a chunk's whole lines are parsed in
    one `map` of `orjson.loads` over them; only a chunk with a line that is not a good item
    (rare: damage) is taken line by line, with offsets."""
    at = start
    if start == 0 and os.pread(fd, len(BOM), 0) == BOM:
        at = len(BOM)
    parts: list[bytes] = []  # a line cut by a chunk boundary, so far
    base = at  # file offset of the first unconsumed byte
    step = _FIRST_READ  # a page of a few items stops early; a long read grows its reads
    while at < end:
        chunk = os.pread(fd, min(step, end - at), at)
        step = min(step * 2, _MAX_READ)
        if not chunk:
            break  # truncated meanwhile: what was read is what there is
        at += len(chunk)
        if parts and b"\n" not in chunk:
            parts.append(chunk)
            continue
        data = b"".join([*parts, chunk]) if parts else chunk
        whole = data.rfind(b"\n") + 1
        parts = [data[whole:]] if whole < len(data) else []
        if whole:
            yield from _lines(data[: whole - 1], base, whole_items)
        base += whole
    if parts:
        raw = b"".join(parts)
        item, _ = decode_line(raw)
        line = Line(base, at, item, raw) if item is not None else _bad(raw, base, at, False)
        if line is not None:
            yield line


def _lines(data: bytes, base: int, whole_items: bool) -> list[Line]:
    """The lines of `data` (whole lines, without the last newline) at file offset `base`.

    Pages need only a good line's seq (its text is what they send): unless `whole_items`,
    a line keeps `{"seq": n}`, a dict the garbage collector does not track, and its parsed
    item is freed at once instead of living on (and being walked by every collection)."""
    raws = data.split(b"\n")
    try:
        values = list(map(orjson.loads, raws))
    except orjson.JSONDecodeError:
        values = None  # a bad or blank line among them
    if values is not None and all(
        type(value) is dict
        and "seq" in value
        and "type" in value
        and "id" in value
        and isinstance(value["seq"], int)
        for value in values
    ):
        if whole_items:
            return [Line(-1, -1, value, raw) for value, raw in zip(values, raws, strict=True)]
        return [
            Line(-1, -1, {"seq": value["seq"]}, raw)
            for value, raw in zip(values, raws, strict=True)
        ]
    lines: list[Line] = []
    offset = base
    for raw in raws:
        item, _ = decode_line(raw)
        end = offset + len(raw) + 1
        line = Line(offset, end, item, raw) if item is not None else _bad(raw, offset, end, True)
        if line is not None:
            lines.append(line)
        offset = end
    return lines


def _bad(raw: bytes, start: int, end: int, terminated: bool) -> Line | None:
    """A line that is not a good item: None if blank (ignored), else reported with why."""
    if not raw.strip():
        return None
    reason = decode_line(raw)[1] if terminated else "torn_tail"
    return Line(start, end, None, b"", reason, raw[:80].decode("utf-8", "replace"))


def whole_line(fd: int, start: int, size: int) -> bytes | Literal[False] | None:
    """The line at `start` with its newline; None if the file ends before the newline,
    False if it is too long to be worth reading for an anchor."""
    parts: list[bytes] = []
    at = start
    while at - start < MAX_ANCHOR_LINE:
        chunk = os.pread(fd, WINDOW if at == start else CHUNK, at)
        if not chunk:
            return None
        newline = chunk.find(b"\n")
        if newline != -1:
            parts.append(chunk[: newline + 1])
            return b"".join(parts)
        parts.append(chunk)
        at += len(chunk)
        if at >= size:
            return None
    return False
