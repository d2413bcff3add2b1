"""Planning one source file before it is read: whether it changed since the last import
(a stat, then the head and the last line read, by sha256), where to continue from, and
which thread (revision) it goes to — the thread's writer held from here to its write. A
file whose head or last imported line no longer match, or that shrank, was rewritten: it
is imported again, whole, as a new revision (docs/import.md)."""

from __future__ import annotations

import errno
import itertools
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISDIR, S_ISLNK, S_ISREG

from protocol.errors import ErrorKind, ProtocolError
from restore.agents.api import Agent
from restore.agents.files import FileStore
from restore.agents.identity import thread_id_for
from restore.ids import sha256_of
from restore.imports.ledger import ImportLedger, SourceCheckpoint
from restore.imports.parse import HEAD_BYTES, ParseStart, open_source, range_sha, skipped_line
from restore.imports.results import FileResult
from restore.stores.api import Store, Writer

EMPTY_SHA = sha256_of(b"")
FILE_BYTES = 1 << 30
"""The largest source file imported (a long real session is tens of MB): a bigger one, a
sparse 2 GB file say, is reported `too-large` and not read."""


@dataclass
class Planned:
    """A source to read, as planned: where from, into which thread (its writer open when
    it exists), and the status if anything is written. A source is a session file, or a
    database store's session (`<database>#<session id>`)."""

    source: str
    size: int
    """The file's size; a database session's change counter (DatabaseSession.changes)."""
    mtime_ns: int
    """The file's mtime; a database session's row's last change (ns)."""
    session_id: str
    revision: int
    thread_id: str
    start: SourceCheckpoint | None
    writer: Writer | None
    status: str
    note: str | None = None
    """What the import should say about this session (FileStore.note)."""

    def close(self) -> None:
        if self.writer is not None and not self.writer.closed:
            self.writer.close()


