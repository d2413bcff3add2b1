"""Full-text search in the shared store: `sessiond_items.search_vector`, a tsvector column
PostgreSQL generates from each record as it is inserted (migration 004), under a GIN index.

Nothing to build or catch up: a record is searchable in the transaction that stores it,
on every machine, and row-level security decides whose records a role finds. Ranked by
`ts_rank` normalized by the record's length (1: shorter records first, as bm25 ranks
them; it depends on the record alone, not on the rest of the corpus, so a cursor's key
stays valid while others write), ties by recency, then by position.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, LiteralString

import orjson

from restore.search.query import Query
from restore.search.text import searchable
from restore.stores.api import (
    MAX_LIMIT,
    Progress,
    SearchFilters,
    SearchHit,
    SearchPage,
    decode_search_cursor,
    encode_search_cursor,
    summary_of,
)
from restore.stores.postgres.rows import ROW_COLUMNS

if TYPE_CHECKING:
    from restore.stores.postgres.store import PostgresStore

_THREAD_COLUMNS: LiteralString = ", ".join(f"t.{c}" for c in ROW_COLUMNS.split(", "))
_CURSOR_KINDS = (float, str, str, int)  # ts_rank, ts, thread id, seq


class SharedSearch:
    """The PostgreSQL store's `SearchIndex`."""

    beside_store = False
    """On the store thread: the store's connection (and its repository lookups)."""

    def __init__(self, store: PostgresStore) -> None:
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
    ) -> SearchPage:
        limit = max(1, min(MAX_LIMIT, limit))
        where: list[LiteralString] = ["i.search_vector @@ q.q", "t.archived = %s"]
        params: list[Any] = [filters.archived]
        if filters.cwd is not None:
            where.append('t.cwd COLLATE "C" = %s')
            params.append(filters.cwd)
        if filters.workspace_folder is not None:
            base = filters.workspace_folder.rstrip("/")
            under: LiteralString = (
                't.workspace_folder = %s OR t.cwd COLLATE "C" = %s OR '
                '(t.cwd COLLATE "C" >= %s AND t.cwd COLLATE "C" < %s)'
            )
            params += [filters.workspace_folder, filters.workspace_folder, base + "/", base + "0"]
            repo = self._store.index.repo_of(filters.workspace_folder)
            if repo is not None:
                repo_id, inside = repo
                if inside:
                    under += (
                        ' OR (t.repo_id = %s AND (t.repo_path COLLATE "C" = %s OR '
                        '(t.repo_path COLLATE "C" >= %s AND t.repo_path COLLATE "C" < %s)))'
                    )
                    params += [repo_id, inside, inside + "/", inside + "0"]
                else:
                    under += " OR t.repo_id = %s"
                    params.append(repo_id)
            where.append(f"({under})")
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
        sql: LiteralString = (
            f"SELECT * FROM (SELECT {_THREAD_COLUMNS}, i.seq, i.search_role, "
            "coalesce(i.search_ts, '') AS ts, i.line, "
            "ts_rank(i.search_vector, q.q, 1)::float8 AS score, t.thread_id::text AS thread_key "
            "FROM sessiond_items AS i JOIN sessiond_threads AS t ON t.thread_id = i.thread_id, "
            "to_tsquery('simple', %s) AS q (q) "
            f"WHERE {' AND '.join(where)}) AS found {outer} "
            "ORDER BY score DESC, ts DESC, thread_key DESC, seq DESC LIMIT %s"
        )
        with self._store.db.read() as conn:
            rows = conn.execute(sql, [query.tsquery(), *params, *after, limit + 1]).fetchall()
        n = len(ROW_COLUMNS.split(", "))
        hits = []
        for row in rows[:limit]:
            found = searchable(orjson.loads(row[n + 3]))
            text = found[1] if found else ""
            hits.append(SearchHit(summary_of(row[:n]), row[n], row[n + 1], row[n + 2], text))
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = encode_search_cursor([last[n + 4], last[n + 2], last[n + 5], last[n]])
        return SearchPage(hits, next_cursor)
