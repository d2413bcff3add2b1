"""One thread's writer in the PostgreSQL store, and the advisory lock that makes it the only
one: a session-level lock held by this process's writer connection, released by PostgreSQL
when that connection ends (a `kill -9` included). Every append runs on that same
connection, so a lost connection can never leave a write going on without its lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import psycopg

from protocol.errors import ErrorKind, ProtocolError, thread_not_found
from restore.ids import sha256_of
from restore.stores.api import AppendResult, ThreadFile
from restore.stores.postgres.host import StoreHost
from restore.stores.postgres.rows import Repo, repo_binding
from restore.stores.records import STAGE_BYTES, Item, Staged, encode_line, stamp
from restore.stores.snapshots import Checkpoint
from restore.summary import ThreadSummary


class WriterHost(StoreHost, Protocol):
    """What a writer asks of its store beyond the parts' interface: its lock taken again,
    its lines written with the thread's row, its lock let go."""

    def writer_rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]: ...

    def relock(self, writer: PostgresWriter) -> None: ...

    def write(
        self,
        writer: PostgresWriter,
        stored: list[Item],
        lines: list[str],
        summary: ThreadSummary,
        repo: Repo,
        defer: bool,
        event: str = "updated",
        *,
        staged: Staged | None = None,
        unused: Sequence[str] = (),
    ) -> None: ...

    def stage_lines(self, lines: list[str]) -> list[str]: ...

    def release(self, writer: PostgresWriter) -> None: ...


def lock_key(thread_id: str) -> int:
    """The thread's advisory lock key: its uuid's first 64 bits, as a signed bigint."""
    return int.from_bytes(uuid.UUID(thread_id).bytes[:8], "big", signed=True)


def try_lock(conn: psycopg.Connection, thread_id: str) -> None:
    """Take the thread's advisory lock on the writer connection, or ThreadBusy; or, when
    this role may not see the thread (another role's, under `private`), the very
    ThreadNotFound a random id gets: a busy lock would confirm the thread exists and
    name its holder's machine (issue 34)."""
    taken = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(thread_id),))
    row = taken.fetchone()
    if row is None or not row[0]:
        visible = conn.execute(
            "SELECT 1 FROM sessiond_threads WHERE thread_id = %s", (thread_id,)
        ).fetchone()
        if visible is None:
            raise thread_not_found(thread_id)
        holder = _holder(conn, thread_id)
        raise ProtocolError(
            ErrorKind.THREAD_BUSY,
            f"thread is being written by {holder}",
            threadId=thread_id,
            holder=holder,
        )


def unlock(conn: psycopg.Connection, thread_id: str) -> None:
    conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(thread_id),))


def _holder(conn: psycopg.Connection, thread_id: str) -> str:
    """Who holds the lock now: the client named by its process, else that process."""
    key = lock_key(thread_id) & 0xFFFF_FFFF_FFFF_FFFF
    row = conn.execute(
        "SELECT h.holder, a.application_name FROM pg_locks l "
        "LEFT JOIN sessiond_holders h ON h.thread_id = %s AND h.backend_pid = l.pid "
        "LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.classid = %s AND l.objid = %s "
        "AND l.objsubid = 1 AND l.granted",
        (thread_id, key >> 32, key & 0xFFFF_FFFF),
    ).fetchone()
    if row is None:
        return "another process"
    holder, application = row
    return str(holder or application or "another process")


@dataclass(slots=True)
class Pending:
    """A thread with rows in the open transaction: its writer, the event to announce, and
    the listing row to write once, at the commit."""

    writer: PostgresWriter
    event: str
    row: tuple[Any, ...] | None


