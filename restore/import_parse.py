"""Reading one source file into items: the source's bytes in, items and a place out.

Pure (it reads the source file and nothing else, writes nothing), so a batch import can
run it in worker processes while its own process writes threads in file order
(restore/import_pool.py); an import that reads a file in its own process runs the very
same code, so both give the same items, checkpoints and threads.

Reading is tolerant: a BOM, a garbage line, invalid UTF-8, a torn last line or a huge
first line never hide a session; bad lines are skipped and reported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from restore.jsonl import BOM, SkippedLine
from restore.sources.common import SourceParser

HEAD_BYTES = 4096
BATCH_ITEMS = 2000  # items appended per write while importing one big file


def decode(data: bytes, start: int) -> tuple[dict[str, Any] | None, str | None, bool]:
    """A line's record (its bytes, found at `start`), why it was skipped, and whether
    invalid UTF-8 was replaced; a blank line is (None, None, False)."""
    raw = data.rstrip(b"\r\n")
    if start == 0 and raw.startswith(BOM):
        raw = raw[len(BOM) :]
    if not raw.strip():
        return None, None, False
    repaired = False
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            raw.decode("utf-8")
            return None, "invalid_json", False
        except UnicodeDecodeError:  # keep the line: the bad bytes become U+FFFD
            repaired = True
        try:
            value = orjson.loads(raw.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            return None, "invalid_json", False
    if not isinstance(value, dict):
        return None, "not_an_object", False
    return value, None, repaired


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def head_sha(path: str, offset: int) -> str:
    """sha256 of the file's first min(offset, HEAD_BYTES) bytes: its head, as read."""
    with open(path, "rb") as handle:
        return sha(handle.read(min(offset, HEAD_BYTES)))


@dataclass(frozen=True)
class ParseStart:
    """Where to read one source file from, and with what the parser remembers."""

    path: str
    parser: type[SourceParser]
    offset: int
    lines: int
    line_start: int
    tail_sha: str
    """The sha of the last line already read (kept when no whole line follows)."""
    state: dict[str, Any] | None
    fallback_ts: str
    """When the file was last written: the date of items no line dates."""
    writing: bool
    """The thread exists (its writer is open): items may be written before the cwd is known."""


@dataclass(frozen=True)
class Facts:
    """What the parser knew at one point, all a thread is created and closed with."""

    cwd: str | None
    branch: str | None
    commit: str | None
    created: str | None
    last_ts: str | None
    title: str | None

    @classmethod
    def of(cls, parser: SourceParser) -> Facts:
        state = parser.state
        return cls(state["cwd"], state["branch"], state["commit"], state["created"],
                   parser.last_ts, parser.title)  # fmt: skip


@dataclass
class Flush:
    """A big file's items to write now (the thread is created with `facts` if new)."""

    items: list[dict[str, Any]]
    facts: Facts


@dataclass
class Parsed:
    """The end of a file's read: the items not yet written, and where reading stopped."""

    items: list[dict[str, Any]]
    facts: Facts
    state: dict[str, Any]
    records: int
    skipped: list[dict[str, Any]]
    repaired: int
    offset: int
    lines: int
    line_start: int
    tail_sha: str
    head_sha: str
    unmapped: dict[str, list[int]]
    """What the parser met and does not map: `record:<type>` → [count, first line]."""


def parse(start: ParseStart) -> Iterator[Flush | Parsed]:
    """Read a file from `start`: a `Flush` per BATCH_ITEMS items once they can be written
    (the thread exists, or a line said where the session runs), then one `Parsed`. A
    `.json` file is one JSON document (`parse_document`)."""
    if start.path.endswith(".json"):
        yield parse_document(start)
        return
    parser = start.parser(dict(start.state) if start.state else None, start.fallback_ts)
    offset, lines, line_start = start.offset, start.lines, start.line_start
    last_line: bytes | None = None  # the last line read; its sha proves appends later
    writing = start.writing
    skipped: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    records = repaired = 0
    with open(start.path, "rb") as handle:
        handle.seek(offset)
        # Lines as the file iterator gives them, newline included, however long (no
        # object per line: this loop runs a million times in a big import).
        for data in handle:
            line_no = lines + 1
            record, reason, fixed = decode(data, offset)
            if reason is not None and not data.endswith(b"\n"):
                # A line still being written (or cut by a crash): not consumed, so it is
                # read again, whole, once its writer finishes it.
                skipped.append(_skipped(line_no, offset, data, "torn_tail"))
                break
            if reason is not None:
                skipped.append(_skipped(line_no, offset, data, reason))
            elif record is not None:
                records += 1
                repaired += fixed
                pending += parser.feed(line_no, record, record.get("timestamp"))
            line_start, lines, last_line = offset, line_no, data
            offset += len(data)
            if len(pending) >= BATCH_ITEMS and (writing or parser.state["cwd"]):
                yield Flush(pending, Facts.of(parser))
                writing, pending = True, []
    yield Parsed(
        pending, Facts.of(parser), parser.state, records, skipped, repaired, offset, lines,
        line_start, sha(last_line) if last_line is not None else start.tail_sha,
        head_sha(start.path, offset), parser.unmapped_seen,
    )  # fmt: skip


def parse_document(start: ParseStart) -> Parsed:
    """A session kept as one JSON document (Gemini CLI up to 0.38: `session-*.json`,
    rewritten whole on every change): its metadata is record 1 and its messages records
    2, 3, …, fed like lines. Read whole, once: a document that changed since (its head
    holds `lastUpdated`) no longer matches the checkpoint, so it is read again as a new
    revision; one that did not has nothing new. Not valid JSON (being rewritten, or cut)
    it is not consumed, and is read again next time."""
    parser = start.parser(dict(start.state) if start.state else None, start.fallback_ts)
    with open(start.path, "rb") as handle:
        data = handle.read()
    if start.offset > 0:  # read whole already (the checkpoint's head and tail still match)
        return Parsed([], Facts.of(parser), parser.state, 0, [], 0, start.offset, start.lines,
                      start.line_start, start.tail_sha, head_sha(start.path, start.offset),
                      parser.unmapped_seen)  # fmt: skip
    document, reason, repaired = decode(data, 0)
    messages = document.pop("messages", None) if document is not None else None
    if document is None:  # blank, or not one JSON object
        skipped = [_skipped(1, 0, data, reason)] if reason else []
        return Parsed([], Facts.of(parser), parser.state, 0, skipped, 0, 0, 0, 0,
                      start.tail_sha, head_sha(start.path, 0), parser.unmapped_seen)  # fmt: skip
    messages = messages if isinstance(messages, list) else []
    records = [document, *(m for m in messages if isinstance(m, dict))]
    items: list[dict[str, Any]] = []
    for line_no, record in enumerate(records, 1):
        items += parser.feed(line_no, record, record.get("timestamp"))
    return Parsed(items, Facts.of(parser), parser.state, len(records), [], int(repaired),
                  len(data), len(records), 0, sha(data), head_sha(start.path, len(data)),
                  parser.unmapped_seen)  # fmt: skip


def parse_whole(start: ParseStart) -> list[Flush | Parsed]:
    """`parse` to the end, for a worker process (its answer is pickled back whole)."""
    return list(parse(start))


def _skipped(line_no: int, start: int, data: bytes, reason: str) -> dict[str, Any]:
    preview = data[:80].decode("utf-8", "replace").rstrip("\r\n")
    return SkippedLine(line_no, start, reason, preview).to_wire()
