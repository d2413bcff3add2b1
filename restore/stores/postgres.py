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
database really holds. Connections are re-made with backoff, so a restarted server is
picked up by itself. Credentials come from the URL, a service file or PGPASSFILE (libpq
reads them); no message or log line ever contains the password.

psycopg is imported here only, and this module only when a `postgresql://` store is
configured: the embedded store never imports it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import psycopg
from psycopg import conninfo
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from protocol.errors import ErrorKind, ProtocolError, thread_not_found
from restore.index import MAX_LIMIT, decode_cursor, encode_cursor
from restore.jsonl import ThreadFile, encode_line
from restore.pages import ANSWER_OVERHEAD, Page, too_large
from restore.paths import validate_thread_id
from restore.snapshots import Snapshot
from restore.snapshots import decode as decode_snapshot
from restore.snapshots import encode as encode_snapshot
from restore.store import AppendResult, Checkpoint, Durability
from restore.stores import schema
from restore.stores.base import Announce, stamp
from restore.summary import ThreadSummary

logger = logging.getLogger("sessiond.postgres")

CHANNEL = "sessiond"
CONNECT_TIMEOUT = 5  # seconds, unless the URL says otherwise
POOL_WAIT = 5.0  # seconds a read waits for a pooled connection
BACKOFF_FIRST, BACKOFF_MAX = 0.1, 2.0

# ThreadSummary fields in the order rows are selected (see _summary_of).
_ROW_COLUMNS = (
    "thread_id::text, title, preview, cwd, workspace_folder, branch, head_sha, created_at, "
    "updated_at, item_count, archived, forked_from, cost_usd, origin, "
    "parent_thread_id::text, parent_operation_id, last_seq, latest_session_id"
)
_ROW_FIELDS = (
    "threadId", "title", "preview", "cwd", "workspaceFolder", "branch", "headSha",
    "createdAt", "updatedAt", "itemCount", "archived", "forkedFrom", "costUsd", "origin",
    "parentThreadId", "parentOperationId", "lastSeq", "latestSessionId",
)  # fmt: skip
# A listed row's children (what `thread/list {parentThreadId}` would list).
_CHILD_COUNT = (
    "(SELECT count(*) FROM sessiond_threads AS child WHERE child.parent_thread_id = "
    "sessiond_threads.thread_id AND NOT child.archived)"
)
_UPDATE_ROW = (
    "UPDATE sessiond_threads SET title = %s, preview = %s, cwd = %s, workspace_folder = %s, "
    "branch = %s, head_sha = %s, repo_id = %s, repo_path = %s, created_at = %s, "
    "updated_at = %s, item_count = %s, forked_from = %s, cost_usd = %s, origin = %s, "
    "parent_thread_id = %s, parent_operation_id = %s, last_seq = %s, latest_session_id = %s "
    "WHERE thread_id = %s"
)


def _summary_of(row: tuple[Any, ...]) -> ThreadSummary:
    """A row of `_ROW_COLUMNS`, then the child count when the query selected it."""
    fields = dict(zip(_ROW_FIELDS, row[: len(_ROW_FIELDS)], strict=True))
    fields["updatedAt"] = fields["updatedAt"] or None
    if len(row) > len(_ROW_FIELDS):
        fields["childCount"] = row[len(_ROW_FIELDS)]
    return ThreadSummary(**fields)


def _row_values(summary: ThreadSummary, repo: tuple[str | None, str | None]) -> tuple[Any, ...]:
    return (
        summary.title, summary.preview, summary.cwd, summary.workspaceFolder, summary.branch,
        summary.headSha, repo[0], repo[1], summary.createdAt, summary.updatedAt or "",
        summary.itemCount, Jsonb(summary.forkedFrom) if summary.forkedFrom else None,
        summary.costUsd, Jsonb(summary.origin) if summary.origin else None,
        _uuid_or_none(summary.parentThreadId), summary.parentOperationId, summary.lastSeq,
        summary.latestSessionId, summary.threadId,
    )  # fmt: skip


def _uuid_or_none(value: str | None) -> str | None:
    """A parent id as the uuid column takes it; anything else (not a thread id) is none."""
    if value is None:
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def repo_binding(item: dict[str, Any]) -> tuple[str | None, str | None] | None:
    """(repoId, cwd relative to the repo root) from a session_meta; None for other items."""
    if item.get("type") != "session_meta":
        return None
    repo_id, root, cwd = item.get("repoId"), item.get("repoRoot"), item.get("cwd")
    if not (repo_id and isinstance(root, str) and isinstance(cwd, str)):
        return (repo_id or None, None)
    relative = os.path.relpath(cwd, root)
    return (repo_id, "" if relative == "." else None if relative.startswith("..") else relative)


def lock_key(thread_id: str) -> int:
    """The thread's advisory lock key: its uuid's first 64 bits, as a signed bigint."""
    return int.from_bytes(uuid.UUID(thread_id).bytes[:8], "big", signed=True)


def describe(url: str) -> str:
    """Where a URL points, without its credentials: for messages and logs."""
    try:
        params = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "PostgreSQL (unparsable URL)"
    host = str(params.get("host") or "localhost")
    port = params.get("port")
    where = f"{host}:{port}" if port else host
    return f"PostgreSQL at {where}, database {params.get('dbname') or params.get('user') or '?'}"


