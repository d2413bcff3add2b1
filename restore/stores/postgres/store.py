"""The PostgreSQL store: threads shared by every sessiond attached to one database.

The embedded store's promises, by PostgreSQL's own means:
- an item is acknowledged after the transaction holding it commits; under group commit
  every record of one store-worker batch shares one COMMIT (one WAL flush);
- `seq` per thread and item-id idempotency are constraints (primary key, unique);
- one writer per thread across machines: a session-level advisory lock held by this
  process's writer connection, released by PostgreSQL when that connection ends (a
  `kill -9` included). Every append runs on that same connection, so a lost connection
  can never leave a write going on without its lock;
- snapshots and blobs are rows; the listing row is updated in the same transaction as the
  items it summarizes, so a listing on another machine is never ahead of or behind them.

Faults: a failed or lost transaction is never acknowledged (StorageError, `retryable`),
and every writer that had rows in it is marked stale: before its next append it takes its
lock again (ThreadBusy if another machine took the thread meanwhile) and reloads what the
database really holds. Connections (connection.py) are re-made with backoff, so a restarted
server is picked up by itself; no message or log line ever contains the password.

psycopg is imported only in this package, and this package only when a `postgresql://`
store is configured: the embedded store never imports it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import orjson
import psycopg

import restore.stores.api as api
from protocol.errors import ErrorKind, ProtocolError, thread_not_found
from restore.ids import is_sha256, sha256_of, validate_thread_id
from restore.keys import lock_name
from restore.redaction.settings import RedactorSlot
from restore.stores.api import (
    Announce,
    DoctorReport,
    Durability,
    RedactionReport,
    StepProgress,
    ThreadFile,
)
from restore.stores.cursors import summary_of
from restore.stores.postgres import staging
from restore.stores.postgres.channels import NOTIFY
from restore.stores.postgres.connection import Connections, storage_error
from restore.stores.postgres.index import SharedIndex
from restore.stores.postgres.listener import Listener
from restore.stores.postgres.pages import SharedPages
from restore.stores.postgres.rows import (
    ROW_COLUMNS,
    UPDATE_ROW,
    Repo,
    is_archived,
    repo_binding,
    row_values,
    summaries_of,
)
from restore.stores.postgres.search import SharedSearch
from restore.stores.postgres.staging import Stager
from restore.stores.postgres.writer import Pending, PostgresWriter, try_lock, unlock
from restore.stores.records import Item, Staged, missing_records
from restore.stores.snapshots import Checkpoint, Snapshot, decode_snapshot, encode_snapshot
from restore.summary import ThreadSummary

logger = logging.getLogger("sessiond.postgres")

KEY_LOCK_SPACE = 0x5E55_1D0C
"""The first of the two int4 keys of a session key's advisory lock: the two-key space is
not the one-key space threads and migrations lock in, and this number keeps it apart from
any other application's two-key locks on the database."""
KEY_WAIT_SECONDS = 10.0


def key_lock(key: str) -> tuple[int, int]:
    """A session key's advisory lock: (KEY_LOCK_SPACE, 32 bits of its sha256). Two keys
    sharing the bits only wait for each other."""
    digest = bytes.fromhex(lock_name(key))
    return KEY_LOCK_SPACE, int.from_bytes(digest[:4], "big", signed=True)


if TYPE_CHECKING:
    from restore.redaction.engine import Redactor


