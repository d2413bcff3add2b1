"""Reading one source file into items: the source's bytes in, items and a place out.

Pure (it reads the source file and nothing else, writes nothing), so a batch import can
run it in worker processes while its own process writes threads in file order
(pool.py); an import that reads a file in its own process runs the very
same code, so both give the same items, checkpoints and threads.

Reading is tolerant: a BOM, a garbage line, invalid UTF-8, a torn last line or a huge
first line never hide a session; bad lines are skipped and reported.

Reading is bounded: a transcript folder may be handed in by someone else (`--from DIR`), so
no line longer than LINE_BYTES is held (it is read past in chunks, and skipped as
`too_long`), and items waiting to be written are flushed by bytes as well as by count. A
source file is opened without following a link (`open_source`): the importer plans only
regular files (plan.py), and a link swapped in since is refused here.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import orjson

from protocol import json_text
from restore.agents.parsing import SourceParser
from restore.home.files import NotRegularFile
from restore.ids import sha256_of
from restore.redaction.engine import Redactor, TooCostly
from restore.stores.api import SkippedLine

HEAD_BYTES = 4096
BATCH_ITEMS = 2000  # items appended per write while importing one big file
BATCH_BYTES = 16 << 20
"""Source bytes behind the items held for one write: a batch is written at BATCH_ITEMS
items or at this many bytes, whichever comes first."""
HELD_BYTES = 64 << 20
"""Source bytes of items held while no line has said where the session runs: past this
they are written anyway (the thread bound to where its file says), so a file that never
names a cwd cannot make the importer hold all of it."""
LINE_BYTES = 32 << 20
"""The longest line read: far above any real transcript line (a few base64 screenshots),
and over the 16 MiB frame that any answer fits in. A longer one is read past, not held."""
SKIP_CHUNK = 1 << 20
PREVIEW_SOURCE = 8192
"""A skipped line's preview is cut from its first bytes, redacted (no secret the rules
know is longer than a few kilobytes: a PEM block)."""
PREPASS_BYTES = 8 << 20
"""A file's rest up to this size is passed to the redactor whole first (`parse`)."""
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def decode(data: bytes, start: int) -> tuple[dict[str, Any] | None, str | None, bool]:
    """A line's record (its bytes, found at `start`), why it was skipped, and whether
    invalid UTF-8 or a lone surrogate was replaced; a blank line is (None, None, False)."""
    raw = data.rstrip(b"\r\n")
    if start == 0 and raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8) :]
    if not raw.strip():
        return None, None, False
    try:  # a lone surrogate escape (Node's, a truncated emoji) becomes U+FFFD
        value, repaired = json_text.loads(raw)
    except orjson.JSONDecodeError:
        try:
            raw.decode("utf-8")
            return None, "invalid_json", False
        except UnicodeDecodeError:  # keep the line: the bad bytes become U+FFFD
            pass
        try:
            value, _ = json_text.loads(raw.decode("utf-8", "replace"))
            repaired = True
        except orjson.JSONDecodeError:
            return None, "invalid_json", False
    if not isinstance(value, dict):
        return None, "not_an_object", False
    return value, None, repaired


def open_source(path: str) -> IO[bytes]:
    """A source file, opened for reading only if it is a regular file reached without a
    link as its last component (ELOOP for a link; `NotRegularFile` for a FIFO, a device,
    a directory): what the plan saw as a file cannot be swapped for a link to another."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(errno.EINVAL, f"{path} is not a regular file", path)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def head_sha(path: str, offset: int) -> str:
    """sha256 of the file's first min(offset, HEAD_BYTES) bytes: its head, as read."""
    with open_source(path) as handle:
        return sha256_of(handle.read(min(offset, HEAD_BYTES)))


