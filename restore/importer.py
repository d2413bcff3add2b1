"""Claude Code and Codex sessions as sessiond threads: imported once, then as they grow.

Each source file (one agent session) becomes one thread whose id is derived from the
agent and the session id, and each item's id from its source line, so importing twice
writes nothing new, and lines appended since the last import land in the same thread.
How far a file was read is an `import_checkpoint` item in the thread (its path, offset,
line count, sha256 of the file's head and of the last line read, the parser's state);
`imports.sqlite3` caches the latest one per file. A file whose head or last imported line
no longer match, or that shrank, was rewritten rather than appended to: it is imported
again, whole, as a new revision (a new thread, `origin.revision` + 1), never mixed into
the old one. docs/import.md has the field-by-field mapping and these rules.

Reading is tolerant: a BOM, a garbage line, invalid UTF-8, a torn last line or a huge
first line never hide a session; bad lines are skipped and reported (in the summary and
in the checkpoint item), an empty file is skipped with its reason.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISREG
from typing import Any

import orjson

from protocol.errors import ErrorKind, ProtocolError
from restore.atomic import sync_filesystem
from restore.environment import ENVIRONMENT_FIELDS, probe
from restore.import_ledger import ImportLedger, SourceCheckpoint
from restore.jsonl import BOM, LineMark, SkippedLine, parse_bytes
from restore.sources import claude_code, codex
from restore.sources.common import SourceParser
from restore.sources.handoff import thread_id_for
from restore.store import Durability, ThreadStore, ThreadWriter, read_thread_file
from restore.summary import ThreadSummary
from restore.threads import ThreadService

Progress = Callable[[int, int], None]
HEAD_BYTES = 4096
BATCH_ITEMS = 2000  # items appended per write while importing one big file
CHUNK = 50  # files per batch of a long import: one index transaction, one progress report
SKIPPED_KEPT = 100  # skipped lines listed per checkpoint (all are counted)


# --- the agents' stores ----------------------------------------------------------------


@dataclass(frozen=True)
class SourceKind:
    """One agent's session store: where it is, which files are sessions, how to parse them."""

    name: str
    agent: str
    parser: type[SourceParser]

    def default_root(self) -> Path:
        """`$CLAUDE_CONFIG_DIR/projects` else `~/.claude/projects`; `$CODEX_HOME/sessions`
        else `~/.codex/sessions`."""
        if self.agent == claude_code.AGENT:
            base = os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude"
            return Path(base) / "projects"
        return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "sessions"

    def is_session_file(self, root: Path, path: Path) -> bool:
        """Claude Code: `<root>/<encoded-cwd>/<id>.jsonl` (sub-agent transcripts deeper
        down are not sessions); Codex: `rollout-*.jsonl` anywhere under the root."""
        if path.suffix != ".jsonl":
            return False
        if self.agent == claude_code.AGENT:
            return path.parent.parent == root
        return path.name.startswith("rollout-") and root in path.parents

    def session_files(self, root: Path) -> list[Path]:
        found = []
        for directory, _, names in os.walk(root):
            for name in names:
                path = Path(directory, name)
                if self.is_session_file(root, path):
                    found.append(path)
        return sorted(found)

    def session_id(self, path: Path) -> str:
        """The id the agent resumes by: Claude Code's file name, Codex's trailing uuid."""
        stem = path.stem
        if self.agent == codex.AGENT and len(stem) > 36:
            try:
                return str(uuid.UUID(stem[-36:]))
            except ValueError:
                pass
        return stem

    def fallback_cwd(self, path: Path) -> str:
        """Where a session ran when none of its lines says: Claude Code's folder name
        decoded (lossy: it spells `/` and `.` as `-`), else the file's folder."""
        if self.agent == claude_code.AGENT and path.parent.name.startswith("-"):
            return path.parent.name.replace("-", "/")
        return str(path.parent)


SOURCES = {
    "claude": SourceKind("claude", claude_code.AGENT, claude_code.ClaudeCodeParser),
    "codex": SourceKind("codex", codex.AGENT, codex.CodexParser),
}


# --- reading source lines --------------------------------------------------------------


@dataclass(frozen=True)
class SourceLine:
    no: int
    start: int
    data: bytes

    @property
    def end(self) -> int:
        return self.start + len(self.data)