class _Redactor:
    """Removes the URL's password from anything said about a failure."""

    def __init__(self, url: str) -> None:
        try:
            password = conninfo.conninfo_to_dict(url).get("password")
        except psycopg.ProgrammingError:
            password = None
        self._secrets = [s for s in (str(password) if password else None, url) if s]

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def storage_error(exc: BaseException, where: str, redact: _Redactor) -> ProtocolError:
    """A driver failure as the typed error clients get: never a traceback, never a secret."""
    if isinstance(exc, ProtocolError):
        return exc
    sqlstate = getattr(exc, "sqlstate", None)
    first = next(iter(str(exc).strip().splitlines()), type(exc).__name__)
    message = redact(f"{where}: {first}")
    if sqlstate == "53100":  # disk_full
        return ProtocolError(ErrorKind.STORAGE_FULL, message, retryable=True)
    if sqlstate == "42501":  # insufficient_privilege: a grant, or row-level security
        return ProtocolError(ErrorKind.UNAUTHORIZED, message, retryable=False)
    retryable = isinstance(exc, psycopg.OperationalError | PoolTimeout) or sqlstate in (
        "40001", "40P01", "57P01", "57P02", "57P03",
    )  # fmt: skip
    return ProtocolError(ErrorKind.STORAGE_ERROR, message, retryable=retryable)


class _Backoff:
    """Reconnect attempts spaced out after failures (0.1 s doubling to 2 s), so a stream of
    requests against a database that is down fails fast instead of each waiting."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.next_try = 0.0
        self.last_error: ProtocolError | None = None

    def check(self) -> None:
        if self.last_error is not None and time.monotonic() < self.next_try:
            raise self.last_error

    def failed(self, error: ProtocolError) -> None:
        self.delay = min(max(self.delay * 2, BACKOFF_FIRST), BACKOFF_MAX)
        self.next_try = time.monotonic() + self.delay
        self.last_error = error

    def succeeded(self) -> None:
        self.delay, self.next_try, self.last_error = 0.0, 0.0, None


@dataclass(slots=True)
class _Pending:
    writer: PostgresWriter
    event: str
    row: tuple[Any, ...] | None


class PostgresWriter:
    """This process's exclusive handle on one thread: its advisory lock, its appends."""

    def __init__(
        self,
        store: PostgresStore,
        thread_id: str,
        summary: ThreadSummary,
        repo: tuple[str | None, str | None],
        last_line: str | None,
        loaded: ThreadFile,
        base: Checkpoint | None,
    ) -> None:
        self._store = store
        self.thread_id = thread_id
        self.path = None  # no file: the embedded index's upsert is not for this store
        self.summary = summary
        self.repo = repo
        self.last_seq = summary.lastSeq
        self._last_line = last_line
        self._seq_of_id: dict[str, int] | None = None  # loaded by the first append needing it
        self.loaded: ThreadFile | None = loaded
        self.base = base
        self.base_rejected: str | None = None
        self.unsynced = False
        self.stale = False
        """Rows of a failed transaction were counted: reload before the next append."""
        self._serial = store.serial
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def seq_of(self, item_id: str) -> int | None:
        return self._known_ids().get(str(item_id))

    def _known_ids(self) -> dict[str, int]:
        if self._seq_of_id is None:
            rows = self._store._writer_rows(
                "SELECT item_id, seq FROM sessiond_items WHERE thread_id = %s", (self.thread_id,)
            )
            self._seq_of_id = {item_id: seq for item_id, seq in rows}
        return self._seq_of_id

    def mark(self) -> None:
        """No file line to mark: listing rows are written with the items."""
        return None

    def checkpoint(self) -> Checkpoint | None:
        """Where the thread stands: the last seq, verified later by that line's hash."""
        if self._last_line is None:
            return None
        return Checkpoint(
            offset=self.last_seq,
            seq=self.last_seq,
            lines=self.last_seq,
            line_start=self.last_seq,
            line_sha=hashlib.sha256(self._last_line.encode()).hexdigest(),
            summary=asdict(self.summary),
        )

    def needs_revalidation(self) -> bool:
        return not self._closed and (self.stale or self._serial != self._store.serial)

    def revalidate(self) -> bool:
        """After a failed transaction or a lost connection: hold the lock again and reload
        what the database holds. True when the state was reloaded (the caller rebuilds what
        it derived from appends); ThreadBusy when another process took the thread."""
        if not self.needs_revalidation():
            return False
        self._store._relock(self)
        return True

    def append(
        self,
        items: Iterable[dict[str, Any]],
        session_id: str,
        *,
        minted: bool = False,
        defer_sync: bool = False,
        keep_ts: bool = False,
    ) -> AppendResult:
        if self._closed:
            raise ProtocolError(ErrorKind.STALE_SESSION, "thread writer is closed")
        # A connection lost since the last append is made again first, so the check below
        # sees it: the lock went with the old one, and nothing is written without it.
        self._store._writer_conn()
        if self.needs_revalidation():
            self._store._relock(self)
        known = {} if minted and self._seq_of_id is None else self._known_ids()
        stamped = stamp(items, session_id, self.last_seq, known, keep_ts=keep_ts)
        if stamped.stored:
            lines = [encode_line(line)[:-1].decode() for line in stamped.stored]
            repo = self.repo
            for line in stamped.stored:
                repo = repo_binding(line) or repo
            summary = ThreadSummary(**asdict(self.summary))
            for line in stamped.stored:
                summary.apply(line)
            self._store._write(self, stamped.stored, lines, summary, repo, defer_sync)
            # Counted only once written (and, without defer_sync, committed).
            self.summary, self.repo, self.last_seq = summary, repo, stamped.last_seq
            self._last_line = lines[-1]
            known.update(stamped.new_ids)
        return AppendResult(
            min(stamped.seqs, default=None),
            max(stamped.seqs, default=None),
            stamped.duplicates,
            stamped.stored,
        )

    def begin_sync(self) -> None:
        """Group commit is the store's transaction here (PostgresStore.begin_commit)."""
        return None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._store._release(self)