class Planner:
    """Plans an agent's source files under `root` against the store and the ledger."""

    def __init__(
        self, agent: Agent, files: FileStore, root: Path, ledger: ImportLedger, store: Store
    ) -> None:
        self.agent = agent
        self.files = files
        self.root = root
        self.ledger = ledger
        self.store = store

    def prepare(
        self, path: Path, known: SourceCheckpoint | None, *, looked_up: bool
    ) -> FileResult | Planned:
        """What to read of one source file and where to write it (the thread's writer is
        open when it exists), or the result when there is nothing to read."""
        source = str(path)
        try:
            link = self._link_on_the_way(path)
            stat = os.lstat(path)
        except FileNotFoundError:
            return FileResult(source, "missing", reason="the file is gone")
        if link is not None or S_ISLNK(stat.st_mode):
            where = "" if link is None else f" ({link} is one)"
            why = f"a symbolic link{where}: not followed, nothing behind it read"
            return FileResult(source, "symlink", reason=why)
        if not S_ISREG(stat.st_mode):  # a FIFO would block the import (and the watcher) forever
            return FileResult(source, "not-a-file", reason="not a regular file; not read")
        entry = known if looked_up else self.ledger.get(source)
        if entry is not None and (entry.size, entry.mtimeNs) == (stat.st_size, stat.st_mtime_ns):
            return FileResult(source, "unchanged", entry.threadId)
        if stat.st_size == 0:
            return FileResult(source, "empty", reason="empty file")
        if stat.st_size > FILE_BYTES:
            size, limit = stat.st_size / (1 << 30), FILE_BYTES >> 30
            why = f"{size:.1f} GiB, over the {limit} GiB a session file may be; not read"
            return FileResult(source, "too-large", reason=why)
        session_id = self.files.session_id(path)
        if session_id is None and stat.st_size > HEAD_BYTES:
            return self._not_a_session(path, stat.st_size)
        if session_id is None:
            return FileResult(source, "empty", reason="no session id (a plain name) in it yet")
        free = 1
        if entry is None:
            entry, free = self._recover(session_id, source)
        start, revision, status = self._plan(path, stat, session_id, entry, free)
        thread_id = thread_id_for(self.agent.id, session_id, revision)
        writer = None
        if start is not None:
            try:
                writer = self.store.open_writer(thread_id, durable=False)
            except ProtocolError as exc:
                if exc.kind is not ErrorKind.THREAD_BUSY:
                    raise
                return FileResult(source, "busy", thread_id, reason=exc.message)
        return Planned(
            source,
            stat.st_size,
            stat.st_mtime_ns,
            session_id,
            revision,
            thread_id,
            start,
            writer,
            status,
            self.files.note(path, session_id),
        )

    def _not_a_session(self, path: Path, size: int) -> FileResult:
        """A file too long to be a session not yet written whole (the agent puts its id
        first) with no id at its head: junk, reported as its one skipped line, with what
        it starts with, never dropped in silence as an empty session (a 20 MB line was)."""
        try:
            with open_source(str(path)) as handle:
                head = handle.read(HEAD_BYTES)
        except OSError as exc:
            return FileResult(str(path), "unreadable", reason=exc.strerror or str(exc))
        first = head.partition(b"\n")[0]
        skipped = skipped_line(1, 0, first, "no_session_id", self.store.redactor)
        why = f"no session id (a plain name) in its first {HEAD_BYTES} bytes, so no session: "
        why += f"{size:,} bytes not read"
        return FileResult(str(path), "empty", skipped=[skipped], reason=why)

    def _link_on_the_way(self, path: Path) -> Path | None:
        """The first folder between the root and `path` that is a link (a watcher may
        report a file through one), else None. The root itself is the user's choice."""
        if self.root not in path.parents:
            return None
        for folder in reversed(path.parents[: path.parents.index(self.root)]):
            mode = os.lstat(folder).st_mode
            if S_ISLNK(mode):
                return folder
            if not S_ISDIR(mode):
                return None  # then the file is not there: lstat says so
        return None

    def parse_start(self, planned: Planned) -> ParseStart:
        start = planned.start
        return ParseStart(
            path=planned.source,
            parser=self.agent.parser,
            offset=start.offset if start else 0,
            lines=start.lines if start else 0,
            line_start=start.lineStart if start else 0,
            tail_sha=start.tailSha if start else EMPTY_SHA,
            state=start.parser if start and start.parser else None,
            fallback_ts=_iso(planned.mtime_ns / 1e9),
            writing=planned.writer is not None,
            redactor=self.store.redactor,
            trailer=self.files.trailer(Path(planned.source)),
        )

    # --- planning ------------------------------------------------------------------------

    def _plan(
        self,
        path: Path,
        stat: os.stat_result,
        session_id: str,
        entry: SourceCheckpoint | None,
        free: int = 1,
    ) -> tuple[SourceCheckpoint | None, int, str]:
        """Where to start: (checkpoint to continue from, revision, status if written).
        Without an entry, `_recover` found none and `free`, the first free revision."""
        if entry is None:
            return None, free, "created"
        if not self.store.exists(entry.threadId):
            return None, entry.revision, "created"  # deleted by the user: back in full
        if self._appended(path, stat, entry):
            return entry, entry.revision, "updated"
        return None, self._free_revision(session_id, entry.revision + 1), "revision"

    def _appended(self, path: Path, stat: os.stat_result, entry: SourceCheckpoint) -> bool:
        """The file still starts with what was read: only appended to since."""
        if stat.st_size < entry.offset:
            return False
        with open_source(str(path)) as handle:
            if sha256_of(handle.read(min(entry.offset, HEAD_BYTES))) != entry.headSha:
                return False
            return range_sha(handle, entry.lineStart, entry.offset) == entry.tailSha

    def _free_revision(self, session_id: str, first: int) -> int:
        for revision in itertools.count(first):
            thread_id = thread_id_for(self.agent.id, session_id, revision)
            if not self.store.exists(thread_id):
                return revision
        raise AssertionError("unreachable")

    def _recover(self, session_id: str, source: str) -> tuple[SourceCheckpoint | None, int]:
        """The latest checkpoint of this file in its threads (the ledger lost it), and the
        session's first revision without a thread. A thread of this file without one (cut
        before its first checkpoint was written) is read into again from the start: the
        item ids keep what it has from being doubled."""
        found = None
        for revision in itertools.count(1):
            thread_id = thread_id_for(self.agent.id, session_id, revision)
            if not self.store.exists(thread_id):
                return found, revision
            items = self.store.read(thread_id)[0].items
            origin = items[0].get("origin") if items else None
            if not isinstance(origin, dict) or origin.get("path") != source:
                continue
            found = from_start(source, self.agent.id, session_id, revision, thread_id)
            for item in items:
                if item.get("type") == "import_checkpoint" and item.get("source") == source:
                    found = SourceCheckpoint.from_item(item) or found
        raise AssertionError("unreachable")


def from_start(
    source: str, agent: str, session_id: str, revision: int, thread_id: str
) -> SourceCheckpoint:
    """A checkpoint before the first byte: continuing from it reads the whole file."""
    return SourceCheckpoint(
        source, agent, session_id, revision, thread_id, 0, 0, 0, EMPTY_SHA, EMPTY_SHA, -1, -1, {}
    )


def unreadable(planned: Planned, exc: OSError) -> FileResult:
    why = "a symbolic link: not followed" if exc.errno == errno.ELOOP else exc.strerror
    return FileResult(
        planned.source, "unreadable", planned.thread_id, reason=f"not read: {why or exc}"
    )


def _iso(seconds: float) -> str:
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"