def read_lines(path: Path, offset: int, line_no: int) -> Iterator[SourceLine]:
    """The file's lines from `offset`, with their bytes (newline included), however long."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        for data in handle:
            line_no += 1
            yield SourceLine(line_no, offset, data)
            offset += len(data)


def decode(line: SourceLine) -> tuple[dict[str, Any] | None, str | None, bool]:
    """(record, why it was skipped, whether invalid UTF-8 was replaced); blank: (None, None)."""
    raw = line.data.rstrip(b"\r\n")
    if line.start == 0 and raw.startswith(BOM):
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


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _iso(seconds: float) -> str:
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


# --- results ---------------------------------------------------------------------------


@dataclass
class FileResult:
    """What importing one source file did: created, updated, revision (rewritten: a new
    thread), unchanged, empty, deferred (no cwd yet, while watching), busy, missing,
    not-a-file (a FIFO or device where a session file was expected: never opened)."""

    path: str
    status: str
    threadId: str | None = None
    items: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    repaired: int = 0
    reason: str | None = None
    summary: ThreadSummary | None = None
    appended: list[dict[str, Any]] = field(default_factory=list)
    """The stored lines an update added (for subscribers; a new thread's are not kept)."""

    def add(self, stored: list[dict[str, Any]], *, keep: bool) -> None:
        self.items += len(stored)
        if keep:
            self.appended += stored

    @property
    def changed(self) -> bool:
        return self.status in ("created", "updated", "revision")


@dataclass
class ImportSummary:
    """An import run: sessions seen and what happened to each, items, skipped lines, time."""

    agent: str
    root: str
    sessions: int = 0
    created: int = 0
    updated: int = 0
    revisions: int = 0
    unchanged: int = 0
    empty: int = 0
    deferred: int = 0
    busy: int = 0
    items: int = 0
    skippedLines: int = 0
    repairedLines: int = 0
    seconds: float = 0.0
    problems: list[dict[str, Any]] = field(default_factory=list)

    def add(self, result: FileResult) -> None:
        self.sessions += 1
        counter = {"revision": "revisions"}.get(result.status, result.status)
        if hasattr(self, counter) and counter not in ("items", "sessions"):
            setattr(self, counter, getattr(self, counter) + 1)
        self.items += result.items
        self.skippedLines += len(result.skipped)
        self.repairedLines += result.repaired
        if result.reason or result.skipped or result.repaired:
            self.problems.append({
                "path": result.path, "status": result.status, "reason": result.reason,
                "skipped": result.skipped, "repaired": result.repaired,
            })  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


# --- the importer ----------------------------------------------------------------------


class Importer:
    """Imports one agent's sessions into the service's data dir.

    `live` is for watching: a session that has not yet said where it runs waits for the
    line that does (instead of being filed under a guessed directory).
    """

    def __init__(
        self,
        service: ThreadService,
        kind: SourceKind,
        root: Path | None = None,
        *,
        live: bool = False,
        on_write: Callable[[ThreadWriter], None] | None = None,
    ) -> None:
        """`on_write` hears of every thread written (default: the service notes its size,
        so the watcher does not report this process's own writes as another's)."""
        self.service = service
        self.kind = kind
        self.root = (root or kind.default_root()).expanduser().absolute()
        self.live = live
        self.ledger = ImportLedger(service.layout.import_ledger_path)
        self._on_write = on_write or service.note_written
        self._environments: dict[str, dict[str, Any]] = {}
        self._rows: list[tuple[ThreadSummary, Path, LineMark | None]] = []
        self._checkpoints: list[SourceCheckpoint] = []
        # Writes go to the OS only; `commit` syncs the batch (see there).
        self._store = ThreadStore(service.layout, Durability.NONE)

    def import_all(self, progress: Progress | None = None) -> ImportSummary:
        """Every session under the root; unchanged ones cost a stat and no read."""
        began = time.perf_counter()
        summary = ImportSummary(self.kind.agent, str(self.root))
        sources = self.scan()
        if progress:
            progress(0, len(sources))
        for start in range(0, len(sources), CHUNK):
            for result in self.import_files(sources[start : start + CHUNK]):
                summary.add(result)
            if progress:
                progress(min(start + CHUNK, len(sources)), len(sources))
        summary.seconds = time.perf_counter() - began
        return summary

    def scan(self) -> list[tuple[Path, SourceCheckpoint | None]]:
        """Every session file under the root, with its ledger row (one query for all)."""
        files = self.kind.session_files(self.root) if self.root.is_dir() else []
        known = self.ledger.all(self.kind.agent)
        return [(path, known.get(str(path))) for path in files]

    def import_files(self, sources: list[tuple[Path, SourceCheckpoint | None]]) -> list[FileResult]:
        """Import a batch of `scan`'s files, then write their listing rows."""
        results = [self.import_file(path, known, looked_up=True) for path, known in sources]
        self.commit()
        return results

    def commit(self) -> None:
        """Make what was imported since the last commit durable, then record it.

        Threads are written without a sync per file; one filesystem sync covers the batch,
        and only then are the ledger rows written (a checkpoint never gets ahead of the
        thread it describes) and the listing rows (other processes see the threads)."""
        if self._checkpoints:
            sync_filesystem(self.service.layout.home)
            checkpoints, self._checkpoints = self._checkpoints, []
            self.ledger.put_many(checkpoints)
        if self._rows:
            rows, self._rows = self._rows, []
            self.service.index.upsert_many(rows)

    def close(self) -> None:
        self.commit()
        self.ledger.close()

    def import_file(
        self, path: Path, known: SourceCheckpoint | None = None, *, looked_up: bool = False
    ) -> FileResult:
        """Import what is new in one source file (`known`: its ledger row, if `looked_up`)."""
        source = str(path)
        try:
            stat = path.stat()
        except FileNotFoundError:
            return FileResult(source, "missing", reason="the file is gone")
        if not S_ISREG(stat.st_mode):  # a FIFO would block the import (and the watcher) forever
            return FileResult(source, "not-a-file", reason="not a regular file; not read")
        entry = known if looked_up else self.ledger.get(source)
        if entry is not None and (entry.size, entry.mtimeNs) == (stat.st_size, stat.st_mtime_ns):
            return FileResult(source, "unchanged", entry.threadId)
        if stat.st_size == 0:
            return FileResult(source, "empty", reason="empty file")
        session_id = self.kind.session_id(path)
        if entry is None:
            entry = self._recover(session_id, source)
        start, revision, status = self._plan(path, stat, session_id, entry)
        thread_id = thread_id_for(self.kind.agent, session_id, revision)
        writer = None
        if start is not None:
            try:
                writer = self._store.open_writer(thread_id)
            except ProtocolError as exc:
                if exc.kind is not ErrorKind.THREAD_BUSY:
                    raise
                return FileResult(source, "busy", thread_id, reason=exc.message)
        try:
            return self._read(path, stat, session_id, revision, start, writer, status)
        finally:
            if writer is not None and not writer.closed:
                writer.close()

    # --- planning ------------------------------------------------------------------------

    def _plan(
        self, path: Path, stat: os.stat_result, session_id: str, entry: SourceCheckpoint | None
    ) -> tuple[SourceCheckpoint | None, int, str]:
        """Where to start: (checkpoint to continue from, revision, status if written)."""
        if entry is None:
            return None, self._free_revision(session_id, 1), "created"
        if self.service.layout.locate(entry.threadId) is None:
            return None, entry.revision, "created"  # deleted by the user: back in full
        if self._appended(path, stat, entry):
            return entry, entry.revision, "updated"
        return None, self._free_revision(session_id, entry.revision + 1), "revision"

    def _appended(self, path: Path, stat: os.stat_result, entry: SourceCheckpoint) -> bool:
        """The file still starts with what was read: only appended to since."""
        if stat.st_size < entry.offset:
            return False
        with open(path, "rb") as handle:
            if _sha(handle.read(min(entry.offset, HEAD_BYTES))) != entry.headSha:
                return False
            handle.seek(entry.lineStart)
            return _sha(handle.read(entry.offset - entry.lineStart)) == entry.tailSha

    def _free_revision(self, session_id: str, first: int) -> int:
        for revision in itertools.count(first):
            thread_id = thread_id_for(self.kind.agent, session_id, revision)
            if self.service.layout.locate(thread_id) is None:
                return revision
        raise AssertionError("unreachable")

    def _recover(self, session_id: str, source: str) -> SourceCheckpoint | None:
        """The latest checkpoint of this file in its threads (the ledger lost it). A thread
        of this file without one (cut before its first checkpoint was written) is read
        into again from the start: the item ids keep what it has from being doubled."""
        found = None
        for revision in itertools.count(1):
            thread_id = thread_id_for(self.kind.agent, session_id, revision)
            located = self.service.layout.locate(thread_id)
            if located is None:
                return found
            items = parse_bytes(read_thread_file(located[0], thread_id)).items
            origin = items[0].get("origin") if items else None
            if not isinstance(origin, dict) or origin.get("path") != source:
                continue
            found = _from_start(source, self.kind.agent, session_id, revision, thread_id)
            for item in items:
                if item.get("type") == "import_checkpoint" and item.get("source") == source:
                    found = SourceCheckpoint.from_item(item) or found
        raise AssertionError("unreachable")

    # --- reading and writing ---------------------------------------------------------------

    def _read(
        self,
        path: Path,
        stat: os.stat_result,
        session_id: str,
        revision: int,
        start: SourceCheckpoint | None,
        writer: ThreadWriter | None,
        status: str,
    ) -> FileResult:
        source = str(path)
        thread_id = thread_id_for(self.kind.agent, session_id, revision)
        state = dict(start.parser) if start and start.parser else None
        parser = self.kind.parser(state, _iso(stat.st_mtime))
        offset, lines = (start.offset, start.lines) if start else (0, 0)
        line_start = start.lineStart if start else 0
        last_line: bytes | None = None  # the last line read; its sha proves appends later
        result = FileResult(source, status, thread_id)
        pending: list[dict[str, Any]] = []
        records = 0
        for line in read_lines(path, offset, lines):
            record, reason, repaired = decode(line)
            if reason is not None and not line.data.endswith(b"\n"):
                # A line still being written (or cut by a crash): not consumed, so it is
                # read again, whole, once its writer finishes it.
                result.skipped.append(_skipped(line, "torn_tail"))
                break
            if reason is not None:
                result.skipped.append(_skipped(line, reason))
            elif record is not None:
                records += 1
                result.repaired += repaired
                pending += parser.feed(line.no, record, record.get("timestamp"))
            offset, lines, line_start, last_line = line.end, line.no, line.start, line.data
            if len(pending) >= BATCH_ITEMS and (writer or parser.state["cwd"]):
                if writer is None:
                    writer, added = self._create(thread_id, revision, session_id, source, parser)
                    result.items += added
                result.add(self._append(writer, pending), keep=start is not None)
                pending = []
        if writer is None and records == 0 and not result.skipped:
            return FileResult(source, "empty", reason="no records, only blank lines")
        if writer is None and parser.state["cwd"] is None and self.live:
            return FileResult(source, "deferred", reason="no line says where it runs yet")
        if writer is not None and offset == (start.offset if start else 0) and not pending:
            result.status = "unchanged"  # touched, or only a torn tail: nothing to add
        tail_sha = start.tailSha if start else _sha(b"")
        checkpoint = SourceCheckpoint(
            source=source, agent=self.kind.agent, sessionId=session_id, revision=revision,
            threadId=thread_id, offset=offset, lines=lines, lineStart=line_start,
            headSha=self._head_sha(path, offset), size=stat.st_size,
            tailSha=_sha(last_line) if last_line is not None else tail_sha,
            mtimeNs=stat.st_mtime_ns, parser=parser.state,
        )  # fmt: skip
        if writer is None:  # a new thread, whole: one write, one sync
            closing = self._closing(parser.title, parser, result, checkpoint)
            writer, added = self._create(
                thread_id, revision, session_id, source, parser, pending, closing
            )
            result.items += added
        elif result.status != "unchanged":
            closing = self._closing(writer.summary.title, parser, result, checkpoint)
            result.add(self._append(writer, pending, closing), keep=True)
        mark = writer.mark()  # the row's last line, so the index reads only what follows
        writer.close()
        self._checkpoints.append(checkpoint)
        result.summary = writer.summary
        self._rows.append((writer.summary, writer.path, mark))
        return result

    def _closing(
        self,
        title: str | None,
        parser: SourceParser,
        result: FileResult,
        checkpoint: SourceCheckpoint,
    ) -> list[dict[str, Any]]:
        """Bookkeeping after a file's items: a new title (the thread has `title`), then the
        checkpoint."""
        items: list[dict[str, Any]] = []
        stamp = {"ts": parser.last_ts} if parser.last_ts else {}
        if parser.title and parser.title != title:
            items.append({"type": "thread_title", "id": f"title:{checkpoint.offset}",
                          "title": parser.title, **stamp})  # fmt: skip
        marker = checkpoint.to_item()
        marker.update(skipped=result.skipped[:SKIPPED_KEPT], skippedCount=len(result.skipped),
                      repairedLines=result.repaired, **stamp)  # fmt: skip
        return [*items, marker]

    @staticmethod
    def _head_sha(path: Path, offset: int) -> str:
        with open(path, "rb") as handle:
            return _sha(handle.read(min(offset, HEAD_BYTES)))

    def _append(
        self,
        writer: ThreadWriter,
        items: list[dict[str, Any]],
        bookkeeping: list[dict[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """Append items (and bookkeeping) in one write; the items of `items` that were new."""
        bookkeeping = bookkeeping or []
        session_id = writer.summary.latestSessionId or _session_of(writer.thread_id)
        stored = writer.append([*items, *bookkeeping], session_id, keep_ts=True).stored
        if stored:
            self._on_write(writer)
        marks = {item["id"] for item in bookkeeping}
        return [item for item in stored if item["id"] not in marks]

    def _create(
        self,
        thread_id: str,
        revision: int,
        session_id: str,
        source: str,
        parser: SourceParser,
        items: list[dict[str, Any]] | None = None,
        bookkeeping: list[dict[str, Any]] | None = None,
    ) -> tuple[ThreadWriter, int]:
        """The thread (with its first items), bound to where the session ran: its recorded
        cwd and branch (and commit, when the agent recorded one) over the repository as it
        is now. Returns the writer and how many of `items` were written."""
        state = parser.state
        cwd = state["cwd"] or self.kind.fallback_cwd(Path(source))
        environment = dict(self._environment(cwd))
        if state["branch"]:
            if environment.get("branch") != state["branch"]:
                environment["headSha"] = None  # the HEAD of that branch then is unknown
            environment["branch"] = state["branch"]
        if state["commit"]:
            environment["headSha"] = state["commit"]
        origin = {"agent": self.kind.agent, "sessionId": session_id, "path": source,
                  "revision": revision}  # fmt: skip
        meta = {
            "type": "session_meta", "id": "meta", "ts": state["created"] or parser.last_ts,
            "threadId": thread_id, "source": "startup", "reason": "import", "origin": origin,
            **{key: environment.get(key) for key in ENVIRONMENT_FIELDS},
            "title": parser.title, "client": {"name": self.kind.agent},
        }  # fmt: skip
        meta = {key: value for key, value in meta.items() if value is not None}
        items, bookkeeping = items or [], bookkeeping or []
        try:
            writer = self._store.create(
                thread_id, _session_of(thread_id), meta, keep_ts=True, items=[*items, *bookkeeping]
            )
        except ProtocolError as exc:  # another importer created it a moment ago
            if exc.kind is not ErrorKind.INVALID_ID:
                raise
            writer = self._store.open_writer(thread_id)
            writer.loaded = None
            return writer, len(self._append(writer, items, bookkeeping))
        writer.loaded = None
        self._on_write(writer)
        return writer, len(items)

    def _environment(self, cwd: str) -> dict[str, Any]:
        """The repository at `cwd` as it is now, probed once per directory per run."""
        if cwd not in self._environments:
            self._environments[cwd] = probe(cwd)
        return self._environments[cwd]


def _from_start(
    source: str, agent: str, session_id: str, revision: int, thread_id: str
) -> SourceCheckpoint:
    """A checkpoint before the first byte: continuing from it reads the whole file."""
    empty = _sha(b"")
    return SourceCheckpoint(source, agent, session_id, revision, thread_id, 0, 0, 0, empty,
                            empty, -1, -1, {})  # fmt: skip


def _session_of(thread_id: str) -> str:
    """The sessiond session an imported thread's items are written under."""
    return str(uuid.uuid5(uuid.UUID(thread_id), "import"))


def _skipped(line: SourceLine, reason: str) -> dict[str, Any]:
    preview = line.data[:80].decode("utf-8", "replace").rstrip("\r\n")
    return SkippedLine(line.no, line.start, reason, preview).to_wire()