class PostgresStore:
    """Threads in one PostgreSQL database; one instance per sessiond process.

    The writer connection (locks, appends, commits) is used by the store thread only;
    reads (pages, listings, snapshots) go through a pool and may run on any thread."""

    shared = True

    def __init__(self, url: str, durability: Durability = Durability.FSYNC) -> None:
        self.url = url
        self.durability = durability
        self.where = describe(url)
        self._redact = _Redactor(url)
        self.host = socket.gethostname()
        self.token = uuid.uuid4().hex  # this process, in NOTIFY payloads
        self._conn: psycopg.Connection | None = None
        self.serial = 0
        """Which writer connection this is: advisory locks die with their connection."""
        self._backoff = _Backoff()
        self._pool: ConnectionPool | None = None
        self._pool_lock = threading.Lock()
        self._in_tx = False
        # Threads with rows in the open transaction: their writer, the event to announce,
        # and the listing row to write once, at the commit.
        self._pending: dict[str, _Pending] = {}
        self._lost: ProtocolError | None = None  # deferred rows lost before their commit
        self._writers: dict[str, PostgresWriter] = {}  # open in this process
        self._watcher: _Watcher | None = None
        self._schema_lock = threading.Lock()
        self._migrated = False
        self.index = SharedIndex(self)
        self.pages = SharedPages(self)

    # --- connections ---------------------------------------------------------------------

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"application_name": f"sessiond {self.host} pid {os.getpid()}"}
        if "connect_timeout" not in conninfo.conninfo_to_dict(self.url):
            params["connect_timeout"] = CONNECT_TIMEOUT
        return params

    def _writer_conn(self) -> psycopg.Connection:
        """The writer connection (made, and the schema migrated, on first use)."""
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        self._drop_connection()
        conn = self._connect(writer=True)
        self._conn = conn
        self.serial += 1
        return conn

    def _connect(self, *, writer: bool = False) -> psycopg.Connection:
        """A new connection, the schema migrated with the first one this process makes;
        with backoff, so a database that is down fails fast and its first failure says
        why (StorageError, never the password)."""
        self._backoff.check()
        conn = None
        try:
            conn = psycopg.connect(self.url, autocommit=True, **self._params())
            with self._schema_lock:
                if not self._migrated:
                    schema.migrate(conn)
                    self._migrated = True
            if writer and self.durability is Durability.NONE:
                # Committed rows survive a sessiond crash; a database crash may lose the
                # last ones, as `none` loses the page cache of the embedded store.
                conn.execute("SET synchronous_commit = off")
        except Exception as exc:
            if conn is not None:
                conn.close()
            error = storage_error(exc, f"cannot reach {self.where}", self._redact)
            self._backoff.failed(error)
            logger.info("%s", error.message)
            raise error from None
        self._backoff.succeeded()
        return conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with suppress(Exception):  # already gone; nothing else to release
                self._conn.close()
            self._conn = None
            self._in_tx = False

    def _reader(self) -> ConnectionPool:
        """Reads go through a small pool (they may run on several threads at once)."""
        with self._pool_lock:
            if self._pool is None:
                if not self._migrated:  # a read first: reach it (and migrate) on our own
                    self._connect().close()
                self._pool = ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=4,
                    kwargs={"autocommit": True, **self._params()},
                    check=ConnectionPool.check_connection,
                    timeout=POOL_WAIT,
                    name="sessiond-read",
                    open=True,
                )
            return self._pool

    @contextmanager
    def _read(self) -> Iterator[psycopg.Connection]:
        """A pooled connection for reads; driver failures become StorageError."""
        try:
            with self._reader().connection() as conn:
                yield conn
        except ProtocolError:
            raise
        except (psycopg.Error, PoolTimeout) as exc:
            raise storage_error(exc, self.where, self._redact) from None

    def _writer_rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        conn = self._writer_conn()
        try:
            return conn.execute(sql, params).fetchall()
        except psycopg.Error as exc:
            raise self._fail(exc) from None

    # --- transactions --------------------------------------------------------------------

    def _write(
        self,
        writer: PostgresWriter,
        stored: list[dict[str, Any]],
        lines: list[str],
        summary: ThreadSummary,
        repo: tuple[str | None, str | None],
        defer: bool,
        event: str = "updated",
    ) -> None:
        """Insert the rows and the thread's new listing row; commit unless deferred."""
        conn = self._writer_conn()
        try:
            if not self._in_tx:
                conn.execute("BEGIN")
                self._in_tx = True
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO sessiond_items (thread_id, seq, item_id, line) "
                    "VALUES (%s, %s, %s, %s)",
                    [
                        (writer.thread_id, line["seq"], line["id"], text)
                        for line, text in zip(stored, lines, strict=True)
                    ],
                )
            previous = self._pending.get(writer.thread_id)
            self._pending[writer.thread_id] = _Pending(
                writer, previous.event if previous else event, _row_values(summary, repo)
            )
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        if defer and self.durability is Durability.GROUP:
            writer.unsynced = True
        else:
            self._commit()

    def _commit(self) -> None:
        """Commit what is pending, with one notification per changed thread."""
        if not self._in_tx:
            return
        conn = self._writer_conn()
        try:
            with conn.cursor() as cur:
                rows = [p.row for p in self._pending.values() if p.row is not None]
                if rows:
                    cur.executemany(_UPDATE_ROW, rows)
                for thread_id, pending in self._pending.items():
                    payload = {"e": pending.event, "t": thread_id, "o": self.token}
                    cur.execute(
                        "SELECT pg_notify(%s, %s)", (CHANNEL, orjson.dumps(payload).decode())
                    )
                cur.execute("COMMIT")
                committed = cur.statusmessage == "COMMIT"
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        self._in_tx = False
        if not committed:
            raise self._fail(psycopg.OperationalError("the transaction was rolled back"))
        for pending in self._pending.values():
            pending.writer.unsynced = False
        self._pending.clear()

    def _fail(self, exc: BaseException) -> ProtocolError:
        """A failed statement or commit: nothing pending was committed. Every writer with
        rows in it reloads before its next append; deferred records are failed at the
        next `begin_commit` (never acknowledged)."""
        error = storage_error(exc, self.where, self._redact)
        deferred = any(pending.writer.unsynced for pending in self._pending.values())
        for pending in self._pending.values():
            pending.writer.stale = True
            pending.writer.unsynced = False
        self._pending.clear()
        if deferred:
            self._lost = error
        conn = self._conn
        if conn is not None and not conn.broken and not conn.closed:
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error:
                self._drop_connection()
        else:
            self._drop_connection()
        self._in_tx = False
        logger.info("%s", error.message)
        return error

    def begin_commit(self) -> None:
        """Group commit: every record appended since the last commit shares this one.

        Runs on the store thread at the end of a worker batch; raises (and nothing of the
        batch is acknowledged) when the commit, or an earlier statement, failed."""
        if self._lost is not None:
            lost, self._lost = self._lost, None
            raise lost
        try:
            self._commit()
        except ProtocolError:
            self._lost = None  # this very failure is what the batch is answered
            raise

    # --- locks ---------------------------------------------------------------------------

    def _try_lock(self, conn: psycopg.Connection, thread_id: str) -> None:
        """Take the thread's advisory lock on the writer connection, or ThreadBusy."""
        taken = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(thread_id),))
        row = taken.fetchone()
        if row is None or not row[0]:
            holder = self._holder(conn, thread_id)
            raise ProtocolError(
                ErrorKind.THREAD_BUSY,
                f"thread is being written by {holder}",
                threadId=thread_id,
                holder=holder,
            )

    def _unlock(self, conn: psycopg.Connection, thread_id: str) -> None:
        conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(thread_id),))

    @staticmethod
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
        return holder or application or "another process"

    def name_holder(self, thread_id: str, holder: str) -> None:
        """Name the client holding a thread for other machines' ThreadBusy errors."""
        thread_id = validate_thread_id(thread_id)
        conn = self._writer_conn()
        try:
            conn.execute(
                "INSERT INTO sessiond_holders (thread_id, holder, backend_pid) "
                "VALUES (%s, %s, pg_backend_pid()) ON CONFLICT (thread_id) DO UPDATE SET "
                "holder = excluded.holder, backend_pid = excluded.backend_pid",
                (thread_id, f"{holder} on {self.host}"),
            )
        except psycopg.Error as exc:
            raise self._fail(exc) from None

    # --- opening ---------------------------------------------------------------------------

    def create(self, thread_id: str, session_id: str, meta: dict[str, Any]) -> PostgresWriter:
        """A new thread, committed at once with its `session_meta` (and announced)."""
        thread_id = validate_thread_id(thread_id)
        conn = self._writer_conn()
        try:
            self._try_lock(conn, thread_id)
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        summary = ThreadSummary(threadId=thread_id)
        writer = PostgresWriter(self, thread_id, summary, (None, None), None, ThreadFile(), None)
        self._writers[thread_id] = writer
        try:
            try:
                if not self._in_tx:
                    conn.execute("BEGIN")
                    self._in_tx = True
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
            self._pending[thread_id] = _Pending(writer, "started", None)
            writer.loaded = ThreadFile(items=writer.append([meta], session_id).stored)
        except BaseException:
            writer.close()
            raise
        return writer

    def open_writer(self, thread_id: str, base: Checkpoint | None = None) -> PostgresWriter:
        """Take the thread's lock (ThreadBusy if held anywhere) and read it: the items
        after `base` once its last line is verified, else all of them."""
        thread_id = validate_thread_id(thread_id)
        conn = self._writer_conn()
        try:
            self._try_lock(conn, thread_id)
        except psycopg.Error as exc:
            raise self._fail(exc) from None
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
        writer = PostgresWriter(self, thread_id, row, repo, last_line, contents, base)
        writer.base_rejected = rejected
        self._writers[thread_id] = writer
        return writer

    def _row(
        self, conn: psycopg.Connection, thread_id: str
    ) -> tuple[ThreadSummary, tuple[str | None, str | None]]:
        found = conn.execute(
            f"SELECT {_ROW_COLUMNS}, repo_id, repo_path FROM sessiond_threads WHERE thread_id = %s",
            (thread_id,),
        ).fetchone()
        if found is None:
            raise thread_not_found(thread_id)
        return _summary_of(found[:-2]), (found[-2], found[-1])

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
        if line is None or hashlib.sha256(line.encode()).hexdigest() != base.line_sha:
            return "stale: the thread changed before the snapshot's seq"
        return None

    def _relock(self, writer: PostgresWriter) -> None:
        """Revalidate a writer: lock again on a new connection, reload from the rows.

        What is pending commits first: listing rows are written at the commit, so read
        inside an open transaction they would be behind its items (and a seq reused)."""
        self._commit()
        conn = self._writer_conn()
        try:
            if writer._serial != self.serial:  # the old connection took the lock with it
                try:
                    self._try_lock(conn, writer.thread_id)
                except ProtocolError:
                    writer._closed = True
                    self._writers.pop(writer.thread_id, None)
                    raise
                writer._serial = self.serial
            row, repo = self._row(conn, writer.thread_id)
            last_line = self._line_at(conn, writer.thread_id, row.lastSeq)
        except psycopg.Error as exc:
            raise self._fail(exc) from None
        writer.summary, writer.repo, writer.last_seq = row, repo, row.lastSeq
        writer._last_line = last_line
        writer._seq_of_id = None
        writer.stale = False

    def _release(self, writer: PostgresWriter) -> None:
        """A writer closes: its pending rows commit first, then its lock goes."""
        self._writers.pop(writer.thread_id, None)
        if writer._serial != self.serial:
            return  # that connection, and the lock with it, are gone already
        if writer.thread_id in self._pending:
            with suppress(ProtocolError):  # failed: its records are answered StorageError
                self._commit()
        self._unlock_quietly(writer.thread_id)

    def _unlock_quietly(self, thread_id: str) -> None:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            return
        try:
            self._unlock(conn, thread_id)
        except psycopg.Error as exc:
            self._fail(exc)

    # --- reading ---------------------------------------------------------------------------

    def read(self, thread_id: str) -> tuple[ThreadFile, bool]:
        """Every item of a thread (committed ones: readers never see a pending commit)."""
        thread_id = validate_thread_id(thread_id)
        with self._read() as conn:
            archived = self._archived(conn, thread_id)
            lines = conn.execute(
                "SELECT line FROM sessiond_items WHERE thread_id = %s ORDER BY seq", (thread_id,)
            ).fetchall()
        return ThreadFile(items=[orjson.loads(line) for (line,) in lines]), archived

    def read_origin(self, thread_id: str) -> dict[str, Any] | None:
        """The `origin` of the thread's first `session_meta`, kept in its listing row."""
        found = self.get(validate_thread_id(thread_id))
        if found is None:
            raise thread_not_found(thread_id)
        return found.origin

    @staticmethod
    def _archived(conn: psycopg.Connection, thread_id: str) -> bool:
        found = conn.execute(
            "SELECT archived FROM sessiond_threads WHERE thread_id = %s", (thread_id,)
        ).fetchone()
        if found is None:
            raise thread_not_found(thread_id)
        return bool(found[0])

    def transcript_path(self, thread_id: str) -> str | None:
        """No file to point a hook at: the thread is rows (`sessiond show ID` prints it)."""
        return None

    def exists(self, thread_id: str) -> bool:
        with self._read() as conn:
            return (
                conn.execute(
                    "SELECT 1 FROM sessiond_threads WHERE thread_id = %s",
                    (validate_thread_id(thread_id),),
                ).fetchone()
                is not None
            )

    def get(self, thread_id: str) -> ThreadSummary | None:
        rows = self._summaries([thread_id])
        return rows[0] if rows else None

    def _summaries(self, thread_ids: list[str]) -> list[ThreadSummary]:
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {_ROW_COLUMNS} FROM sessiond_threads WHERE thread_id = ANY(%s::uuid[])",
                (thread_ids,),
            ).fetchall()
        return [_summary_of(row) for row in rows]

    def thread_ids(self) -> list[str]:
        with self._read() as conn:
            rows = conn.execute("SELECT thread_id::text FROM sessiond_threads").fetchall()
        return [row[0] for row in rows]

    def child_counts(self, thread_ids: list[str]) -> dict[str, int]:
        """Each thread's unarchived children (as `thread/list` counts them, under the same
        row policies), in one query."""
        ids = [validate_thread_id(thread_id) for thread_id in thread_ids]
        counts = dict.fromkeys(ids, 0)
        if not ids:
            return counts
        with self._read() as conn:
            rows = conn.execute(
                "SELECT parent_thread_id::text, count(*) FROM sessiond_threads "
                "WHERE parent_thread_id = ANY(%s::uuid[]) AND NOT archived GROUP BY 1",
                (ids,),
            ).fetchall()
        counts.update((parent, int(n)) for parent, n in rows)
        return counts

    def list(
        self,
        *,
        cwd: str | None,
        workspace_folder: str | None,
        archived: bool,
        search: str | None,
        cursor: str | None,
        limit: int,
        repo: tuple[str, str] | None = None,
        parent_thread_id: str | None = None,
    ) -> tuple[list[ThreadSummary], str | None]:
        """One page, newest first, every filter applied before paging (keyset cursor):
        top-level threads, or the children of `parent_thread_id`.

        `repo` (repoId, path of the folder inside the repository) widens a workspace-folder
        filter to that repository's threads from every machine, wherever it is checked out.
        """
        limit = max(1, min(MAX_LIMIT, limit))
        where = ["archived = %s"]
        params: list[Any] = [archived]
        if parent_thread_id is None:
            where.append("parent_thread_id IS NULL")
        else:
            where.append("parent_thread_id = %s::uuid")
            params.append(validate_thread_id(parent_thread_id))
        if cwd is not None:
            where.append('cwd COLLATE "C" = %s')
            params.append(cwd)
        if workspace_folder is not None:
            base = workspace_folder.rstrip("/")
            under = (
                'workspace_folder = %s OR cwd COLLATE "C" = %s OR '
                '(cwd COLLATE "C" >= %s AND cwd COLLATE "C" < %s)'
            )
            params += [workspace_folder, workspace_folder, base + "/", base + "0"]
            if repo is not None:
                repo_id, inside = repo
                if inside:
                    under += (
                        ' OR (repo_id = %s AND (repo_path COLLATE "C" = %s OR '
                        '(repo_path COLLATE "C" >= %s AND repo_path COLLATE "C" < %s)))'
                    )
                    params += [repo_id, inside, inside + "/", inside + "0"]
                else:
                    under += " OR repo_id = %s"
                    params.append(repo_id)
            where.append(f"({under})")
        if search:
            where.append(
                "(strpos(lower(coalesce(title, '')), lower(%s)) > 0 "
                "OR strpos(lower(preview), lower(%s)) > 0)"
            )
            params += [search, search]
        if cursor is not None:
            updated, thread_id = decode_cursor(cursor)
            try:
                validate_thread_id(thread_id)
            except ProtocolError:
                raise ProtocolError(
                    ErrorKind.INVALID_PARAMS, "malformed thread/list cursor", field="cursor"
                ) from None
            where.append("(updated_at, thread_id) < (%s, %s::uuid)")
            params += [updated, thread_id]
        sql = (
            f"SELECT {_ROW_COLUMNS}, {_CHILD_COUNT} FROM sessiond_threads "
            f"WHERE {' AND '.join(where)} ORDER BY updated_at DESC, thread_id DESC LIMIT %s"
        )
        with self._read() as conn:
            rows = conn.execute(sql, [*params, limit + 1]).fetchall()  # type: ignore[arg-type]
        page = [_summary_of(row) for row in rows[:limit]]
        if len(rows) <= limit:
            return page, None
        last = page[-1]
        return page, encode_cursor(last.updatedAt or "", last.threadId)

    def count(self) -> int:
        with self._read() as conn:
            row = conn.execute("SELECT count(*) FROM sessiond_threads").fetchone()
        return int(row[0]) if row else 0

    # --- archive and delete -----------------------------------------------------------------

    @contextmanager
    def _locked(self, thread_id: str) -> Iterator[psycopg.Connection]:
        """The thread's lock for one short change (ThreadBusy when a writer holds it)."""
        conn = self._writer_conn()
        try:
            self._try_lock(conn, thread_id)
        except psycopg.Error as exc:
            raise self._fail(exc) from None
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
                f"RETURNING {_ROW_COLUMNS}",
                (archived, thread_id),
            ).fetchone()
            if found is None:
                raise self._not_changed(conn, thread_id)
            self._notify(conn, "updated", thread_id)
        return _summary_of(found)

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
        change it (only its owner may: restore/stores/migrations/002_*.sql)."""
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
        payload = orjson.dumps({"e": event, "t": thread_id, "o": self.token}).decode()
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))

    # --- snapshots and blobs ----------------------------------------------------------------

    def load_snapshot(self, thread_id: str) -> tuple[Snapshot | None, str | None]:
        try:
            with self._read() as conn:
                row = conn.execute(
                    "SELECT body FROM sessiond_snapshots WHERE thread_id = %s", (thread_id,)
                ).fetchone()
        except ProtocolError as exc:  # derived data: its absence costs a replay, not a resume
            return None, f"unreadable: {exc.message}"
        if row is None:
            return None, "missing"
        return decode_snapshot(thread_id, bytes(row[0]))

    def save_snapshot(self, thread_id: str, snapshot: Snapshot) -> None:
        with self._read() as conn:
            conn.execute(
                "INSERT INTO sessiond_snapshots (thread_id, body) VALUES (%s, %s) "
                "ON CONFLICT (thread_id) DO UPDATE SET body = excluded.body",
                (thread_id, encode_snapshot(thread_id, snapshot)),
            )

    def discard_snapshot(self, thread_id: str) -> None:
        with self._read() as conn:
            conn.execute("DELETE FROM sessiond_snapshots WHERE thread_id = %s", (thread_id,))

    def put_blob(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        with self._read() as conn:
            conn.execute(
                "INSERT INTO sessiond_blobs (sha256, data) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (sha, data),
            )
        return sha

    def blob_shas(self) -> list[str]:
        with self._read() as conn:
            rows = conn.execute("SELECT DISTINCT sha256 FROM sessiond_blobs ORDER BY 1")
            return [row[0] for row in rows]

    def get_blob(self, sha: str) -> bytes | None:
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            return None
        with self._read() as conn:
            row = conn.execute(
                "SELECT data FROM sessiond_blobs WHERE sha256 = %s", (sha,)
            ).fetchone()
        return None if row is None else bytes(row[0])

    def blob_size(self, sha: str) -> int | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT octet_length(data) FROM sessiond_blobs WHERE sha256 = %s", (sha,)
            ).fetchone()
        return None if row is None else int(row[0])

    # --- copying (sessiond migrate) ----------------------------------------------------------

    def import_thread(self, thread_id: str, items: list[dict[str, Any]], archived: bool) -> int:
        """Copy a thread's records as they are (seq, ts, ids kept); idempotent: items
        already present are skipped by their id. Returns how many were added. Records
        at seqs the thread already holds under other ids (diverged copies) violate the
        primary key: nothing of the thread is written (InvalidParams)."""
        thread_id = validate_thread_id(thread_id)
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
                new = [item for item in items if str(item["id"]) not in present]
                if new and min(i["seq"] for i in new) <= max(present.values(), default=0):
                    raise ProtocolError(
                        ErrorKind.INVALID_PARAMS,
                        "the copies diverged: other records at the same seqs",
                        threadId=thread_id,
                    )
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO sessiond_items (thread_id, seq, item_id, line) "
                        "VALUES (%s, %s, %s, %s)",
                        [(thread_id, i["seq"], str(i["id"]), orjson.dumps(i).decode())
                         for i in new],
                    )  # fmt: skip
                lines = conn.execute(
                    "SELECT line FROM sessiond_items WHERE thread_id = %s ORDER BY seq",
                    (thread_id,),
                ).fetchall()
                summary = ThreadSummary(threadId=thread_id, archived=archived)
                repo: tuple[str | None, str | None] = (None, None)
                for (line,) in lines:
                    item = orjson.loads(line)
                    summary.apply(item)
                    repo = repo_binding(item) or repo
                conn.execute(_UPDATE_ROW, _row_values(summary, repo))
                conn.execute(
                    "UPDATE sessiond_threads SET archived = %s WHERE thread_id = %s",
                    (archived, thread_id),
                )
                self._notify(conn, "updated", thread_id)
        return len(new)

    # --- live changes from other processes ----------------------------------------------------

    def watch(self, announce: Announce) -> None:
        """Call `announce` (on a background thread) for every thread another sessiond
        started, changed or deleted in this database. Started by the first request that
        needed the store, never at server startup."""
        if self._watcher is None:
            self._watcher = _Watcher(self, announce)
            self._watcher.start()

    def close(self) -> None:
        """Commit what is pending, release every lock, stop watching."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        with suppress(ProtocolError):
            self._commit()
        self._drop_connection()  # releases every advisory lock this process held
        with self._pool_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None


