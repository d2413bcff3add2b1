"""The SQLite thread index: one row per thread, so `thread/list` never reads every file.

An accelerator only. The JSONL files are the truth; this file can be deleted or corrupted
and nothing is lost: `ensure_ready` rebuilds it from the files. Its first open in a process
catches up with what other processes did without touching every file: the threads whose
writer is alive elsewhere or died before writing its row (writer marks, `marks.py`), and
the shard directories whose mtime moved since the last open (a file created, removed or
moved) are read again; after a reboot (a power loss may have dropped rows the files kept)
every file is compared, as after a rebuild. A file that grew since its row is read from
where the row ends, not from byte 0: each row keeps the last line it covers (position and
hash), and the file still holding that line proves the rest was only appended. Files this
process is writing are never read at all: their rows come from the writers (`live`).
`sqlite3` is imported only when the index is first opened, because sessiond promises that
startup imports no sqlite3.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import orjson

from restore.faults import pause_point
from restore.home.caches import REBUILD_HINT, SQLITE_FILES, content_fault, decoded, set_aside
from restore.home.files import create_file, not_regular, private_dirs
from restore.home.layout import Layout
from restore.ids import prefix_end
from restore.keys import key_range
from restore.stores.api import (
    FIRST_PAGE,
    KeyThreads,
    ListFilters,
    Listing,
    Progress,
    Rows,
    derived,
    storage_failure,
)
from restore.stores.cursors import (
    JSON_FIELDS,
    MAX_LIMIT,
    ROW_FIELDS,
    decode_cursor,
    encode_cursor,
    summary_of,
)
from restore.stores.embedded import marks
from restore.stores.embedded.jsonl import LineMark
from restore.summary import ThreadSummary, UsageRow, counted_cost, usage_row
from restore.usage.entries import Usage
from restore.usage.index_file import RACY_NS, boot_id, usage_of

if TYPE_CHECKING:
    import sqlite3

logger = logging.getLogger("sessiond.index")

Indexed = tuple[ThreadSummary, LineMark | None]
"""A thread's index row: its summary, and the last line of the file it covers (None:
unknown, so a change is read from the start)."""
SummaryReader = Callable[[Path, bool, Indexed | None], Indexed | None]
"""Summarizes a file (files.ThreadStore.read_summary), from a row's line on if given."""
LiveRows = Callable[[], dict[str, Indexed]]
"""Rows of the files this process writes, by path: current in memory, so never read."""

_BATCH = 100  # files summarized per write transaction and per progress report
WAL_BOUND_PAGES = 10_000
"""Pages (4 KiB) the index's WAL may reach before SQLite checkpoints it in the writing
transaction (its default, 1,000, made every ~50th reset of `thread/continue` pay ~8 ms for
it): a server never idle for a second checkpoints there; an idle one well before."""
WAL_KEPT_BYTES = 4 * 1024 * 1024
"""What the WAL file is cut back to after a checkpoint (`journal_size_limit`)."""

_FIELDS = ROW_FIELDS  # table order; `updatedAt` is '' when unknown (no NULLs in keyset order)
_COLUMNS = (*_FIELDS, "path", "size", "mtimeNs", "lastLineStart", "lastLineSha")