class PostgresStore:
    """Threads in one PostgreSQL database; one instance per sessiond process.

    The writer connection (locks, appends, commits) is used by the store thread only;
    reads (pages, listings, snapshots) go through a pool and may run on any thread."""

    redactor = RedactorSlot()

    def __init__(self, url: str, durability: Durability = Durability.FSYNC) -> None:
        self.durability = durability
        self.redactor = None
        self.db = Connections(url, durability)
        self.where = self.db.where
        self.token = uuid.uuid4().hex  # this process, in NOTIFY payloads
        self._pending: dict[str, Pending] = {}
        """Threads with rows in the open transaction, by id."""
        self._lost: ProtocolError | None = None  # deferred rows lost before their commit
        self._writers: dict[str, PostgresWriter] = {}  # open in this process
        self._watcher: Listener | None = None
        self.index = SharedIndex(self)
        self.pages = SharedPages(self)
        self.search = SharedSearch(self)
        self._stager = Stager(self.db)

    @property
    def read_only(self) -> bool:
        return False  # a role without write grants is told so by its first write

    @property
    def local(self) -> None:
        return None  # other processes' changes come by LISTEN/NOTIFY (`watch`)

    # --- connections ---------------------------------------------------------------------

    def stage_lines(self, lines: list[str]) -> list[str]:
        """Off the store thread: lines written ahead of their append (staging.py)."""
        return self._stager.stage(lines)

    def writer_rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        conn = self.db.writer()
        try:
            return conn.execute(sql, params).fetchall()
        except psycopg.Error as exc:
            raise self._fail(exc) from None

    # --- transactions --------------------------------------------------------------------

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
    ) -> None:
        """Insert the rows and the thread's new listing row; commit unless deferred.
        `staged`: the lines were written ahead (staging.py), moved here, not sent again;
        `unused`: rows written ahead for lines written here after all, deleted."""
        conn = self.db.writer()
        try:
            if not self.db.in_tx:
                conn.execute("BEGIN")
                self.db.in_tx = True
            with conn.cursor() as cur:
                if staged is not None:
                    for line, row in zip(stored, staged.rows, strict=True):
                        cur.execute(staging.PLACE, (writer.thread_id, line["seq"], line["id"], row))
                        if cur.rowcount != 1:  # deleted under us: the append fails whole
                            raise psycopg.DataError(f"staged line {line['id']!r} is gone")
                    unused = staged.rows
                else:
                    cur.executemany(
                        "INSERT INTO sessiond_items (thread_id, seq, item_id, line) "
                        "VALUES (%s, %s, %s, %s)",
                        [
                            (writer.thread_id, line["seq"], line["id"], text)
                            for line, text in zip(stored, lines, strict=True)
                        ],
                    )
                if unused:
                    cur.execute(staging.FORGET, (list(unused),))
            previous = self._pending.get(writer.thread_id)
            self._pending[writer.thread_id] = Pending(
                writer, previous.event if previous else event, row_values(summary, repo)
            )
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        if (defer and self.durability is Durability.GROUP) or not writer.durable:
            writer.unsynced = True  # committed by the next begin_commit (or sync)
        else:
            self._commit()

    def _commit(self) -> None:
        """Commit what is pending, with one notification per changed thread."""
        if not self.db.in_tx:
            return
        conn = self.db.writer()
        try:
            with conn.cursor() as cur:
                rows = [p.row for p in self._pending.values() if p.row is not None]
                if rows:
                    cur.executemany(UPDATE_ROW, rows)
                for thread_id, pending in self._pending.items():
                    cur.execute(NOTIFY, (self._payload(pending.event, thread_id), self.db.channel))
                cur.execute("COMMIT")
                committed = cur.statusmessage == "COMMIT"
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        self.db.in_tx = False
        if not committed:
            raise self._fail(psycopg.OperationalError("the transaction was rolled back"))
        for pending in self._pending.values():
            pending.writer.unsynced = False
        self._pending.clear()

    def _fail(self, exc: BaseException) -> ProtocolError:
        """A failed statement or commit: nothing pending was committed. Every writer with
        rows in it reloads before its next append; deferred records are failed at the
        next `begin_commit` (never acknowledged)."""
        error = storage_error(exc, self.where, self.db.redact)
        deferred = any(pending.writer.unsynced for pending in self._pending.values())
        for pending in self._pending.values():
            pending.writer.stale = True
            pending.writer.unsynced = False
        self._pending.clear()
        if deferred:
            self._lost = error
        conn = self.db.usable()
        if conn is not None:
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error:
                self.db.drop()
        else:
            self.db.drop()
        self.db.in_tx = False
        logger.info("%s", error.message)
        return error

    def begin_commit(self) -> None:
        """Group commit: every record appended since the last commit shares this one.

        Runs on the store thread at the end of a worker batch; raises (and nothing of the
        batch is acknowledged) when the commit, or an earlier statement, failed. Nothing is
        left for another thread: the COMMIT was the sync."""
        if self._lost is not None:
            lost, self._lost = self._lost, None
            raise lost
        try:
            self._commit()
        except ProtocolError:
            self._lost = None  # this very failure is what the batch is answered
            raise

    def sync(self) -> None:
        """What writers opened with `durable=False` wrote, committed now (one transaction
        for the batch, like a group commit)."""
        self.begin_commit()

    def flush(self) -> None:
        """Nothing held back: listing rows are written in their items' transaction."""

    def idle(self) -> None:
        """Nothing to do: the database server checkpoints its own WAL."""

    # --- locks ---------------------------------------------------------------------------

    def name_holder(self, thread_id: str, holder: str) -> None:
        """Name the client holding a thread for other machines' ThreadBusy errors (a row of
        this role's: migration 005 holds the table to the threads' policies)."""
        thread_id = validate_thread_id(thread_id)
        conn = self.db.writer()
        try:
            conn.execute(
                "INSERT INTO sessiond_holders (thread_id, holder, backend_pid) "
                "VALUES (%s, %s, pg_backend_pid()) ON CONFLICT (thread_id, owner_role) "
                "DO UPDATE SET holder = excluded.holder, backend_pid = excluded.backend_pid",
                (thread_id, f"{holder} on {self.db.host}"),
            )
        except psycopg.Error as exc:
            raise self._fail(exc) from None

    @contextmanager
    def hold_key(self, key: str) -> Iterator[None]:
        """The key's transaction-level advisory lock, on the writer connection: every
        sessiond on the database (every machine) decides about the key one at a time. It
        goes with the transaction holding it: the first commit inside (a new thread is
        committed with its listing row, so the next holder finds it), else the commit
        when this is left."""
        conn = self.db.writer()
        try:
            if not self.db.in_tx:
                conn.execute("BEGIN")
                self.db.in_tx = True
            conn.execute(f"SET LOCAL lock_timeout = '{int(KEY_WAIT_SECONDS * 1000)}ms'")
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", key_lock(key))
        except psycopg.Error as exc:
            if getattr(exc, "sqlstate", None) == "55P03":  # lock_not_available
                self._fail(exc)
                raise ProtocolError(
                    ErrorKind.THREAD_BUSY,
                    f"the session key is being continued by another sessiond "
                    f"(over {KEY_WAIT_SECONDS:g} s)",
                    sessionKey=key,
                    holder="another process",
                ) from None
            raise self._fail(exc) from None
        try:
            yield
        except BaseException:
            with suppress(ProtocolError):
                self._commit()
            raise
        self._commit()

    # --- opening ---------------------------------------------------------------------------

    def create(
        self,
        thread_id: str,
        session_id: str,
        meta: Item,
        *,
        items: Iterable[Item] = (),
        keep_ts: bool = False,
        durable: bool = True,
        redacted: bool = False,
    ) -> PostgresWriter:
        """A new thread, committed at once with its `session_meta` and `items` (and
        announced); with `durable=False` at the next `sync`."""
        thread_id = validate_thread_id(thread_id)
        conn = self._lock(thread_id)
        summary = ThreadSummary(threadId=thread_id)
        writer = PostgresWriter(
            self, thread_id, summary, (None, None), None, ThreadFile(), None, durable=durable
        )
        self._writers[thread_id] = writer
        try:
            try:
                if not self.db.in_tx:
                    conn.execute("BEGIN")
                    self.db.in_tx = True
                inserted = conn.execute(
                    "INSERT INTO sessiond_threads (thread_id) VALUES (%s) "
                    "ON CONFLICT DO NOTHING RETURNING 1",
                    (thread_id,),
                ).fetchone()
            except psycopg.Error as exc:
                raise self._fail(exc) from None
            if inserted is None:
                raise ProtocolError(
                    ErrorKind.INVALID_ID, "thread id already exists", threadId=thread_id
                )
            self._pending[thread_id] = Pending(writer, "started", None)
            stored = writer.append(
                [meta, *items], session_id, keep_ts=keep_ts, redacted=redacted
            ).stored
            writer.loaded = ThreadFile(items=stored)
        except BaseException:
            writer.close()
            raise
        return writer

    def open_writer(
        self,
        thread_id: str,
        base: Checkpoint | None = None,
        *,
        durable: bool = True,
        derived: bool = False,
    ) -> PostgresWriter:
        """Take the thread's lock (ThreadBusy if held anywhere) and read it: the items
        after `base` once its last line is verified, else all of them. `derived` changes
        nothing: an append is a transaction, and one left uncommitted would be lost."""
        thread_id = validate_thread_id(thread_id)
        conn = self._lock(thread_id)
        try:
            row, repo = self._row(conn, thread_id)
            rejected = None
            if base is not None:
                rejected = self._verify(conn, thread_id, base, row.lastSeq)
                if rejected is not None:
                    base = None
            start = base.seq if base is not None else 0
            lines = conn.execute(
                "SELECT line FROM sessiond_items WHERE thread_id = %s AND seq > %s ORDER BY seq",
                (thread_id, start),
            ).fetchall()
            contents = ThreadFile(items=[orjson.loads(line) for (line,) in lines])
            last_line = lines[-1][0] if lines else self._line_at(conn, thread_id, row.lastSeq)
        except psycopg.Error as exc:
            self._unlock_quietly(thread_id)
            raise self._fail(exc) from None
        except BaseException:
            self._unlock_quietly(thread_id)
            raise
        writer = PostgresWriter(
            self, thread_id, row, repo, last_line, contents, base, durable=durable
        )
        writer.base_rejected = rejected
        self._writers[thread_id] = writer
        return writer

    def _row(self, conn: psycopg.Connection, thread_id: str) -> tuple[ThreadSummary, Repo]:
        found = conn.execute(
            f"SELECT {ROW_COLUMNS}, repo_id, repo_path FROM sessiond_threads WHERE thread_id = %s",
            (thread_id,),
        ).fetchone()
        if found is None:
            raise thread_not_found(thread_id)
        return summary_of(found[:-2]), (found[-2], found[-1])

    @staticmethod
    def _line_at(conn: psycopg.Connection, thread_id: str, seq: int) -> str | None:
        found = conn.execute(
            "SELECT line FROM sessiond_items WHERE thread_id = %s AND seq = %s", (thread_id, seq)
        ).fetchone()
        return None if found is None else str(found[0])

    def _verify(
        self, conn: psycopg.Connection, thread_id: str, base: Checkpoint, last_seq: int
    ) -> str | None:
        """Why a snapshot's checkpoint does not describe the thread (None when it does)."""
        if base.seq > last_seq:
            return "stale: the thread is shorter than the snapshot"
        line = self._line_at(conn, thread_id, base.seq)
        if line is None or sha256_of(line.encode()) != base.line_sha:
            return "stale: the thread changed before the snapshot's seq"
        return None

    def relock(self, writer: PostgresWriter) -> None:
        """Revalidate a writer: lock again on a new connection, reload from the rows.

        What is pending commits first: listing rows are written at the commit, so read
        inside an open transaction they would be behind its items (and a seq reused)."""
        self._commit()
        conn = self.db.writer()
        try:
            if writer.serial != self.db.serial:  # the old connection took the lock with it
                try:
                    try_lock(conn, writer.thread_id)
                except ProtocolError:
                    writer._closed = True
                    self._writers.pop(writer.thread_id, None)
                    raise
                writer.serial = self.db.serial
            row, repo = self._row(conn, writer.thread_id)
            last_line = self._line_at(conn, writer.thread_id, row.lastSeq)
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        writer.summary, writer.repo, writer.last_seq = row, repo, row.lastSeq
        writer.last_line = last_line
        writer.seq_of_id = None
        writer.stale = False

    def release(self, writer: PostgresWriter) -> None:
        """A writer closes: its pending rows commit first, then its lock goes."""
        self._writers.pop(writer.thread_id, None)
        if writer.serial != self.db.serial:
            return  # that connection, and the lock with it, are gone already
        if writer.thread_id in self._pending:
            with suppress(ProtocolError):  # failed: its records are answered StorageError
                self._commit()
        self._unlock_quietly(writer.thread_id)

    def _unlock_quietly(self, thread_id: str) -> None:
        conn = self.db.usable()
        if conn is None:
            return
        try:
            unlock(conn, thread_id)
        except psycopg.Error as exc:
            self._fail(exc)

    # --- reading ---------------------------------------------------------------------------

    def read(self, thread_id: str) -> tuple[ThreadFile, bool]:
        """Every item of a thread (committed ones: readers never see a pending commit)."""
        thread_id = validate_thread_id(thread_id)
        with self.db.read() as conn:
            archived = is_archived(conn, thread_id)
            lines = conn.execute(
                "SELECT line FROM sessiond_items WHERE thread_id = %s ORDER BY seq", (thread_id,)
            ).fetchall()
        return ThreadFile(items=[orjson.loads(line) for (line,) in lines]), archived

    def read_origin(self, thread_id: str) -> dict[str, Any] | None:
        """The `origin` of the thread's first `session_meta`, kept in its listing row."""
        found = self.index.get(validate_thread_id(thread_id))
        if found is None:
            raise thread_not_found(thread_id)
        return found.origin

    def transcript_path(self, thread_id: str) -> str | None:
        """No file to point a hook at: the thread is rows (`sessiond show ID` prints it)."""
        return None

    def repo_of(self, folder: str) -> tuple[str, str] | None:
        return self.index.repo_of(folder)

    def exists(self, thread_id: str) -> bool:
        with self.db.read() as conn:
            return (
                conn.execute(
                    "SELECT 1 FROM sessiond_threads WHERE thread_id = %s",
                    (validate_thread_id(thread_id),),
                ).fetchone()
                is not None
            )

    def thread_ids(self) -> list[str]:
        with self.db.read() as conn:
            rows = conn.execute("SELECT thread_id::text FROM sessiond_threads").fetchall()
        return [row[0] for row in rows]

    # --- archive and delete -----------------------------------------------------------------

    def _lock(self, thread_id: str) -> psycopg.Connection:
        """The writer connection, holding the thread's lock (ThreadBusy when a writer
        holds it, anywhere)."""
        conn = self.db.writer()
        try:
            try_lock(conn, thread_id)
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        return conn

    @contextmanager
    def _locked(self, thread_id: str) -> Iterator[psycopg.Connection]:
        """The thread's lock for one short change (ThreadBusy when a writer holds it)."""
        conn = self._lock(thread_id)
        try:
            yield conn
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        finally:
            self._unlock_quietly(thread_id)

    def set_archived(self, thread_id: str, archived: bool) -> ThreadSummary:
        thread_id = validate_thread_id(thread_id)
        with self._locked(thread_id) as conn:
            self._commit()  # nothing of another thread's batch rides in this change
            found = conn.execute(
                f"UPDATE sessiond_threads SET archived = %s WHERE thread_id = %s "
                f"RETURNING {ROW_COLUMNS}",
                (archived, thread_id),
            ).fetchone()
            if found is None:
                raise self._not_changed(conn, thread_id)
            self._notify(conn, "updated", thread_id)
        return summary_of(found)

    def delete(self, thread_id: str) -> None:
        """The thread, its items, snapshot and holder row, in one statement."""
        thread_id = validate_thread_id(thread_id)
        with self._locked(thread_id) as conn:
            self._commit()
            with conn.transaction():
                gone = conn.execute(
                    "DELETE FROM sessiond_threads WHERE thread_id = %s RETURNING 1", (thread_id,)
                ).fetchone()
                if gone is None:
                    raise self._not_changed(conn, thread_id)
                conn.execute("DELETE FROM sessiond_holders WHERE thread_id = %s", (thread_id,))
                self._notify(conn, "deleted", thread_id)

    @staticmethod
    def _not_changed(conn: psycopg.Connection, thread_id: str) -> ProtocolError:
        """Why an UPDATE or DELETE of a thread's row touched nothing: there is no such
        thread this role may see, or row-level security let this role see it but not
        change it (only its owner may: migrations/002_*.sql)."""
        row = conn.execute(
            "SELECT owner_role FROM sessiond_threads WHERE thread_id = %s", (thread_id,)
        ).fetchone()
        if row is None:
            return thread_not_found(thread_id)
        return ProtocolError(
            ErrorKind.UNAUTHORIZED,
            f"only the role that created this thread ({row[0]}) may change it",
            threadId=thread_id,
        )

    def _notify(self, conn: psycopg.Connection, event: str, thread_id: str) -> None:
        conn.execute(NOTIFY, (self._payload(event, thread_id), self.db.channel))

    def _payload(self, event: str, thread_id: str) -> str:
        """What every sessiond on the channel hears: under `private`, only this role's
        (channels.py); the token lets this process skip its own."""
        return orjson.dumps({"e": event, "t": thread_id, "o": self.token}).decode()

    # --- snapshots and blobs ----------------------------------------------------------------

    def load_snapshot(self, thread_id: str) -> tuple[Snapshot | None, str | None]:
        try:
            with self.db.read() as conn:
                row = conn.execute(
                    "SELECT body FROM sessiond_snapshots WHERE thread_id = %s", (thread_id,)
                ).fetchone()
        except ProtocolError as exc:  # derived data: its absence costs a replay, not a resume
            return None, f"unreadable: {exc.message}"
        if row is None:
            return None, "missing"
        return decode_snapshot(thread_id, bytes(row[0]))

    def save_snapshot(self, thread_id: str, snapshot: Snapshot) -> None:
        with self.db.read() as conn:
            conn.execute(
                "INSERT INTO sessiond_snapshots (thread_id, body) VALUES (%s, %s) "
                "ON CONFLICT (thread_id) DO UPDATE SET body = excluded.body",
                (thread_id, encode_snapshot(thread_id, snapshot)),
            )

    def put_blob(self, data: bytes) -> str:
        if self.redactor is not None:
            data = self.redactor.data(data)
        sha = sha256_of(data)
        with self.db.read() as conn:
            conn.execute(
                "INSERT INTO sessiond_blobs (sha256, data) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (sha, data),
            )
        return sha

    def blob_shas(self) -> list[str]:
        with self.db.read() as conn:
            rows = conn.execute("SELECT DISTINCT sha256 FROM sessiond_blobs ORDER BY 1")
            return [row[0] for row in rows]

    def get_blob(self, sha: str) -> bytes | None:
        if not is_sha256(sha):
            return None
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT data FROM sessiond_blobs WHERE sha256 = %s", (sha,)
            ).fetchone()
        return None if row is None else bytes(row[0])

    def blob_size(self, sha: str) -> int | None:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT octet_length(data) FROM sessiond_blobs WHERE sha256 = %s", (sha,)
            ).fetchone()
        return None if row is None else int(row[0])

    # --- copying (sessiond migrate) ----------------------------------------------------------

    def import_thread(self, thread_id: str, items: list[Item], archived: bool) -> int:
        """Copy a thread's records as they are (seq, ts, ids kept); idempotent: items
        already present are skipped by their id. Returns how many were added. Records
        at seqs the thread already holds under other ids (diverged copies) violate the
        primary key: nothing of the thread is written (InvalidParams)."""
        thread_id = validate_thread_id(thread_id)
        if self.redactor is not None:
            items = [self.redactor.item(item) for item in items]
        with self._locked(thread_id) as conn:
            self._commit()
            with conn.transaction():
                conn.execute(
                    "INSERT INTO sessiond_threads (thread_id, archived) VALUES (%s, %s) "
                    "ON CONFLICT DO NOTHING",
                    (thread_id, archived),
                )
                present = dict(
                    conn.execute(
                        "SELECT item_id, seq FROM sessiond_items WHERE thread_id = %s",
                        (thread_id,),
                    ).fetchall()
                )
                new = missing_records(thread_id, items, present)
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO sessiond_items (thread_id, seq, item_id, line) "
                        "VALUES (%s, %s, %s, %s)",
                        [
                            (thread_id, i["seq"], str(i["id"]), orjson.dumps(i).decode())
                            for i in new
                        ],
                    )
                self._row_from_lines(conn, thread_id, archived)
                conn.execute(
                    "UPDATE sessiond_threads SET archived = %s WHERE thread_id = %s",
                    (archived, thread_id),
                )
                self._notify(conn, "updated", thread_id)
        return len(new)

    def _row_from_lines(self, conn: psycopg.Connection, thread_id: str, archived: bool) -> None:
        """The thread's listing row folded again from every line it holds."""
        lines = conn.execute(
            "SELECT line FROM sessiond_items WHERE thread_id = %s ORDER BY seq", (thread_id,)
        ).fetchall()
        summary = ThreadSummary(threadId=thread_id, archived=archived)
        repo: Repo = (None, None)
        for (line,) in lines:
            item = orjson.loads(line)
            summary.apply(item)
            repo = repo_binding(item) or repo
        conn.execute(UPDATE_ROW, row_values(summary, repo))

    def redact_existing(
        self, progress: StepProgress | None = None, *, apply: bool = False
    ) -> RedactionReport:
        """Rows updated in place, each thread in one transaction under its lock, its
        listing row folded again and its snapshot dropped; blobs that held a secret
        replaced. A row-level security policy that hides or guards another role's rows
        is the database's word: those threads are named in `failed`, not forced."""
        redactor = self.redactor
        if redactor is None:
            raise ProtocolError(ErrorKind.INVALID_PARAMS, "redaction is off", field="redaction")
        report = RedactionReport(applied=apply)
        redactor.counts.clear()
        thread_ids = self.thread_ids()
        for done, thread_id in enumerate(thread_ids):
            if progress is not None:
                progress("threads", done, len(thread_ids))
            report.threads += 1
            try:
                with self._locked(thread_id) as conn:
                    self._commit()
                    with conn.transaction():
                        self._redact_thread(conn, redactor, thread_id, report, apply)
            except ProtocolError as exc:
                if exc.kind is not ErrorKind.THREAD_BUSY:
                    raise
                report.busy.append(thread_id)
        if progress is not None:
            progress("threads", len(thread_ids), len(thread_ids))
        with self.db.read() as conn, conn.transaction():
            rows = conn.execute("SELECT sha256, owner_role, data FROM sessiond_blobs").fetchall()
            for done, (sha, owner, data) in enumerate(rows):
                if progress is not None:
                    progress("blobs", done, len(rows))
                new = redactor.data(bytes(data))
                if new == bytes(data):
                    continue
                report.blobs += 1
                if apply:
                    conn.execute(
                        "INSERT INTO sessiond_blobs (sha256, data) VALUES (%s, %s) "
                        "ON CONFLICT DO NOTHING",
                        (sha256_of(new), new),
                    )
                    conn.execute(
                        "DELETE FROM sessiond_blobs WHERE sha256 = %s AND owner_role = %s",
                        (sha, owner),
                    )
        report.counts = dict(redactor.counts)
        return report

    def _redact_thread(
        self,
        conn: psycopg.Connection,
        redactor: Redactor,
        thread_id: str,
        report: RedactionReport,
        apply: bool,
    ) -> None:
        rows = conn.execute(
            "SELECT seq, line FROM sessiond_items WHERE thread_id = %s ORDER BY seq",
            (thread_id,),
        ).fetchall()
        changed = []
        for seq, line in rows:
            item = orjson.loads(line)
            new = redactor.item(item)
            if new is not item:
                changed.append((orjson.dumps(new).decode(), thread_id, seq))
        if not changed:
            return
        report.changed.append(thread_id)
        if not apply:
            return
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE sessiond_items SET line = %s WHERE thread_id = %s AND seq = %s",
                changed,
            )
            if cur.rowcount < len(changed):
                report.changed.pop()
                report.failed.append(f"{thread_id}: another role's rows (row-level security)")
                raise_rollback = True
            else:
                raise_rollback = False
        if raise_rollback:
            raise psycopg.Rollback()
        archived = conn.execute(
            "SELECT archived FROM sessiond_threads WHERE thread_id = %s", (thread_id,)
        ).fetchone()
        self._row_from_lines(conn, thread_id, bool(archived and archived[0]))
        conn.execute("DELETE FROM sessiond_snapshots WHERE thread_id = %s", (thread_id,))
        self._notify(conn, "updated", thread_id)

    # --- live changes from other processes ----------------------------------------------------

    def watch(self, announce: Announce) -> None:
        """Call `announce` (on a background thread) for every thread another sessiond
        started, changed or deleted in this database. Started by the first request that
        needed the store, never at server startup."""
        if self._watcher is None:
            self._watcher = Listener(self, announce)
            self._watcher.start()

    def check(
        self,
        progress: StepProgress | None = None,
        *,
        repair: bool = False,
        rebuild_index: bool = False,
    ) -> DoctorReport:
        """A database checks itself (constraints, WAL): reaching it brings its schema up to
        date; its threads are counted. It keeps no derived index to rebuild."""
        return DoctorReport(index_action="schema up to date", indexed=self.index.count())

    def close(self) -> None:
        """Commit what is pending, release every lock, stop watching."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        with suppress(ProtocolError):
            self._commit()
        self._stager.close()
        self.db.close()  # the writer connection's end releases every advisory lock

    # --- for the modules beside this one ----------------------------------------------------

    def summaries(self, thread_ids: Sequence[str]) -> list[ThreadSummary]:
        with self.db.read() as conn:
            return summaries_of(conn, thread_ids)


def _conforms(store: PostgresStore, writer: PostgresWriter) -> tuple[api.Store, api.Writer]:
    """The type checker's proof that this backend is the interface (never called)."""
    return store, writer