class _Watcher(threading.Thread):
    """LISTEN on the store's channel; reconnect with backoff when the connection drops."""

    def __init__(self, store: PostgresStore, announce: Announce) -> None:
        super().__init__(name="sessiond-listen", daemon=True)
        self._store = store
        self._announce = announce
        self._stopping = threading.Event()
        self._conn: psycopg.Connection | None = None

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=5)

    def run(self) -> None:
        backoff = BACKOFF_FIRST
        missed_since: str | None = None  # while not listening, from when (writers' clocks)
        while not self._stopping.is_set():
            try:
                with psycopg.connect(
                    self._store.url, autocommit=True, **self._store._params()
                ) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    backoff = BACKOFF_FIRST
                    if missed_since is not None:
                        self._catch_up(conn, missed_since)
                        missed_since = None
                    # From here on no change is missed: whoever keeps its own position in
                    # threads (server/relay.py) reads what it may have missed until now.
                    self._announce("listening", "", None)
                    self._listen(conn)
            except Exception as exc:  # down or restarting: try again later
                logger.info("%s", self._store._redact(f"listen: {exc}"))
                if missed_since is None:
                    missed_since = _ts_ago(CATCH_UP_MARGIN)
            else:
                continue
            self._stopping.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    def _catch_up(self, conn: psycopg.Connection, since: str) -> None:
        """Notifications sent while this listener was away are lost: announce every thread
        changed since then instead (a few too many is harmless: updates are coalesced)."""
        rows = conn.execute(
            f"SELECT {_ROW_COLUMNS} FROM sessiond_threads WHERE updated_at >= %s", (since,)
        ).fetchall()
        for row in rows:
            summary = _summary_of(row)
            started = (summary.createdAt or "") >= since
            self._announce("started" if started else "updated", summary.threadId, summary)

    def _listen(self, conn: psycopg.Connection) -> None:
        """Wait for a first notification (the stop flag is looked at between waits), then
        gather the burst it begins for `LISTEN_GATHER` seconds: one delivery (one query)
        per burst, within tens of milliseconds of the commit, not at the end of the wait."""
        while not self._stopping.is_set():
            changes: dict[str, str] = {}
            for note in conn.notifies(timeout=LISTEN_WAIT, stop_after=1):
                self._note(changes, note)
            if not changes:
                continue  # nothing, or only this process's own changes
            for note in conn.notifies(timeout=LISTEN_GATHER):
                self._note(changes, note)
            self._deliver(changes)

    def _note(self, changes: dict[str, str], note: psycopg.Notify) -> None:
        try:
            body = orjson.loads(note.payload)
        except orjson.JSONDecodeError:
            return
        if body.get("o") == self._store.token:
            return  # this process's own change: its clients were told already
        event, thread_id = str(body.get("e")), str(body.get("t"))
        if changes.get(thread_id) != "started":  # started stays started
            changes[thread_id] = event

    def _deliver(self, changes: dict[str, str]) -> None:
        wanted = [tid for tid, event in changes.items() if event != "deleted"]
        try:
            rows = {s.threadId: s for s in self._store._summaries(wanted)} if wanted else {}
        except ProtocolError as exc:
            logger.info("listen: %s", exc.message)
            return
        for thread_id, event in changes.items():
            summary = rows.get(thread_id)
            if event == "deleted" or summary is not None:
                self._announce(event, thread_id, summary)