_SCHEMA = """
CREATE TABLE threads (
    threadId TEXT PRIMARY KEY NOT NULL,
    title TEXT,
    preview TEXT NOT NULL,
    cwd TEXT,
    workspaceFolder TEXT,
    branch TEXT,
    headSha TEXT,
    createdAt TEXT,
    updatedAt TEXT NOT NULL,
    itemCount INTEGER NOT NULL,
    archived INTEGER NOT NULL,
    forkedFrom TEXT,
    costUsd REAL NOT NULL,
    origin TEXT,
    parentThreadId TEXT,      -- a sub-agent's parent thread (NULL: a top-level thread)
    parentOperationId TEXT,
    lastSeq INTEGER NOT NULL,
    latestSessionId TEXT,
    sessionKey TEXT,          -- the thread's session key (NULL: none)
    previousThreadId TEXT,    -- the thread a reset replaced with this one
    nextThreadId TEXT,        -- the thread that replaced this one (its thread_successor item)
    resetReason TEXT,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,    -- bytes the row covers (a torn tail is not covered)
    mtimeNs INTEGER NOT NULL,
    lastLineStart INTEGER,    -- the last covered line, [lastLineStart, size), and its sha256
    lastLineSha TEXT
);
-- cwd, workspaceFolder and parentThreadId ride along so a workspace filter (and the
-- top-level-only default) is checked inside the index, without a table lookup for each
-- non-matching row.
CREATE INDEX threads_by_recency
    ON threads (archived, updatedAt, threadId, cwd, workspaceFolder, parentThreadId);
CREATE INDEX threads_by_cwd ON threads (cwd, archived, updatedAt, threadId);
-- A thread's children, listed and counted without a scan.
CREATE INDEX threads_by_parent ON threads (parentThreadId, archived, updatedAt, threadId);
-- A session key's threads (its current one, a listing by key prefix), and who replaced
-- whom: only keyed threads are in these.
CREATE INDEX threads_by_key ON threads (sessionKey, archived, updatedAt, threadId)
    WHERE sessionKey IS NOT NULL;
CREATE INDEX threads_by_previous ON threads (previousThreadId)
    WHERE previousThreadId IS NOT NULL;
-- One row per model call (a `cost` item), for `sessiond usage` (restore/usage): written
-- with its thread's row, gone with it. A call's seq is its item: written twice, it is
-- the same call.
CREATE TABLE usage (
    threadId TEXT NOT NULL,
    seq INTEGER NOT NULL,
    atMs INTEGER NOT NULL,    -- the call's time, epoch milliseconds
    model TEXT NOT NULL,
    input INTEGER NOT NULL,   -- fresh input: neither read from nor written to a cache
    output INTEGER NOT NULL,
    cacheRead INTEGER NOT NULL,
    cacheWrite INTEGER NOT NULL,
    usd REAL NOT NULL,
    priced INTEGER NOT NULL,
    PRIMARY KEY (threadId, seq)
) WITHOUT ROWID;
CREATE INDEX usage_by_time ON usage (atMs, model);
CREATE TRIGGER usage_gone AFTER DELETE ON threads BEGIN
    DELETE FROM usage WHERE threadId = old.threadId;
END;
-- Every thread's calls summed per quarter hour (atMs / 900000) and model, kept by the
-- triggers below: what a report by day, week or month reads (every time zone's offset
-- is a multiple of 15 minutes), a few rows a day instead of every call.
CREATE TABLE usage_quarters (
    quarter INTEGER NOT NULL,
    model TEXT NOT NULL,
    input INTEGER NOT NULL,
    output INTEGER NOT NULL,
    cacheRead INTEGER NOT NULL,
    cacheWrite INTEGER NOT NULL,
    usd REAL NOT NULL,
    unpriced INTEGER NOT NULL,
    calls INTEGER NOT NULL,
    firstMs INTEGER NOT NULL,
    lastMs INTEGER NOT NULL,
    PRIMARY KEY (quarter, model)
) WITHOUT ROWID;
CREATE TRIGGER usage_in AFTER INSERT ON usage BEGIN
    INSERT INTO usage_quarters VALUES (new.atMs / 900000, new.model, new.input, new.output,
        new.cacheRead, new.cacheWrite, new.usd, 1 - new.priced, 1, new.atMs, new.atMs)
    ON CONFLICT (quarter, model) DO UPDATE SET input = input + excluded.input,
        output = output + excluded.output, cacheRead = cacheRead + excluded.cacheRead,
        cacheWrite = cacheWrite + excluded.cacheWrite, usd = usd + excluded.usd,
        unpriced = unpriced + excluded.unpriced, calls = calls + 1,
        firstMs = min(firstMs, excluded.firstMs), lastMs = max(lastMs, excluded.lastMs);
END;
CREATE TRIGGER usage_out AFTER DELETE ON usage BEGIN
    UPDATE usage_quarters SET input = input - old.input, output = output - old.output,
        cacheRead = cacheRead - old.cacheRead, cacheWrite = cacheWrite - old.cacheWrite,
        usd = usd - old.usd, unpriced = unpriced - (1 - old.priced), calls = calls - 1,
        firstMs = coalesce((SELECT min(atMs) FROM usage WHERE model = old.model
            AND atMs / 900000 = old.atMs / 900000
            AND atMs BETWEEN old.atMs - 900000 AND old.atMs + 900000), 0),
        lastMs = coalesce((SELECT max(atMs) FROM usage WHERE model = old.model
            AND atMs / 900000 = old.atMs / 900000
            AND atMs BETWEEN old.atMs - 900000 AND old.atMs + 900000), 0)
    WHERE quarter = old.atMs / 900000 AND model = old.model;
    DELETE FROM usage_quarters WHERE quarter = old.atMs / 900000 AND model = old.model
        AND calls <= 0;
END;
-- What the last open saw: the boot it ran in and each shard directory's mtime.
CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
"""
CHILD_COUNT_BATCH = 500  # ids per query (SQLite binds at most 999 by default)
# How many children a listed row has (what `thread/list {parentThreadId}` would list).
_CHILD_COUNT = (
    "(SELECT count(*) FROM threads AS child WHERE child.parentThreadId = threads.threadId "
    "AND child.archived = 0)"
)

_UPSERT = (
    f"INSERT INTO threads ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
    "ON CONFLICT (threadId) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c != "threadId")
)
# Reconcile must not replace a row that a live writer (maybe another process) refreshed
# after this scan stat'ed the same file.
_UPSERT_IF_NOT_NEWER = (
    _UPSERT + " WHERE NOT (threads.path = excluded.path AND threads.mtimeNs > excluded.mtimeNs)"
)


def under_folder(folder: str, table: str = "") -> tuple[str, list[str]]:
    """SQL: the thread (`table`, an alias with its dot, or none) is of the workspace
    folder, or runs in it or below. "Below" is a byte range [folder/, folder0) ('0'
    follows '/' in ASCII): exact and case-sensitive like the filesystem, with no LIKE
    wildcards to escape. For the listing and the search alike."""
    base = folder.rstrip("/")
    clause = (
        f"({table}workspaceFolder = ? OR {table}cwd = ? OR ({table}cwd >= ? AND {table}cwd < ?))"
    )
    return clause, [folder, folder, base + "/", base + "0"]


def _summary(row: Sequence[Any]) -> ThreadSummary:
    """A listing row as a summary; one that cannot be decoded is the index's fault."""
    return decoded(summary_of, row, json_text=True)


