"""Full-text search in the embedded store: SQLite FTS5 tables beside the listing rows, in
the index file, derived from the thread files like the rest of it.

Why FTS5 with `unicode61` (and prefix indexes for `pars*`) rather than `trigram`: words,
phrases and prefixes are what the query language has (restore/search/query.py), and they
are what PostgreSQL's tsvector gives the shared store, so both answer the same; trigram
matches substrings, which no query here asks for, and its index is about three times the
size (docs/search.md has the measurement).

Kept current without a word from the write path: triggers on the listing rows mark a
thread dirty whenever its row covers more (or other) bytes, whoever wrote them (this
process's writers, another process through the watcher's refresh, an import, a reconcile);
a search first reads the dirty threads' new lines, from where their coverage ends
(verified by its last line, `LineMark`), within a time budget: what is left is answered
as `partial`. Never built at startup: the tables are created by the first search, which
marks every thread dirty; threads are indexed oldest first, so doc ids follow recency.

Order: bm25, ties by recency, for a query matching fewer than `WINDOW` records; one
matching more is answered newest first, a window of `WINDOW` matches at a time (pages walk
them in turn: none lost, none repeated). bm25 scores every match it orders, and before
its first score counts every match of each term in the whole index: a word in most of a
million records costs 25 ms a page that way; among thousands of matches, the newest is
what a person looks for.

Its own connection to the index file, so a server runs it beside the store thread
(server/app.py `run_search`), in a process of its own (`run_apart`:
embedded/search_child.py): WAL lets its reads and the store's writes go on together,
and its catch-up's write transactions are short (`_BATCH_SECONDS`). What
is left on the store thread is the search's first step, writing this process's pending
listing rows (restore/service/search.py `ask`). Where Python's sqlite3 would step once a
row (inserts, a window's doc ids), one statement does it all: every step lets the GIL go
and takes it back, and each time it does, a recording thread waits.

A deleted thread's row takes its documents with it (trigger); an archived one's are
filtered by its row. Deleting the index file deletes all of this, and the next search
builds it again from the files.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from restore.faults import pause_point
from restore.home.caches import REBUILD_HINT, content_fault, decoded, set_aside
from restore.search.cancel import Cancel, Cancelled
from restore.search.query import Query
from restore.search.text import searchable
from restore.stores.api import Progress, SearchFilters, SearchHit, SearchPage, storage_failure
from restore.stores.cursors import (
    MAX_LIMIT,
    ROW_FIELDS,
    decode_search_cursor,
    encode_search_cursor,
    summary_of,
)
from restore.stores.embedded.files import open_thread_file
from restore.stores.embedded.index import under_folder
from restore.stores.embedded.jsonl import LineMark, parse_bytes

if TYPE_CHECKING:
    import sqlite3

    from restore.stores.embedded.search_child import SearchChild

logger = logging.getLogger(__name__)


class IndexFile(Protocol):
    """What a search needs of the listing index (`ThreadIndex`; in a search process of
    its own, the file alone: embedded/search_child.py)."""

    @property
    def path(self) -> Path: ...

    @property
    def in_memory(self) -> bool: ...

    def connection(self) -> sqlite3.Connection: ...

    def connect_beside(self) -> sqlite3.Connection: ...


SEARCH_VERSION = 3
"""1: triggers that wrote `INSERT OR IGNORE`, which an UPSERT on the listing rows turns
into a UNIQUE failure (SQLite applies the outer statement's conflict policy inside a
trigger): the second write to a thread after a search failed. 2: no conflict possible.
3: tool output and tool calls' arguments are documents too (restore/search/text.py).
Tables of another version are dropped and built again by the first search (the documents
of an earlier version lack what this one indexes)."""
_BATCH_SECONDS = 0.1  # one write transaction at most this long: other processes' rows wait
_BATCH_THREADS = 200

# A thread is marked dirty only where it is not yet: never a conflict, so the listing rows'
# UPSERT (whose conflict policy SQLite applies inside its triggers) cannot fail here.
_MARK_DIRTY = """INSERT INTO search_dirty SELECT {row}.threadId
        WHERE NOT EXISTS (SELECT 1 FROM search_dirty WHERE threadId = {row}.threadId);"""
_TRIGGERS = f"""
CREATE TRIGGER search_thread_added AFTER INSERT ON threads BEGIN
    {_MARK_DIRTY.format(row="new")}