def range_sha(handle: IO[bytes], start: int, end: int) -> str:
    """sha256 of the bytes [start, end) of an open file, read in chunks (a line may be
    longer than anything held in memory)."""
    digest = hashlib.sha256()
    handle.seek(start)
    left = max(end - start, 0)
    while left and (chunk := handle.read(min(left, SKIP_CHUNK))):
        digest.update(chunk)
        left -= len(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class _LongLine:
    """A line over LINE_BYTES, read past: its first bytes (the preview), its length on
    disk, whether its newline came, and its sha (should it be the last line read)."""

    data: bytes
    length: int
    ended: bool
    sha: str


def _read_past(handle: IO[bytes], first: bytes) -> _LongLine:
    """The rest of a line whose first LINE_BYTES + 1 bytes are `first`, read in chunks and
    not kept."""
    digest = hashlib.sha256(first)
    length, ended = len(first), False
    while chunk := handle.readline(SKIP_CHUNK):
        digest.update(chunk)
        length += len(chunk)
        if chunk.endswith(b"\n"):
            ended = True
            break
    return _LongLine(first[:80], length, ended, digest.hexdigest())


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
    redactor: Redactor | None = None
    """The store's: each record is redacted as it is read, before the parser clips a
    title, a tool's output or a skipped line's preview (a secret cut in half would no
    longer be recognised), and before anything of it reaches a checkpoint or the ledger."""
    trailer: tuple[tuple[str, dict[str, Any]], ...] = ()
    """Records the agent keeps beside the file (FileStore.trailer: Copilot CLI's todo table),
    fed after its lines, each named by its key (its contents: one that did not change
    gives nothing new)."""


@dataclass(frozen=True)
class Facts:
    """What the parser knew at one point, all a thread is created and closed with."""

    cwd: str | None
    branch: str | None
    commit: str | None
    created: str | None
    last_ts: str | None
    title: str | None
    parent: dict[str, Any] | None = None
    """A sub-agent's session: `{"sessionId": the parent's session id as its agent names it,
    "toolCallId": the parent's tool call that started it, or None}` (a parser's
    `state["parent"]`); the importer links the thread under the parent's."""
    children: dict[str, Any] | None = None
    """Sub-agents whose events are in this file (`SourceParser.in_child`): their id →
    `{"toolCallId", "title"}` (a parser's `state["children"]`)."""
    fork: dict[str, Any] | None = None
    """A session the agent forked from another (Pi's `--fork`): `{"sessionId": the one it
    was forked from}` (a parser's `state["fork"]`); the thread says `forkedFrom`."""

    @classmethod
    def of(cls, parser: SourceParser) -> Facts:
        state = parser.state
        parent, children, fork = state.get("parent"), state.get("children"), state.get("fork")
        return cls(
            state["cwd"],
            state["branch"],
            state["commit"],
            state["created"],
            parser.last_ts,
            parser.title,
            parent if isinstance(parent, dict) else None,
            children if isinstance(children, dict) else None,
            fork if isinstance(fork, dict) else None,
        )


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
    redact = start.redactor
    offset, lines, line_start = start.offset, start.lines, start.line_start
    last_line: bytes | None = None  # the last line read; its sha proves appends later
    last_sha: str | None = None  # ... or its sha, when it was too long to hold
    writing = start.writing
    skipped: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    records = repaired = held = 0
    with open_source(start.path) as handle:
        handle.seek(offset)
        # One pass of the redactor over the whole rest of a file of ordinary size: when no
        # rule can match anywhere in it, none can in any of its lines, and the lines read
        # within it are not looked at one by one (most files; a line past it, appended
        # since, still is).
        clean_to = offset
        left = os.fstat(handle.fileno()).st_size - offset
        if redact is not None and 0 < left <= PREPASS_BYTES:
            rest = handle.read(left)  # what is there now: more may come, read line by line
            if not redact.possible_item(rest):
                clean_to = offset + len(rest)
            del rest
            handle.seek(offset)
        # Lines with their newline, at most LINE_BYTES each (no object per line: this loop
        # runs a million times in a big import).
        readline = handle.readline
        while data := readline(LINE_BYTES + 1):
            line_no = lines + 1
            if len(data) > LINE_BYTES and not data.endswith(b"\n"):  # never held, never parsed
                long = _read_past(handle, data)
                skipped.append(_skipped(line_no, offset, long.data, "too_long", redact))
                if not long.ended:  # still being written: read again once it is whole
                    break
                line_start, lines, last_line, last_sha = offset, line_no, None, long.sha
                offset += long.length
                continue
            record, reason, fixed = decode(data, offset)
            if redact is not None and record is not None and offset + len(data) > clean_to:
                read = parser.read_of(record)
                try:
                    record = redact.item(record, data) if read is None else redact.item(read)
                except TooCostly:  # skipped like a bad line, said: never stored unlooked-at
                    record, reason = None, "too_costly"
            if reason is not None and not data.endswith(b"\n"):
                # A line still being written (or cut by a crash): not consumed, so it is
                # read again, whole, once its writer finishes it.
                skipped.append(_skipped(line_no, offset, data, "torn_tail", redact))
                break
            if reason is not None:
                skipped.append(_skipped(line_no, offset, data, reason, redact))
            elif record is not None:
                try:
                    pending += parser.feed(line_no, record, record.get("timestamp"))
                except (TypeError, ValueError, RecursionError):
                    # A record its mapping cannot take (nested past the 255 levels the
                    # encoder writes, say): skipped like a bad line; the session goes on.
                    skipped.append(_skipped(line_no, offset, data, "mapping_failed", redact))
                else:
                    records += 1
                    repaired += fixed
                    held += len(data)
            line_start, lines, last_line = offset, line_no, data
            offset += len(data)
            if (len(pending) >= BATCH_ITEMS or held >= BATCH_BYTES) and (
                writing or parser.state["cwd"] or held >= HELD_BYTES
            ):
                yield Flush(pending, Facts.of(parser))
                writing, pending, held = True, [], 0
        handle.seek(0)
        head = sha256_of(handle.read(min(offset, HEAD_BYTES)))
    for key, record in start.trailer:
        if redact is not None:
            record = redact.item(record)
        pending += parser.feed(lines, record, record.get("timestamp"), key=key)
    tail = sha256_of(last_line) if last_line is not None else last_sha or start.tail_sha
    yield Parsed(
        pending,
        Facts.of(parser),
        parser.state,
        records,
        skipped,
        repaired,
        offset,
        lines,
        line_start,
        tail,
        head,
        parser.unmapped_seen,
    )


def parse_document(start: ParseStart) -> Parsed:
    """A session kept as one JSON document (Gemini CLI up to 0.38: `session-*.json`,
    rewritten whole on every change): its metadata is record 1 and its messages records
    2, 3, …, fed like lines. Read whole, once: a document that changed since (its head
    holds `lastUpdated`) no longer matches the checkpoint, so it is read again as a new
    revision; one that did not has nothing new. Not valid JSON (being rewritten, or cut)
    it is not consumed, and is read again next time."""
    parser = start.parser(dict(start.state) if start.state else None, start.fallback_ts)

    def unread(skipped: list[dict[str, Any]], offset: int, lines: int, at: int) -> Parsed:
        """Nothing consumed: read again from `offset` (0: the top) next time."""
        return Parsed(
            [],
            Facts.of(parser),
            parser.state,
            0,
            skipped,
            0,
            offset,
            lines,
            at,
            start.tail_sha,
            head_sha(start.path, offset),
            parser.unmapped_seen,
        )

    with open_source(start.path) as handle:
        data = handle.read(LINE_BYTES + 1)  # one document is one record: a line's budget
    if len(data) > LINE_BYTES:
        skipped = [_skipped(1, 0, data[:HEAD_BYTES], "too_long", start.redactor)]
        return unread(skipped, start.offset, start.lines, start.line_start)
    if start.offset > 0:  # read whole already (the checkpoint's head and tail still match)
        return unread([], start.offset, start.lines, start.line_start)
    document, reason, repaired = decode(data, 0)
    messages = document.pop("messages", None) if document is not None else None
    if document is None:  # blank, or not one JSON object
        skipped = [_skipped(1, 0, data, reason, start.redactor)] if reason else []
        return unread(skipped, 0, 0, 0)
    messages = messages if isinstance(messages, list) else []
    records = [document, *(m for m in messages if isinstance(m, dict))]
    if start.redactor is not None:
        try:
            records = [start.redactor.item(record) for record in records]
        except TooCostly:
            skipped = [_skipped(1, 0, data[:HEAD_BYTES], "too_costly", start.redactor)]
            return unread(skipped, 0, 0, 0)
    items: list[dict[str, Any]] = []
    failed = []
    for line_no, record in enumerate(records, 1):
        try:
            items += parser.feed(line_no, record, record.get("timestamp"))
        except (TypeError, ValueError, RecursionError):  # as in `parse`: skipped, said
            failed.append(_skipped(line_no, 0, b"a record of the document", "mapping_failed", None))
    return Parsed(
        items,
        Facts.of(parser),
        parser.state,
        len(records),
        failed,
        int(repaired),
        len(data),
        len(records),
        0,
        sha256_of(data),
        head_sha(start.path, len(data)),
        parser.unmapped_seen,
    )


def parse_whole(start: ParseStart) -> list[Flush | Parsed]:
    """`parse` to the end, for a worker process (its answer is pickled back whole)."""
    return list(parse(start))


def _skipped(
    line_no: int, start: int, data: bytes, reason: str, redactor: Redactor | None
) -> dict[str, Any]:
    """A skipped line's record, its preview cut from the redacted line (its first
    PREVIEW_SOURCE bytes: a line too costly to redact whole is previewed all the same)."""
    text = data[:PREVIEW_SOURCE].decode("utf-8", "replace")
    try:
        preview = (redactor.text(text) if redactor is not None else text)[:80].rstrip("\r\n")
    except TooCostly:
        preview = "(not shown: too costly to check for secrets)"
    return SkippedLine(line_no, start, reason, preview).to_wire()


skipped_line = _skipped
"""For the planner: a file refused before parsing (no session id at its head) reports its
first line as every skipped line is reported."""
