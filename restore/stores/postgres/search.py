"""Full-text search in the shared store: `sessiond_items.search_vector`, a tsvector column
PostgreSQL generates from each record as it is inserted (migration 004), under a GIN index.

Nothing to build or catch up: a record is searchable in the transaction that stores it,
on every machine, and row-level security decides whose records a role finds.

On the server's search thread, beside the store thread, over the read pool (issue 34: on
the store thread, one search's snippets held every record for 10-14 s); the page's
searchable text is cut in the database (`sessiond_search_text`, at most 100,000
characters), so a hit on a 16 MiB record does not bring the record into Python; a cancel
cancels the query in the database. Ranked by
`ts_rank` normalized by the record's length (1: shorter records first, as bm25 ranks
them; it depends on the record alone, not on the rest of the corpus, so a cursor's key
stays valid while others write), ties by recency, then by position.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, LiteralString

import psycopg

from restore.faults import pause_point
from restore.search.cancel import Cancel, Cancelled
from restore.search.query import Query
from restore.stores.api import Progress, SearchFilters, SearchHit, SearchPage
from restore.stores.cursors import MAX_LIMIT, decode_search_cursor, encode_search_cursor, summary_of
from restore.stores.postgres.rows import ROW_COLUMNS, under_folder

if TYPE_CHECKING:
    from restore.stores.postgres.host import StoreHost

_THREAD_COLUMNS: LiteralString = ", ".join(f"t.{c}" for c in ROW_COLUMNS.split(", "))
_PAGE_COLUMNS: LiteralString = ", ".join(
    f"page.{name.split('::')[0]}"  # `t.thread_id::text` is named `thread_id`
    for name in [*ROW_COLUMNS.split(", "), "seq", "search_role", "ts", "score", "thread_key"]
)
_CURSOR_KINDS = (float, str, str, int)  # ts_rank, ts, thread id, seq


class SharedSearch:
    """The PostgreSQL store's `SearchIndex`."""

    beside_store = True
    """The read pool's connections, and a repository lookup that is a cache any thread
    may fill: on the search thread."""

    def __init__(self, store: StoreHost) -> None:
        self._store = store

    def run_apart(self) -> None:
        """Nothing to do: PostgreSQL runs the search in a process of its own already."""

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
        pause_point("thread-search")  # beside the store thread (tests/test_search_bounds.py)
        limit = max(1, min(MAX_LIMIT, limit))
        where: list[LiteralString] = ["i.search_vector @@ q.q", "t.archived = %s"]
        params: list[Any] = [filters.archived]
        if filters.cwd is not None:
            where.append('t.cwd COLLATE "C" = %s')
            params.append(filters.cwd)
        if filters.workspace_folder is not None:
            repo = self._store.repo_of(filters.workspace_folder)
            clause, values = under_folder(filters.workspace_folder, repo, "t.")
            where.append(clause)
            params += values
        if filters.agent is not None:
            where.append("coalesce(t.origin->>'agent', 'sessiond') = %s")
            params.append(filters.agent)
        if filters.role is not None:
            where.append("i.search_role = %s")
            params.append(filters.role)
        if filters.since is not None:
            where.append("i.search_ts >= %s")
            params.append(filters.since)
        if filters.until is not None:
            where.append("i.search_ts < %s")
            params.append(filters.until)
        outer: LiteralString = ""
        after: list[Any] = []
        if cursor is not None:
            score, ts, thread_id, seq = decode_search_cursor(cursor, _CURSOR_KINDS)
            outer = (
                "WHERE (score < %s OR (score = %s AND (ts < %s OR (ts = %s AND "
                "(thread_key, seq) < (%s, %s)))))"
            )
            after = [score, score, ts, ts, thread_id, seq]
        n = len(ROW_COLUMNS.split(", "))
        sql: LiteralString = (
            # The page first, then its text: only the page's records are read whole, and
            # only their searchable text leaves the database. The comment names the query
            # where a DBA sees it (pg_stat_activity keeps only its first 1 kB).
            "/* sessiond thread/search */ "
            f"SELECT {_PAGE_COLUMNS}, coalesce(sessiond_search_text(page.line), '') FROM ("
            f"SELECT * FROM (SELECT {_THREAD_COLUMNS}, i.seq, i.search_role, "
            "coalesce(i.search_ts, '') AS ts, i.line, "
            "ts_rank(i.search_vector, q.q, 1)::float8 AS score, t.thread_id::text AS thread_key "
            "FROM sessiond_items AS i JOIN sessiond_threads AS t ON t.thread_id = i.thread_id, "
            "to_tsquery('simple', %s) AS q (q) "
            f"WHERE {' AND '.join(where)}) AS found {outer} "
            "ORDER BY score DESC, ts DESC, thread_key DESC, seq DESC LIMIT %s) AS page "
            "ORDER BY score DESC, ts DESC, thread_key DESC, seq DESC"
        )
        with self._store.db.read() as conn:
            forget = cancel.on_cancel(conn.cancel_safe) if cancel is not None else None
            try:
                rows = conn.execute(sql, [query.tsquery(), *params, *after, limit + 1]).fetchall()
            except psycopg.Error:
                if cancel is not None and cancel.cancelled:
                    raise Cancelled("the client cancelled the search") from None
                raise
            finally:
                if forget is not None:
                    forget()
        hits = []
        for row in rows[:limit]:
            text = row[n + 5]
            hits.append(SearchHit(summary_of(row[:n]), row[n], row[n + 1], row[n + 2], text))
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = encode_search_cursor([last[n + 3], last[n + 2], last[n + 4], last[n]])
        return SearchPage(hits, next_cursor)