END;
CREATE TRIGGER search_thread_changed AFTER UPDATE ON threads
WHEN new.size IS NOT old.size OR new.path IS NOT old.path
  OR new.lastLineSha IS NOT old.lastLineSha BEGIN
    {_MARK_DIRTY.format(row="new")}
END;
CREATE TRIGGER search_thread_removed AFTER DELETE ON threads BEGIN
    DELETE FROM search_docs WHERE threadId = old.threadId;
    DELETE FROM search_covered WHERE threadId = old.threadId;
    DELETE FROM search_dirty WHERE threadId = old.threadId;
END;
"""
_SCHEMA = f"""
CREATE TABLE search_meta (version INTEGER NOT NULL);
INSERT INTO search_meta VALUES ({SEARCH_VERSION});
CREATE TABLE search_docs (
    id INTEGER PRIMARY KEY,
    threadId TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    ts TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX search_docs_by_thread ON search_docs (threadId, seq);
CREATE VIRTUAL TABLE search_fts USING fts5(
    text, content = 'search_docs', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 0', prefix = '2 3'
);
CREATE TRIGGER search_docs_added AFTER INSERT ON search_docs BEGIN
    INSERT INTO search_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER search_docs_removed AFTER DELETE ON search_docs BEGIN
    INSERT INTO search_fts (search_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
-- How much of each thread's file its documents cover, and that range's last line.
CREATE TABLE search_covered (
    threadId TEXT PRIMARY KEY NOT NULL,
    size INTEGER NOT NULL,
    lineStart INTEGER,
    lineEnd INTEGER,
    lineSha TEXT
);
-- Threads whose listing row changed since their documents were read.
CREATE TABLE search_dirty (threadId TEXT PRIMARY KEY NOT NULL);
{_TRIGGERS}
INSERT INTO search_dirty SELECT threadId FROM threads;
"""
_DROP_TRIGGERS = """
DROP TRIGGER IF EXISTS search_thread_added;
DROP TRIGGER IF EXISTS search_thread_changed;
DROP TRIGGER IF EXISTS search_thread_removed;
"""
_DROP_TABLES = """
DROP TABLE IF EXISTS search_fts;
DROP TABLE IF EXISTS search_docs;
DROP TABLE IF EXISTS search_covered;
DROP TABLE IF EXISTS search_dirty;
DROP TABLE IF EXISTS search_meta;
"""
_DROP = _DROP_TRIGGERS + _DROP_TABLES
_CURSOR_KINDS = (int, bool, float, str, int, bool)  # window top, keyed?, bm25, ts, doc id,
# newest first?
WINDOW = 2000
"""Matches ranked together: the newest `WINDOW` (by doc id), then the next older ones."""
CANCEL_STEPS = 20_000
"""SQLite program steps between two looks at a search's cancel while its query runs (well
under a millisecond); the catch-up looks between its short transactions."""


class ThreadSearch:
    """The embedded store's `SearchIndex`, over a connection of its own to the index file
    (one search at a time, on any thread: a server's search thread, a command), or over
    the listing index's own connection when the index lives in memory (on the store
    thread then: a read-only data directory)."""

    def __init__(self, index: IndexFile) -> None:
        self._index = index
        self._conn: sqlite3.Connection | None = None
        self._file: tuple[int, int] | None = None  # the index file it is open on
        self._child: SearchChild | None = None
        self._apart = False

    def run_apart(self) -> None:
        """A long-running server's: each search in a process of its own
        (embedded/search_child.py), started by the first one; not for an index in memory.
        Its module (and multiprocessing's) is imported then too: a server that never
        searches never pays for it."""
        self._apart = not self._index.in_memory

    @property
    def beside_store(self) -> bool:
        """Its own connection, unless the index is in memory (module docstring)."""
        return not self._index.in_memory

    def close(self) -> None:
        """Close its connection, and its process (a later search opens them again)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._child is not None:
            self._child.close()

    def _connection(self) -> sqlite3.Connection:
        """Its connection, opened again when the index file was replaced since (rebuilt,
        or set aside as damaged: `ThreadIndex`), so a search never reads a file the
        listing left."""
        if self._index.in_memory:
            return self._index.connection()
        found = os.stat(self._index.path)  # before connecting: a replacement meanwhile
        file = (found.st_dev, found.st_ino)  # is seen by the next search
        if self._conn is None or self._file != file:
            self.close()
            self._conn = self._index.connect_beside()
            self._file = file
        return self._conn

    def search(
        self,
        query: Query,
        filters: SearchFilters,
        *,
        cursor: str | None = None,
        limit: int = 20,
        progress: Progress | None = None,
        budget: float | None = None,
        cancel: Cancel | None = None,
    ) -> SearchPage:
        if self._child is None and self._apart:
            from restore.stores.embedded.search_child import SearchChild

            self._child = SearchChild(self._index.path)
        if self._child is not None:
            from restore.stores.embedded.search_child import SearchChildGone

            try:
                return self._child.search(
                    query,
                    filters,
                    cursor=cursor,
                    limit=limit,
                    progress=progress,
                    budget=budget,
                    cancel=cancel,
                )
            except SearchChildGone as exc:  # this one here; the next starts it again
                logger.warning("%s; searching in the server's own process", exc)
        pause_point("thread-search")  # beside the store thread (tests/test_search_server.py)
        where = str(self._index.path)
        for attempt in (1, 2):
            conn = None
            try:
                conn = self._connection()
                built = self._ensure_tables(conn)
                complete = self.catch_up(conn, progress, budget, building=built, cancel=cancel)
                if cancel is not None:  # the query only reads: SQLite may stop it anywhere
                    conn.set_progress_handler(lambda: int(cancel.cancelled), CANCEL_STEPS)
                return self._page(conn, query, filters, cursor, limit, partial=not complete)
            except Exception as exc:
                if cancel is not None and cancel.cancelled and not isinstance(exc, Cancelled):
                    raise Cancelled("the client cancelled the search") from exc  # interrupted
                if isinstance(exc, OSError) and conn is None:  # the index file gone meanwhile
                    raise storage_failure(
                        f"{where}: {exc.strerror or exc}", path=where, retryable=True
                    ) from exc
                fault = content_fault(exc)
                if fault is not None and attempt == 1 and conn is not None:
                    self._start_over(conn, fault)
                    continue
                if fault is None and type(exc).__module__ != "sqlite3":
                    raise
                full = getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL"
                hint = f"; {REBUILD_HINT}" if fault is not None else ""
                raise storage_failure(f"{where}: {exc}{hint}", full=full, path=where) from exc
            finally:
                if cancel is not None and conn is not None:
                    conn.set_progress_handler(None, 0)
        raise AssertionError("unreachable")

    def _start_over(self, conn: sqlite3.Connection, fault: str) -> None:
        """Damaged search tables are dropped, and the search made again builds them from
        the thread files. When not even that can be done (the whole file is damaged), the
        file is set aside and the search answered `retryable`: the request is made again
        on the listing index rebuilt from the files (the service's `search`, the server's
        handler)."""
        where = str(self._index.path)
        logger.warning(
            "the search index in %s was damaged (%s): building it again from the thread files",
            where,
            fault,
        )
        try:
            drop_tables(conn)
        except Exception as exc:
            if content_fault(exc) is None or self._index.in_memory:
                raise
            self.close()
            set_aside(self._index.path, fault)
            raise storage_failure(
                f"{where}: {fault}; set aside, and built again by the next request",
                path=where,
                retryable=True,
                setAside=True,
            ) from exc

    # --- the tables, kept current ----------------------------------------------------------

    @staticmethod
    def _ensure_tables(conn: sqlite3.Connection) -> bool:
        """Created by the first search (and again after the index file was rebuilt): True
        when made now (every thread is to be indexed)."""
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'search_meta'"
        ).fetchone()
        if found and conn.execute("SELECT version FROM search_meta").fetchone() == (
            SEARCH_VERSION,
        ):
            return False
        conn.execute("BEGIN IMMEDIATE")
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'search_meta'"
            ).fetchone()  # another process may have created them meanwhile
            current = found and conn.execute("SELECT version FROM search_meta").fetchone()
            built = bool(current != (SEARCH_VERSION,))
            if built:
                for statement in _statements(_DROP + _SCHEMA):
                    conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        return built

    def catch_up(
        self,
        conn: sqlite3.Connection,
        progress: Progress | None,
        budget: float | None,
        *,
        building: bool = False,
        cancel: Cancel | None = None,
    ) -> bool:
        """Index the new lines of every dirty thread, a short transaction at a time, until
        none is left (True) or `budget` seconds have passed (False: partial).

        `progress` hears of a build (`building`: the tables were made now) and of a
        catch-up longer than one short transaction; not of the few threads recorded since
        the last search, indexed in one: while records stream in and searches follow,
        that is every search, and each report is a notification to send."""
        deadline = None if budget is None else time.monotonic() + budget
        total = conn.execute("SELECT count(*) FROM search_dirty").fetchone()[0]
        if total == 0:
            return True
        done = 0
        report = progress if building or total > _BATCH_THREADS else None
        if report:
            report(0, total)
        while True:
            if cancel is not None:
                cancel.check()
            if deadline is not None and time.monotonic() >= deadline:
                if report:  # ends the report truthfully: this many were indexed now
                    report(done, done)
                return False
            conn.execute("BEGIN IMMEDIATE")  # read under the write lock: no two processes
            try:  # index the same lines
                batch = conn.execute(
                    "SELECT d.threadId, t.path, t.size, c.size, c.lineStart, c.lineEnd, "
                    "c.lineSha FROM search_dirty AS d "
                    "LEFT JOIN threads AS t ON t.threadId = d.threadId "
                    "LEFT JOIN search_covered AS c ON c.threadId = d.threadId "
                    "ORDER BY t.updatedAt LIMIT ?",  # older first: doc ids follow recency
                    (_BATCH_THREADS,),
                ).fetchall()
                ended = time.monotonic() + _BATCH_SECONDS
                handled = 0
                for row in batch:
                    self._read_thread(conn, *row)
                    handled += 1
                    if time.monotonic() >= ended:
                        break
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
            done += handled
            finished = len(batch) == handled and len(batch) < _BATCH_THREADS
            if report is None and not finished:
                report = progress  # more than one transaction: a wait worth showing
            if report:
                report(min(done, total), total)
            if finished:
                return True

    def _read_thread(
        self,
        conn: sqlite3.Connection,
        thread_id: str,
        path: str | None,
        size: int | None,
        covered: int | None,
        line_start: int | None,
        line_end: int | None,
        line_sha: str | None,
    ) -> None:
        conn.execute("DELETE FROM search_dirty WHERE threadId = ?", (thread_id,))
        if path is None or size is None:  # no row: no thread to search
            conn.execute("DELETE FROM search_docs WHERE threadId = ?", (thread_id,))
            conn.execute("DELETE FROM search_covered WHERE threadId = ?", (thread_id,))
            return
        try:
            fd = open_thread_file(Path(path), os.O_RDONLY, thread_id)
        except Exception:  # moved or gone since its row: its next row marks it again
            return
        try:
            start = 0
            if covered is not None:
                mark = (
                    LineMark(line_start, line_end, line_sha)
                    if line_start is not None and line_end is not None and line_sha
                    else None
                )
                if covered <= size and (covered == 0 or (mark is not None and mark.holds(fd))):
                    start = covered
                else:  # rewritten under us: read it again, whole
                    conn.execute("DELETE FROM search_docs WHERE threadId = ?", (thread_id,))
            if start >= size:
                return
            data = os.pread(fd, size - start, start)
            found = parse_bytes(data, base_offset=start)
            docs = []
            for item in found.items:
                hit = searchable(item)
                if hit is not None:
                    docs.append((thread_id, item["seq"], hit[0], str(item.get("ts") or ""), hit[1]))
            _insert(conn, docs)
            end = start + len(data)
            last = found.last_line_start
            new_mark = None if last is None else LineMark.of(fd, last, _line_end(data, start, last))
            conn.execute(
                "INSERT OR REPLACE INTO search_covered VALUES (?, ?, ?, ?, ?)",
                (
                    thread_id,
                    end,
                    new_mark.start if new_mark else line_start,
                    new_mark.end if new_mark else line_end,
                    new_mark.sha if new_mark else line_sha,
                ),
            )
        finally:
            os.close(fd)

    # --- the query --------------------------------------------------------------------------

    def _page(
        self,
        conn: sqlite3.Connection,
        query: Query,
        filters: SearchFilters,
        cursor: str | None,
        limit: int,
        *,
        partial: bool,
    ) -> SearchPage:
        """Best first within windows of the `WINDOW` newest matches (module docstring):
        fill the page from the cursor's window on, then the next older ones."""
        limit = max(1, min(MAX_LIMIT, limit))
        match = query.fts5()
        where, params = _filtered(filters)
        window: tuple[int, list[int]] | None = None
        if cursor is None:
            top = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM search_docs").fetchone()[0]
            key: list[Any] | None = None
            window = self._window(conn, match, top)
            recent = window[0] > 1  # WINDOW matches or more
        else:
            top, keyed, score, ts, doc, recent = decode_search_cursor(cursor, _CURSOR_KINDS)
            key = [score, ts, doc] if keyed else None
        hits: list[SearchHit] = []
        n = len(ROW_FIELDS)
        while True:
            if window is None:
                window = self._window(conn, match, top)
            floor, ids = window
            wanted = limit - len(hits)
            rows = self._ranked(
                conn, match, where, params, (floor, top, ids if recent else None), key, wanted + 1
            )
            hits += [
                SearchHit(
                    decoded(summary_of, row[:n], json_text=True),
                    row[n],
                    row[n + 1],
                    row[n + 2],
                    row[n + 3],
                )
                for row in rows[:wanted]
            ]
            if len(rows) > wanted:  # the page is full, and this window holds more
                last = rows[wanted - 1]
                key = [last[n + 5], last[n + 2], last[n + 4]]
                return SearchPage(hits, _cursor(top, key, recent), partial)
            if floor <= 1:  # no older window
                return SearchPage(hits, None, partial)
            if len(hits) == limit:
                more = self._any_below(conn, match, where, params, floor)
                return SearchPage(hits, _cursor(floor, None, recent) if more else None, partial)
            top, key, window = floor, None, None

    @staticmethod
    def _window(conn: sqlite3.Connection, match: str, top: int) -> tuple[int, list[int]]:
        """The window below `top`: its lowest doc id (the `WINDOW`th newest match; 1 when
        fewer match: the window holds them all) and the matches' doc ids, newest first."""
        # One row, not one per match: each row fetched is a GIL hand-over (`_insert`).
        found = conn.execute(
            "SELECT json_group_array(rowid) FROM (SELECT rowid FROM search_fts "
            "WHERE search_fts MATCH ? AND rowid < ? ORDER BY rowid DESC LIMIT ?)",
            (match, top, WINDOW),
        ).fetchone()[0]
        ids: list[int] = sorted(orjson.loads(found), reverse=True)
        return (ids[-1] if len(ids) == WINDOW else 1), ids

    @staticmethod
    def _ranked(
        conn: sqlite3.Connection,
        match: str,
        where: list[str],
        params: list[Any],
        window: tuple[int, int, list[int] | None],
        key: list[Any] | None,
        count: int,
    ) -> list[Any]:
        """Up to `count` matches with doc ids in [floor, top), after `key`, best first;
        given the window's doc ids, newest first instead, every score 0, with no second
        pass over the full-text index (bm25 counts every match of each term in the whole
        index before it scores one: 25 ms for a word in most records; a prefix merges the
        doclists of every word it starts)."""
        floor, top, ids = window
        outer, after = "", []
        if key is not None:
            score, ts, doc = key
            outer = "WHERE (score > ? OR (score = ? AND (ts < ? OR (ts = ? AND id < ?))))"
            after = [score, score, ts, ts, doc]
        columns = ", ".join(f"t.{name}" for name in ROW_FIELDS)
        selected = f"SELECT {columns}, d.seq, d.role, d.ts, d.text, d.id"
        if ids is not None:
            # CROSS JOIN keeps the window's ids the outer loop: each doc found by its key,
            # never a scan of every doc for ids in the list.
            conditions = " AND ".join(["1", *where])
            inner = (
                f"{selected}, 0.0 AS score FROM json_each(?) AS w "
                "CROSS JOIN search_docs AS d ON d.id = w.value "
                f"CROSS JOIN threads AS t ON t.threadId = d.threadId WHERE {conditions}"
            )
            first: list[Any] = [orjson.dumps(ids).decode()]
        else:
            conditions = " AND ".join(
                ["search_fts MATCH ?", "search_fts.rowid >= ?", "search_fts.rowid < ?", *where]
            )
            inner = (
                f"{selected}, bm25(search_fts) AS score FROM search_fts "
                "JOIN search_docs AS d ON d.id = search_fts.rowid "
                f"JOIN threads AS t ON t.threadId = d.threadId WHERE {conditions}"
            )
            first = [match, floor, top]
        sql = f"SELECT * FROM ({inner}) {outer} ORDER BY score, ts DESC, id DESC LIMIT ?"
        return conn.execute(sql, [*first, *params, *after, count]).fetchall()

    @staticmethod
    def _any_below(
        conn: sqlite3.Connection, match: str, where: list[str], params: list[Any], top: int
    ) -> bool:
        conditions = " AND ".join(["search_fts MATCH ?", "search_fts.rowid < ?", *where])
        return (
            conn.execute(
                "SELECT 1 FROM search_fts JOIN search_docs AS d ON d.id = search_fts.rowid "
                f"JOIN threads AS t ON t.threadId = d.threadId WHERE {conditions} LIMIT 1",
                [match, top, *params],
            ).fetchone()
            is not None
        )