def _casefold_contains(haystack: str | None, needle: str) -> bool:
    """SQL `contains(text, needle)`: Unicode case-insensitive, unlike SQLite's ASCII LIKE."""
    return haystack is not None and needle in haystack.casefold()


def _row_values(
    summary: ThreadSummary, path: Path, stat: os.stat_result, mark: LineMark | None
) -> tuple[Any, ...]:
    values: list[Any] = []
    for name in _FIELDS:
        value = getattr(summary, name)
        if name == "updatedAt":
            value = value or ""
        elif name == "archived":
            value = int(value)
        elif name in JSON_FIELDS and value is not None:
            value = orjson.dumps(value).decode()
        values.append(value)
    if mark is None:
        return (*values, str(path), stat.st_size, stat.st_mtime_ns, None, None)
    return (*values, str(path), mark.end, stat.st_mtime_ns, mark.start, mark.sha)


_USAGE_INSERT = (
    "INSERT INTO usage (threadId, seq, atMs, model, input, output, cacheRead, cacheWrite, "
    "usd, priced) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (threadId, seq) DO NOTHING"
)


def _usage_rows_in(path: Path) -> list[UsageRow]:
    """The usage rows of a thread file's cost items, a line at a time: only a line that
    names `cost` is parsed (a live thread may be large; reading it whole to summarize it
    held the file and its items at once: tests/security/test_ws_memory.py)."""
    rows: list[UsageRow] = []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as lines:
            for line in lines:
                if b'"cost"' not in line:
                    continue
                try:
                    item = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # a torn tail or a bad line: the summary skips it too
                if isinstance(item, dict) and counted_cost(item):
                    row = usage_row(item)
                    if row is not None:
                        rows.append(row)
    except OSError:
        return []
    return rows


def _write_usage(conn: sqlite3.Connection, summaries: Sequence[ThreadSummary]) -> None:
    """The model calls the summaries folded in since they were last written (inside the
    caller's transaction), keyed by seq: a call written again (a file read again from its
    start, a row another process wrote first) changes nothing. Never a delete here: a
    summary read from the file may be older than rows a writer elsewhere has written
    since; a thread's rows go with its row (the trigger)."""
    for summary in summaries:
        rows = summary.take_usage()
        if rows:
            thread_id = summary.threadId
            conn.executemany(_USAGE_INSERT, [(thread_id, *row) for row in rows])


P = ParamSpec("P")
T = TypeVar("T")
Params = list[Any]


def _typed(method: Callable[P, T]) -> Callable[P, T]:
    """SQLite's failures as the typed error clients get, naming the index (a full disk is
    StorageFull): the store's one mapping of them. The index is a cache: an error that
    says its contents are wrong (restore/home/caches.py: damaged pages, a constraint its
    triggers break, another version's schema, a row that cannot be decoded) sets it aside,
    and the call is made again on the index rebuilt from the thread files. Only an index
    that fails again at once (rebuilt, and still failing: not the file's fault) reaches
    the client, naming the mend."""

    @functools.wraps(method)
    def typed(*args: P.args, **kwargs: P.kwargs) -> T:
        index: ThreadIndex = args[0]  # type: ignore[assignment]
        for attempt in (1, 2):
            try:
                return method(*args, **kwargs)
            except Exception as exc:
                fault = content_fault(exc)
                if fault is None and type(exc).__module__ != "sqlite3":
                    raise
                if fault is not None and attempt == 1:
                    index._start_over(fault)
                    continue
                if attempt == 1 and index._replaced():
                    continue  # another process rebuilt or set it aside under this call
                where = str(index._layout.index_path)
                name = getattr(exc, "sqlite_errorname", "")
                hint = f"; {REBUILD_HINT}" if fault is not None else ""
                full = name == "SQLITE_FULL"  # "disk is full"
                raise storage_failure(f"{where}: {exc}{hint}", full=full, path=where) from exc
        raise AssertionError("unreachable")

    return typed


class _Corrupt(Exception):
    """The index file exists but is not a usable index of this schema version."""