class PostgresWriter:
    """This process's exclusive handle on one thread: its advisory lock, its appends."""

    def __init__(
        self,
        store: WriterHost,
        thread_id: str,
        summary: ThreadSummary,
        repo: Repo,
        last_line: str | None,
        loaded: ThreadFile,
        base: Checkpoint | None,
        *,
        durable: bool = True,
    ) -> None:
        self._store = store
        self.thread_id = thread_id
        self.summary = summary
        self.repo = repo
        self.last_seq = summary.lastSeq
        self.last_line = last_line
        self.seq_of_id: dict[str, int] | None = None  # loaded by the first append needing it
        self.loaded: ThreadFile | None = loaded
        self.base = base
        self.base_rejected: str | None = None
        self.durable = durable
        """False: its rows stay in the open transaction until the store's `sync`."""
        self.unsynced = False
        self.stale = False
        """Rows of a failed transaction were counted: reload before the next append."""
        self.serial = store.db.serial
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def seq_of(self, item_id: str) -> int | None:
        return self._known_ids().get(str(item_id))

    def _known_ids(self) -> dict[str, int]:
        if self.seq_of_id is None:
            rows = self._store.writer_rows(
                "SELECT item_id, seq FROM sessiond_items WHERE thread_id = %s", (self.thread_id,)
            )
            self.seq_of_id = {item_id: seq for item_id, seq in rows}
        return self.seq_of_id

    def checkpoint(self) -> Checkpoint | None:
        """Where the thread stands: the last seq, verified later by that line's hash."""
        if self.last_line is None:
            return None
        return Checkpoint(
            offset=self.last_seq,
            seq=self.last_seq,
            lines=self.last_seq,
            line_start=self.last_seq,
            line_sha=sha256_of(self.last_line.encode()),
            summary=asdict(self.summary),
        )

    def needs_revalidation(self) -> bool:
        return not self._closed and (self.stale or self.serial != self._store.db.serial)

    def revalidate(self) -> bool:
        """After a failed transaction or a lost connection: hold the lock again and reload
        what the database holds. True when the state was reloaded (the caller rebuilds what
        it derived from appends); ThreadBusy when another process took the thread."""
        if not self.needs_revalidation():
            return False
        self._store.relock(self)
        return True

    def append(
        self,
        items: Iterable[Item],
        session_id: str,
        *,
        minted: bool = False,
        defer_sync: bool = False,
        keep_ts: bool = False,
        redacted: bool = False,
        staged: Staged | None = None,
    ) -> AppendResult:
        if self._closed:
            raise ProtocolError(ErrorKind.STALE_SESSION, "thread writer is closed")
        # A connection lost since the last append is made again first, so the check below
        # sees it: the lock went with the old one, and nothing is written without it.
        self._store.db.writer()
        if self.needs_revalidation():
            self._store.relock(self)
        known = {} if minted and self.seq_of_id is None else self._known_ids()
        items = list(items)
        placed = staged if staged is not None and staged.fits(self.last_seq, items, known) else None
        if placed is not None:
            stamped, lines = placed.stamped, placed.lines
        else:
            stamped = stamp(
                items,
                session_id,
                self.last_seq,
                known,
                keep_ts=keep_ts,
                redactor=None if redacted else self._store.redactor,
            )
            lines = [encode_line(line)[:-1].decode() for line in stamped.stored]
        if stamped.stored:
            repo = self.repo
            for line in stamped.stored:
                repo = repo_binding(line) or repo
            summary = ThreadSummary(**asdict(self.summary))
            for line in stamped.stored:
                summary.apply(line)
            self._store.write(
                self,
                stamped.stored,
                lines,
                summary,
                repo,
                defer_sync,
                staged=placed,
                unused=staged.rows if staged is not None and placed is None else (),
            )
            # Counted only once written (and, without defer_sync, committed).
            self.summary, self.repo, self.last_seq = summary, repo, stamped.last_seq
            self.last_line = lines[-1]
            known.update(stamped.new_ids)
        return AppendResult(
            min(stamped.seqs, default=None),
            max(stamped.seqs, default=None),
            stamped.duplicates,
            stamped.stored,
        )

    def stage(self, items: list[Item], session_id: str, *, redacted: bool) -> Staged | None:
        """Off the store thread (a record's redaction thread): a large record's lines sent
        ahead on the store's staging connection, with their search columns, so that the
        append moves them without this connection carrying their bytes (migration 010).
        Reads this writer's state without changing it: `append` places the lines only if
        the thread still ends where they were stamped (`Staged.fits`). None: too small to
        be worth it, a duplicate among them, or staging failed (the append then writes
        them itself, and says what went wrong if it goes wrong again)."""
        if self._closed or self.needs_revalidation():
            return None
        base = self.last_seq
        stamped = stamp(
            items,
            session_id,
            base,
            self.seq_of_id or {},
            redactor=None if redacted else self._store.redactor,
        )
        if stamped.duplicates or not stamped.stored:
            return None
        lines = [encode_line(line)[:-1].decode() for line in stamped.stored]
        if sum(map(len, lines)) < STAGE_BYTES:
            return None
        try:
            rows = self._store.stage_lines(lines)
        except ProtocolError:
            return None
        return Staged(base, stamped, lines, rows)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._store.release(self)