def drop_tables(conn: sqlite3.Connection) -> None:
    """Every search table and trigger gone (the next search builds them again from the
    thread files), in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _statements(_DROP):
            conn.execute(statement)
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def _filtered(filters: SearchFilters) -> tuple[list[str], list[Any]]:
    """The filters as SQL over the thread's row (`t`) and the document (`d`)."""
    where = ["t.archived = ?"]
    params: list[Any] = [int(filters.archived)]
    if filters.cwd is not None:
        where.append("t.cwd = ?")
        params.append(filters.cwd)
    if filters.workspace_folder is not None:
        clause, values = under_folder(filters.workspace_folder, "t.")
        where.append(clause)
        params += values
    if filters.agent is not None:
        where.append("coalesce(json_extract(t.origin, '$.agent'), 'sessiond') = ?")
        params.append(filters.agent)
    if filters.role is not None:
        where.append("d.role = ?")
        params.append(filters.role)
    if filters.since is not None:
        where.append("d.ts >= ?")
        params.append(filters.since)
    if filters.until is not None:
        where.append("d.ts < ?")
        params.append(filters.until)
    return where, params


_INSERT_ROWS = 100  # 5 parameters each: within SQLite's oldest limit of 999


def _insert(conn: sqlite3.Connection, docs: list[tuple[Any, ...]]) -> None:
    """Documents in as few statements as may be: Python's sqlite3 lets the GIL go and takes
    it back around every step, and `executemany` steps once a row. A search runs beside
    the store thread (server/app.py): every time it takes the GIL back, a recording
    thread waits for it, so a hundred single-row steps cost recording far more than the
    one step that inserts them all."""
    for start in range(0, len(docs), _INSERT_ROWS):
        chunk = docs[start : start + _INSERT_ROWS]
        rows = ", ".join(["(?, ?, ?, ?, ?)"] * len(chunk))
        conn.execute(
            f"INSERT INTO search_docs (threadId, seq, role, ts, text) VALUES {rows}",
            [value for doc in chunk for value in doc],
        )


def _cursor(top: int, key: list[Any] | None, recent: bool) -> str:
    if key is None:
        return encode_search_cursor([top, False, 0.0, "", 0, recent])
    return encode_search_cursor([top, True, *key, recent])


def _line_end(data: bytes, base: int, line_start: int) -> int:
    """Where the line starting at `line_start` ends (past its newline)."""
    return base + data.index(b"\n", line_start - base) + 1


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back what is open: SQLite has rolled back by itself after some failures (a
    damaged page, a full disk), and a second ROLLBACK would hide the first error."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _statements(script: str) -> list[str]:
    """A script's statements, one by one (executescript would commit the transaction)."""
    import sqlite3

    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return [s for s in statements if s]