class ThreadIndex:
    """One row per thread for fast, filtered, keyset-paged listing.

    Call from one thread at a time (the server's worker); `ensure_ready` is additionally
    locked so a background rebuild and a first request cannot both open the db.
    """

    SCHEMA_VERSION = 9  # 2: costUsd, 3: origin, 4: lastLineStart/lastLineSha, 5: parents, 6: meta
    # 7: the search triggers of search version 2 (an UPSERT after a search no longer fails)
    # 8: session keys and reset links (sessionKey, previousThreadId, nextThreadId, resetReason)
    # 9: usage (one row per model call) and usage_quarters (their sums), restore/usage
    """An index of another version is rebuilt from the thread files (they hold every
    field), like a corrupt one: that is its migration."""

    def __init__(
        self,
        layout: Layout,
        read_summary: SummaryReader,
        *,
        in_memory: bool = False,
        live: LiveRows | None = None,
    ) -> None:
        self._layout = layout
        self._read_summary = read_summary
        self._in_memory = in_memory
        """For a read-only home: the index lives in memory, seeded from the file on disk
        when there is a usable one, and reconciled against the thread files like any other."""
        self._live = live or dict
        self.files_read = 0  # files summarized from disk so far (sessiond/debug reports it)
        self._conn: sqlite3.Connection | None = None
        self._file: tuple[int, int] | None = None  # the index file it is open on
        self._seed = True  # an index in memory starts from the file's rows (not once damaged)
        self._open_lock = threading.Lock()

    # -- opening, rebuild, reconcile -------------------------------------------------------

    @_typed
    def ensure_ready(self, progress: Progress | None = None) -> str:
        """Open the index on first use: "opened", "rebuilt", or "ready" if already open."""
        with self._open_lock:
            if self._conn is not None:
                if self._in_memory or self._still_open_on(self._layout.index_path):
                    return "ready"
                self._close()  # set aside or rebuilt by another process: open the new one
            path = self._layout.index_path
            foreign = any(not_regular(path.with_name(path.name + end)) for end in SQLITE_FILES)
            if self._in_memory:
                # Something else where the index belongs (a FIFO would block SQLite): built
                # from the thread files alone, as for a missing index.
                conn = self._memory_copy(path, seed=self._seed and not foreign)
                try:
                    self._reconcile(conn, progress)
                except BaseException:
                    conn.close()
                    raise
                self._conn = conn
                return "built in memory (read-only data directory)"
            if foreign:
                set_aside(path, "not a regular file")
            if path.exists() and self._opened(path, progress):
                return "opened"
            with self._building():
                # Another process may have built it while this one waited: opened, then.
                if path.exists() and self._opened(path, progress):
                    return "opened"
                found = marks.probe(self._layout)
                self._rebuild(path, progress)
                found.clear()
                conn = self._configured(self._connect(path))
                self._conn, self._file = conn, self._identity(conn, path)
            return "rebuilt"

    def _opened(self, path: Path, progress: Progress | None) -> bool:
        """The index at `path` opened and caught up (False: not usable, set aside)."""
        try:
            conn = self._open_existing(path)
            identity = self._identity(conn, path)
            conn = self._catch_up(conn, path, progress)
        except _Corrupt:
            return False
        self._conn, self._file = conn, identity
        return True

    @contextlib.contextmanager
    def _building(self) -> Iterator[None]:
        """One build of the index at a time across processes: two at once would each
        delete the WAL the other's connection was writing (SQLite's "disk I/O error")."""
        lock, home = self._layout.index_lock_path, self._layout.home
        if not home.is_dir():  # made by the first request (home/state.py), never here
            where = str(home)
            raise storage_failure(
                f"{where} is gone (was the data directory removed?): the index is not built "
                "anew in its place. Restart sessiond, or put the directory back",
                path=where,
                deleted=True,
            )
        private_dirs(lock.parent)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            # locks/ made read-only: the folder itself is the lock (a listing never fails
            # for want of a lock file; every process that cannot write it takes the same).
            fd = os.open(lock.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    @_typed
    def rebuild(self, progress: Progress | None = None) -> str:
        """Build the index again from the thread files, whatever its state (`sessiond
        doctor --rebuild-index`): the old file is removed, not kept, since nothing was
        wrong with it that anyone reported."""
        with self._open_lock:
            self._close()
            if not self._in_memory:
                for suffix in SQLITE_FILES:
                    path = self._layout.index_path
                    path.with_name(path.name + suffix).unlink(missing_ok=True)
            self._seed = False
        return self.ensure_ready(progress)

    @staticmethod
    def _identity(conn: sqlite3.Connection, path: Path) -> tuple[int, int]:
        """The open file's device and inode, taken from the path just opened: a rebuild
        elsewhere replaces the file, and a connection left on the old one would write rows
        nobody reads again."""
        try:
            found = os.stat(path)
        except OSError:
            conn.close()
            raise
        return found.st_dev, found.st_ino

    def _replaced(self) -> bool:
        """The open index is no longer the file at its path (another process rebuilt it or
        set it aside): closed, so the next call opens the file there now."""
        with self._open_lock:
            if self._conn is None or self._in_memory:
                return False
            if self._still_open_on(self._layout.index_path):
                return False
            self._close()
            return True

    def _still_open_on(self, path: Path) -> bool:
        try:
            found = os.stat(path)
        except OSError:
            return False
        return (found.st_dev, found.st_ino) == self._file

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = self._file = None

    def _start_over(self, fault: str) -> None:
        """A damaged index found on use: closed and set aside (kept for a bug report); the
        next use rebuilds it from the thread files (in memory: from the files alone)."""
        with self._open_lock:
            self._close()
            if self._in_memory:
                logger.warning(
                    "the thread index in memory was damaged (%s): rebuilding it "
                    "from the thread files",
                    fault,
                )
                self._seed = False
            else:
                set_aside(self._layout.index_path, fault)

    def _memory_copy(self, path: Path, *, seed: bool = True) -> sqlite3.Connection:
        """An index in memory, copied from `path` when that is a usable index of this schema
        (and `seed`).

        The file is opened `immutable=1`: on read-only media SQLite can create neither a
        lock nor the WAL's `-shm`, and a plain read-only open of a WAL database fails. Rows
        only in the WAL are not seen; reconcile re-reads their files, as for any stale row.
        """
        import sqlite3

        conn = self._connect(":memory:")
        try:
            if seed:
                uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
                source = sqlite3.connect(uri, uri=True)
                try:
                    if source.execute("PRAGMA user_version").fetchone()[0] == self.SCHEMA_VERSION:
                        source.backup(conn)
                finally:
                    source.close()
        except sqlite3.Error:
            pass  # missing or unusable: built from the files instead
        has_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'threads'"
        ).fetchone()
        if not has_table:
            conn.executescript(_SCHEMA)
        return conn

    @staticmethod
    def _connect(path: Path | str) -> sqlite3.Connection:
        import sqlite3

        if isinstance(path, Path):  # not ":memory:"
            create_file(path)  # 0600: SQLite gives its -wal and -shm files the same mode
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.create_function("contains", 2, _casefold_contains, deterministic=True)
        return conn

    @staticmethod
    def _configured(conn: sqlite3.Connection) -> sqlite3.Connection:
        """WAL lets several processes share the index; NORMAL is durable enough for a cache.
        The WAL is checkpointed when the server pauses (`checkpoint`), and by SQLite
        itself only past `WAL_BOUND_PAGES`; it is cut back to `WAL_KEPT_BYTES` after."""
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_BOUND_PAGES}")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_KEPT_BYTES}")
        return conn

    def _open_existing(self, path: Path, *, check: bool = False) -> sqlite3.Connection:
        """Connect and validate; raise _Corrupt (after moving garbage aside) if unusable.

        `check` reads every page (`quick_check`, O(index)): done after a reboot, when a
        damaged page is likeliest; otherwise damage shows as SQLite's error on use, and the
        index is set aside and rebuilt then (`_typed`)."""
        import sqlite3

        conn = self._connect(path)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            has_table = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'threads'"
            ).fetchone()
            # The listing table and its indexes only: the search tables beside it
            # (embedded/search.py) are a hundred times larger, and read only by a search.
            pragma = "PRAGMA quick_check(threads)" if has_table else "PRAGMA quick_check"
            healthy = not check or conn.execute(pragma).fetchone()[0] == "ok"
            if version == self.SCHEMA_VERSION and healthy and has_table:
                return self._configured(conn)
            conn.close()
            if not healthy:
                set_aside(path, "quick_check found damaged pages")
            raise _Corrupt
        except sqlite3.DatabaseError as exc:
            conn.close()
            # Busy, locked, I/O or permission errors say nothing about the file's contents:
            # moving a healthy index aside for them would only cost a rebuild, so re-raise.
            fault = content_fault(exc)
            if fault is None:
                raise
            set_aside(path, fault)
            raise _Corrupt from exc

    def _rebuild(self, path: Path, progress: Progress | None) -> None:
        """Summarize every file into a fresh db beside the index, then rename it into place.

        Building aside means another process never sees a half-built index (it would take
        the missing table for corruption), and a stale WAL is never replayed onto it.
        """
        private_dirs(path.parent)
        fresh = path.with_name(f"{path.name}.rebuild-{os.getpid()}")
        fresh.unlink(missing_ok=True)
        conn = self._connect(fresh)
        try:
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version = {self.SCHEMA_VERSION}")
            seen = self._seen()
            live = self._live()
            files: list[tuple[Path, bool, LineMark | None]] = [
                (Path(path), archived, None)
                for path, archived, _ in self._chosen_files()
                if path not in live
            ]
            self._write_live(conn, live)
            self._live_usage(conn, live)
            self._refresh(conn, files, _UPSERT, progress)
            self._remember(conn, seen)
        finally:
            conn.close()
        pause_point("index-build")  # built, not yet in place (tests/faults/test_index_heals.py)
        for suffix in ("-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        os.replace(fresh, path)

    def _seen(self) -> tuple[str | None, dict[str, int]]:
        """The boot and the shard directories' mtimes, taken before the files are read: a
        change made during the read shows as a change at the next open."""
        boot = boot_id()
        now = time.time_ns()
        times = self._layout.shard_times()
        return boot, {key: (-1 if ns > now - RACY_NS else ns) for key, ns in times.items()}

    @staticmethod
    def _remember(
        conn: sqlite3.Connection,
        seen: tuple[str | None, dict[str, int]],
        stored: dict[str, str] | None = None,
    ) -> None:
        """What this open saw, for the next one; not written when it is what `stored` says
        already (a write transaction is most of an unchanged first open's cost)."""
        boot, times = seen
        shards = orjson.dumps(times, option=orjson.OPT_SORT_KEYS).decode()
        wanted = {} if boot is None else {"boot": boot, "shards": shards}
        if stored is not None and stored == wanted:
            return
        with conn:
            conn.execute("BEGIN")
            conn.execute("DELETE FROM meta")
            if boot is not None:
                conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [("boot", boot), ("shards", shards)],
                )

    def _catch_up(
        self, conn: sqlite3.Connection, path: Path, progress: Progress | None
    ) -> sqlite3.Connection:
        """The first open in a process: read again only what may have changed behind the
        index (module docstring), or every file after a reboot or without a boot id."""
        held = [conn]  # the connection to close if this fails (reopened below after a reboot)
        try:
            return self._caught_up(held, path, progress)
        except BaseException:
            held[0].close()
            raise

    def _caught_up(
        self, held: list[sqlite3.Connection], path: Path, progress: Progress | None
    ) -> sqlite3.Connection:
        conn = held[0]
        found = marks.probe(self._layout)
        seen = self._seen()
        stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if seen[0] is None or stored.get("boot") != seen[0] or "shards" not in stored:
            conn.close()
            conn = held[0] = self._open_existing(path, check=True)
            self._reconcile(conn, progress)
        else:
            before: dict[str, int] = decoded(orjson.loads, stored["shards"])
            now = seen[1]
            # -1: changed too recently to be trusted last time, so read again now.
            moved = [
                key
                for key in before.keys() | now.keys()
                if before.get(key, -1) == -1 or before.get(key) != now.get(key)
            ]
            shards = {key.partition("/")[2] for key in moved}
            shards.update(thread_id[:2] for thread_id in found.thread_ids)
            if shards:
                self._reconcile(conn, progress, shards)
        self._remember(conn, seen, stored)
        found.clear()
        return conn

    def _reconcile(
        self,
        conn: sqlite3.Connection,
        progress: Progress | None,
        shards: set[str] | None = None,
    ) -> None:
        """Bring rows in line with the files (of `shards` only, if given): read new files,
        the new bytes of grown ones (whole changed ones otherwise), drop vanished ones;
        take live rows as they are."""
        columns = "SELECT path, size, mtimeNs, lastLineStart, lastLineSha FROM threads"
        if shards is None:
            rows = conn.execute(columns).fetchall()
        else:  # by the primary key: a shard is its threads' first two characters
            rows = [
                row
                for shard in sorted(shards)
                for row in conn.execute(
                    f"{columns} WHERE threadId >= ? AND threadId < ?", (shard, shard + "\U0010ffff")
                )
            ]
        stored = {row[0]: row[1:] for row in rows}
        on_disk = self._chosen_files(shards)
        present = {path for path, _, _ in on_disk}
        live = self._live()
        with conn:
            conn.execute("BEGIN")
            conn.executemany(
                "DELETE FROM threads WHERE path = ?",
                [(path,) for path in stored if path not in present],
            )
        self._write_live(conn, live)
        changed: list[tuple[Path, bool, LineMark | None]] = []
        for path, archived, stat in on_disk:
            row = stored.get(path)
            if path in live or (row is not None and row[:2] == (stat.st_size, stat.st_mtime_ns)):
                continue
            grown = row is not None and row[2] is not None and stat.st_size >= row[0]
            mark = LineMark(row[2], row[0], row[3]) if grown and row is not None else None
            changed.append((Path(path), archived, mark))
        self._refresh(conn, changed, _UPSERT_IF_NOT_NEWER, progress)

    def _write_live(self, conn: sqlite3.Connection, live: dict[str, Indexed]) -> None:
        if not live:
            return
        rows, summaries = [], []
        for path, (summary, mark) in live.items():
            try:
                rows.append(_row_values(summary, Path(path), os.stat(path), mark))
            except FileNotFoundError:
                continue
            summaries.append(summary)
        with conn:
            conn.execute("BEGIN")
            conn.executemany(_UPSERT, rows)
            _write_usage(conn, summaries)

    def _live_usage(self, conn: sqlite3.Connection, live: dict[str, Indexed]) -> None:
        """A fresh index's usage rows of the files this process writes: their writers
        hold only the calls since their row was last written, so the files are read for
        the rest (what a writer appends meanwhile is written with its next row)."""
        for path in live:
            rows = _usage_rows_in(Path(path))
            if rows:
                with conn:
                    conn.execute("BEGIN")
                    conn.executemany(_USAGE_INSERT, [(Path(path).stem, *row) for row in rows])

    def _chosen_files(
        self, shards: set[str] | None = None
    ) -> list[tuple[str, bool, os.stat_result]]:
        """Thread files on disk, one per thread: the live copy wins, as in `Layout.locate`."""
        files = self._layout.scan_thread_files(shards)
        if not any(archived for _, archived, _ in files):
            return files
        live = {os.path.basename(path) for path, archived, _ in files if not archived}
        return [entry for entry in files if not (entry[1] and os.path.basename(entry[0]) in live)]

    def _refresh(
        self,
        conn: sqlite3.Connection,
        files: list[tuple[Path, bool, LineMark | None]],
        upsert_sql: str,
        progress: Progress | None,
    ) -> None:
        """Summarize files (from their rows' last line, when given) and write their rows in
        short batches (other writers stay unblocked)."""
        total = len(files)
        if progress:
            progress(0, total)
        for start in range(0, total, _BATCH):
            batch = files[start : start + _BATCH]
            rows = list(self._summarized(conn, batch))
            written = {path for _, path, _ in rows}
            with conn:
                conn.execute("BEGIN")
                conn.executemany(upsert_sql, [values for values, _, _ in rows])
                _write_usage(conn, [summary for _, _, summary in rows])
                # A file that changed into something unreadable no longer vouches for its row.
                conn.executemany(
                    "DELETE FROM threads WHERE path = ?",
                    [(str(path),) for path, _, _ in batch if str(path) not in written],
                )
            if progress:
                progress(start + len(batch), total)
        if progress and total == 0:
            progress(0, 0)

    def _summarized(
        self, conn: sqlite3.Connection, files: list[tuple[Path, bool, LineMark | None]]
    ) -> Iterator[tuple[tuple[Any, ...], str, ThreadSummary]]:
        for path, archived, mark in files:
            try:
                stat = path.stat()  # before reading: an append during the read shows as a change
            except FileNotFoundError:
                continue
            since = None
            if mark is not None:
                row = conn.execute(
                    f"SELECT {', '.join(_FIELDS)} FROM threads WHERE path = ?", (str(path),)
                ).fetchone()
                since = None if row is None else (_summary(row), mark)
            self.files_read += 1
            found = self._read_summary(path, archived, since)
            if found is not None:
                summary, covered = found
                yield _row_values(summary, path, stat, covered), str(path), summary

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    @property
    def path(self) -> Path:
        return self._layout.index_path

    @property
    def in_memory(self) -> bool:
        """The index lives in this process's memory (a read-only data directory): its one
        connection is the only way to it."""
        return self._in_memory

    def connection(self) -> sqlite3.Connection:
        """The open connection (the search tables share the file: embedded/search.py)."""
        return self._db()

    def connect_beside(self) -> sqlite3.Connection:
        """Another connection to the index file, as the store's is configured, for a thread
        of its own (the search's: embedded/search.py). WAL: its reads and the store's
        writes do not wait for each other. The file must exist (`ensure_ready`)."""
        return connect_beside(self.path)

    def _db(self) -> sqlite3.Connection:
        """The open connection, opening the index on first use."""
        self.ensure_ready()
        assert self._conn is not None
        return self._conn

    # -- rows --------------------------------------------------------------------------------

    def upsert(self, summary: ThreadSummary, path: Path, mark: LineMark | None = None) -> None:
        """Store a writer's current row, with what reconcile compares: the file's size and
        mtime, and the last line the row covers (`mark`; without it, a change is read whole)."""
        self.upsert_many([(summary, path, mark)])

    @_typed
    def upsert_many(self, rows: list[tuple[ThreadSummary, Path, LineMark | None]]) -> None:
        """Several writers' rows in one transaction (the service batches record traffic)."""
        values, summaries = [], []
        for summary, path, mark in rows:
            try:
                values.append(_row_values(summary, path, path.stat(), mark))
            except FileNotFoundError:
                continue  # moved or deleted since: its next row (or reconcile) says where
            summaries.append(summary)
        conn = self._db()
        with conn:
            conn.execute("BEGIN")
            conn.executemany(_UPSERT, values)
            _write_usage(conn, summaries)

    @_typed
    def refresh(self, rows: list[tuple[ThreadSummary, Path, os.stat_result]]) -> None:
        """Rows read from files another process writes: each replaces the stored row
        unless that one is newer (its writer got there first), as reconcile does."""
        conn = self._db()
        with conn:
            conn.execute("BEGIN")
            conn.executemany(
                _UPSERT_IF_NOT_NEWER,
                [_row_values(summary, path, stat, None) for summary, path, stat in rows],
            )
            _write_usage(conn, [summary for summary, _, _ in rows])

    @_typed
    def remove(self, thread_id: str) -> None:
        conn = self._db()
        with conn:
            conn.execute("BEGIN")
            conn.execute("DELETE FROM threads WHERE threadId = ?", (thread_id,))

    @_typed
    def get(self, thread_id: str) -> ThreadSummary | None:
        row = (
            self._db()
            .execute(f"SELECT {', '.join(_FIELDS)} FROM threads WHERE threadId = ?", (thread_id,))
            .fetchone()
        )
        return None if row is None else _summary(row)

    @_typed
    def list(self, filters: ListFilters = FIRST_PAGE) -> Listing:
        """One page, newest first; filters apply before paging; nextCursor only if more exist.
        Top-level threads only, or the children of `parent_thread_id`; with `session_key`
        (a prefix) sub-agents' threads too."""
        limit = max(1, min(MAX_LIMIT, filters.limit))
        sql, params = self._list_query(filters, limit)
        rows = self._db().execute(sql, params).fetchall()
        page = [_summary(row) for row in rows[:limit]]
        if len(rows) <= limit:
            return page, None
        last = page[-1]
        return page, encode_cursor(last.updatedAt or "", last.threadId)

    @staticmethod
    def _list_query(filters: ListFilters, limit: int) -> tuple[str, Params]:
        """The page's SQL: every filter in WHERE, keyset after the cursor, one row past `limit`."""
        cwd, workspace_folder, search = filters.cwd, filters.workspace_folder, filters.search
        session_key, parent_thread_id = filters.session_key, filters.parent_thread_id
        where = ["archived = ?"]
        params: Params = [int(filters.archived)]
        if session_key is not None:  # a prefix: a range of threads_by_key
            low, high = key_range(session_key)
            where.append("sessionKey IS NOT NULL AND sessionKey >= ?")
            params.append(low)
            if high is not None:
                where.append("sessionKey < ?")
                params.append(high)
        if parent_thread_id is None and session_key is None:
            # Top-level threads: a child whose parent is not here is one.
            where.append(
                "(parentThreadId IS NULL OR NOT EXISTS "
                "(SELECT 1 FROM threads AS p WHERE p.threadId = threads.parentThreadId))"
            )
        elif parent_thread_id is not None:
            where.append("parentThreadId = ?")
            params.append(parent_thread_id)
        if cwd is not None:
            where.append("cwd = ?")
            params.append(cwd)
        if workspace_folder is not None:
            clause, values = under_folder(workspace_folder)
            where.append(clause)
            params += values
        if search:
            where.append("(contains(title, ?) OR contains(preview, ?))")
            params += [search.casefold()] * 2
        if filters.cursor is not None:
            where.append("(updatedAt, threadId) < (?, ?)")
            params += decode_cursor(filters.cursor)
        sql = (
            f"SELECT {', '.join(_FIELDS)}, {_CHILD_COUNT} FROM threads "
            f"WHERE {' AND '.join(where)} ORDER BY updatedAt DESC, threadId DESC LIMIT ?"
        )
        return sql, [*params, limit + 1]

    @_typed
    def key_threads(self, key: str) -> KeyThreads:
        """The key's current thread, and its replaced threads whose row does not name their
        successor yet (api.Index.key_threads); two lookups in `threads_by_key`."""
        conn = self._db()
        fields = ", ".join(f"t.{name}" for name in _FIELDS)
        current = conn.execute(
            f"SELECT {fields} FROM threads AS t WHERE t.sessionKey IS NOT NULL "
            "AND t.sessionKey = ? AND t.archived = 0 AND t.nextThreadId IS NULL "
            "AND NOT EXISTS (SELECT 1 FROM threads AS n WHERE n.previousThreadId = t.threadId) "
            "ORDER BY t.updatedAt DESC, t.threadId DESC LIMIT 1",
            (key,),
        ).fetchone()
        unlinked = conn.execute(
            f"SELECT p.threadId, {fields} FROM threads AS t "
            "JOIN threads AS p ON p.threadId = t.previousThreadId "
            "WHERE t.sessionKey IS NOT NULL AND t.sessionKey = ? "
            "AND t.previousThreadId IS NOT NULL AND p.nextThreadId IS NULL",
            (key,),
        ).fetchall()
        return (
            None if current is None else _summary(current),
            [(row[0], _summary(row[1:])) for row in unlinked],
        )

    @_typed
    def usage(
        self, since_ms: int | None, until_ms: int | None, grain_ms: int, *, threads: bool
    ) -> Usage:
        """The model calls in [since_ms, until_ms), summed per model and `grain_ms` of
        time (and per thread, with `threads`), and the threads they are of
        (api.Index.usage). A quarter hour of every thread's: `usage_quarters`, as kept."""
        return usage_of(self._db(), since_ms, until_ms, grain_ms, threads=threads)

    def usage_apart(self) -> UsageBeside | None:
        """A connection of its own to the index file, for a reader thread (WAL: it and
        the store's writes do not wait for each other); None for an index in memory,
        which only its one connection reaches."""
        return None if self._in_memory else UsageBeside(self.path)

    @_typed
    def count(self) -> int:
        return int(self._db().execute("SELECT count(*) FROM threads").fetchone()[0])

    @_typed
    def with_prefix(self, prefix: str, limit: int) -> Rows:
        rows = self._db().execute(
            f"SELECT {', '.join(_FIELDS)} FROM threads WHERE threadId >= ? AND threadId < ? "
            "ORDER BY threadId LIMIT ?",
            (prefix, prefix_end(prefix), limit),
        )
        return [_summary(row) for row in rows]

    @_typed
    def child_counts(self, thread_ids: Sequence[str]) -> dict[str, int]:
        """Each thread's `childCount`: its children that `thread/list {parentThreadId}`
        lists (unarchived), from `threads_by_parent`."""
        counts = dict.fromkeys(thread_ids, 0)
        ids = list(counts)
        for start in range(0, len(ids), CHILD_COUNT_BATCH):
            batch = ids[start : start + CHILD_COUNT_BATCH]
            rows = self._db().execute(
                "SELECT parentThreadId, count(*) FROM threads WHERE archived = 0 AND "
                f"parentThreadId IN ({', '.join('?' * len(batch))}) GROUP BY parentThreadId",
                batch,
            )
            counts.update((parent, int(n)) for parent, n in rows)
        return counts

    def close(self) -> None:
        """Close the connection; a later call opens (and reconciles) again."""
        with self._open_lock:
            self._close()

    def checkpoint(self) -> None:
        """Copy the WAL into the index file now (PASSIVE: no reader waited for), when the
        host is idle: a request no longer pays for it (~4 MB written and synced every
        ~200 writes at SQLite's default bound). Nothing when the index is not open or
        the WAL holds nothing new. Never raises: the index is derived."""
        with self._open_lock:
            conn = self._conn
            if conn is not None:
                derived("index checkpoint", conn.execute, "PRAGMA wal_checkpoint(PASSIVE)")


class UsageBeside:
    """`usage` over a connection of its own, opened for the one report and closed after
    it; SQLite's failures typed as the store's are (a storage failure naming the index)."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def usage(
        self, since_ms: int | None, until_ms: int | None, grain_ms: int, *, threads: bool
    ) -> Usage:
        import sqlite3

        try:
            conn = connect_beside(self._path)
            try:
                return usage_of(conn, since_ms, until_ms, grain_ms, threads=threads)
            finally:
                conn.close()
        except sqlite3.Error as exc:
            where = str(self._path)
            raise storage_failure(f"{where}: {exc}", path=where) from exc


def connect_beside(path: Path) -> sqlite3.Connection:
    """A connection to the index file at `path`, configured as the store's own is: for a
    search beside the store, on a thread or in a process of its own
    (embedded/search_child.py)."""
    return ThreadIndex._configured(ThreadIndex._connect(path))