REPO_CACHE_SECONDS = 30.0
LISTEN_WAIT = 0.5  # seconds a listener waits for a notification before checking for stop
LISTEN_GATHER = 0.02  # seconds a burst of notifications is gathered into one delivery
CATCH_UP_MARGIN = 60.0  # seconds: other machines' clocks stamp `updated_at`


def _ts_ago(seconds: float) -> str:
    """A timestamp in the records' format (restore/jsonl.py now_ts), `seconds` ago."""
    moment = datetime.now(UTC) - timedelta(seconds=seconds)
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


_PAGE = (
    "SELECT seq, size, CASE WHEN running <= %s THEN line END FROM ("
    " SELECT seq, line, octet_length(line) AS size,"
    " sum(octet_length(line) + 1) OVER (ORDER BY seq {order}) AS running FROM ("
    "  SELECT seq, line FROM sessiond_items WHERE thread_id = %s AND {where}"
    "  ORDER BY seq {order} LIMIT %s) AS page) AS sized ORDER BY seq {order}"
)


class SharedPages:
    """Pages of a thread from its rows, both ways, in O(page) by the primary key, cut by
    bytes like the embedded store's (restore/pages.py): the database sums the lines' sizes,
    so only the lines that fit in the answer leave it. Safe on any thread (pooled reads).
    Rows have no bad lines to report: `skippedLines` is always empty."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def read(
        self,
        thread_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int,
        max_bytes: int,
    ) -> Page:
        """Forward (the first `limit` items with seq > after) or back (the last `limit`
        with seq < before); items ascending either way, `next_seq` None at the end."""
        thread_id = validate_thread_id(thread_id)
        back = before is not None
        chosen, more = self._rows(thread_id, before if back else after or 0, back, limit,
                                  max_bytes, known=False)  # fmt: skip
        next_seq = chosen[-1][0] if more else None  # the last one taken, either way
        if back:
            chosen.reverse()
        return Page(next_seq, [], [line for _, line in chosen])

    def after(
        self, thread_id: str, after: int, *, limit: int, max_bytes: int
    ) -> tuple[list[tuple[int, bytes]], bool]:
        """The items after seq `after`, ascending, each with its seq, cut like a forward
        page (count and bytes); True when more follow. For followers of a thread another
        machine writes (server/relay.py): a thread that is gone has nothing after."""
        return self._rows(validate_thread_id(thread_id), after, False, limit, max_bytes,
                          known=True)  # fmt: skip

    def last_seq(self, thread_id: str) -> int:
        """The seq of the thread's last item (0 when it has none); ThreadNotFound if none
        such (for a subscribe: followers get what comes after it)."""
        with self._store._read() as conn:
            self._store._archived(conn, validate_thread_id(thread_id))
            row = conn.execute(
                "SELECT max(seq) FROM sessiond_items WHERE thread_id = %s", (thread_id,)
            ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def _rows(
        self, thread_id: str, start: int, back: bool, limit: int, max_bytes: int, *, known: bool
    ) -> tuple[list[tuple[int, bytes]], bool]:
        """(seq, line) from `start` on (exclusive), in the query's order, and whether more
        follow; `known`: the caller does not need ThreadNotFound for a missing thread."""
        budget = max_bytes - ANSWER_OVERHEAD
        order, where = ("DESC", "seq < %s") if back else ("ASC", "seq > %s")
        sql = _PAGE.format(order=order, where=where)
        with self._store._read() as conn:
            if not known:
                self._store._archived(conn, thread_id)  # ThreadNotFound for a missing thread
            params = (budget, thread_id, start, limit + 1)
            rows = conn.execute(sql, params).fetchall()  # type: ignore[arg-type]
        chosen: list[tuple[int, bytes]] = []
        for seq, size, line in rows:
            if len(chosen) == limit or line is None:
                if not chosen:
                    raise too_large(seq, size, budget)
                return chosen, True
            chosen.append((seq, line.encode()))
        return chosen, False

    def holds(self, thread_id: str, page: Page, backward: bool) -> bool:
        """Whether a page read ahead is still what a read now would answer: rows before a
        seq never change, so a backward page holds while its thread is there; a forward
        one may end at the thread's end, so it is read again."""
        if not backward:
            return False
        try:
            return self._store.exists(thread_id)
        except ProtocolError:
            return False

    def pick(
        self, thread_id: str, path: Any, seqs: list[int], max_bytes: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """The items with these seqs (ascending), newest first within `max_bytes`; True when
        older ones were left out for the budget."""
        if not seqs:
            return [], False
        sql = _PAGE.format(order="DESC", where="seq = ANY(%s)")
        with self._store._read() as conn:
            rows = conn.execute(
                sql, (max_bytes - ANSWER_OVERHEAD, thread_id, seqs, len(seqs))
            ).fetchall()  # type: ignore[arg-type]
        kept = [orjson.loads(line) for _, _, line in reversed(rows) if line is not None]
        return kept, len(kept) < len(rows)

    def forget(self, thread_id: str) -> None:
        """Nothing derived to drop: the rows went with the thread."""


class SharedIndex:
    """The listing side of the store, shaped like the embedded index the service flushes:
    rows are written with their items, so there is nothing to flush, rebuild or remove.
    A workspace folder inside a git repository also lists that repository's threads
    recorded on every machine, at the same place inside it."""

    files_read = 0  # no files: `sessiond/debug` reports it beside the embedded index's

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._repos: dict[str, tuple[float, tuple[str, str] | None]] = {}

    def ensure_ready(self, progress: Any = None) -> str:
        return "ready"

    @property
    def is_open(self) -> bool:
        return False  # nothing of this process's to flush into it

    def upsert(self, summary: ThreadSummary, path: Any, mark: Any = None) -> None:
        """Written in the items' transaction already."""

    def upsert_many(self, rows: Any) -> None:
        """Written in the items' transaction already."""

    def refresh(self, rows: Any) -> None:
        """Other processes' rows are in the table already."""

    def remove(self, thread_id: str) -> None:
        """Deleted with the thread's row already."""

    def close(self) -> None:
        """The store owns the connections."""

    def get(self, thread_id: str) -> ThreadSummary | None:
        return self._store.get(thread_id)

    def count(self) -> int:
        return self._store.count()

    def child_counts(self, thread_ids: list[str]) -> dict[str, int]:
        return self._store.child_counts(thread_ids)

    def list(
        self,
        *,
        cwd: str | None = None,
        workspace_folder: str | None = None,
        archived: bool = False,
        search: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        parent_thread_id: str | None = None,
    ) -> tuple[list[ThreadSummary], str | None]:
        repo = self._repo_of(workspace_folder) if workspace_folder else None
        return self._store.list(
            cwd=cwd,
            workspace_folder=workspace_folder,
            archived=archived,
            search=search,
            cursor=cursor,
            limit=limit,
            repo=repo,
            parent_thread_id=parent_thread_id,
        )

    def _repo_of(self, folder: str) -> tuple[str, str] | None:
        """(repoId, the folder's path inside its repository), cached briefly: a listing
        must not run git for every page."""
        now = time.monotonic()
        cached = self._repos.get(folder)
        if cached is not None and now - cached[0] < REPO_CACHE_SECONDS:
            return cached[1]
        from restore.environment import repo_identity

        found = repo_identity(folder)
        binding = None
        if found is not None:
            inside = os.path.relpath(folder, found[1])
            if not inside.startswith(".."):
                binding = (found[0], "" if inside == "." else inside)
        self._repos[folder] = (now, binding)
        return binding
