"""The listing side of the PostgreSQL store: rows are written with their items (store.py),
so a listing is one query, ready at once, on any machine. A workspace folder inside a git
repository also lists that repository's threads recorded on every machine, at the same
place inside it."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from restore.stores.api import FIRST_PAGE, KeyThreads, ListFilters, Listing, Progress, Rows
from restore.stores.postgres import rows
from restore.summary import ThreadSummary
from restore.usage.entries import Usage, UsageEntry, UsageThread, usage_thread, usage_window

if TYPE_CHECKING:
    from restore.stores.postgres.host import StoreHost

REPO_CACHE_SECONDS = 30.0
NO_THREAD = "''"  # a usage entry of every thread's calls


class SharedIndex:
    files_read = 0  # no files: `sessiond/debug` reports it beside the embedded index's
    is_open = True  # a query away, whenever asked

    def __init__(self, store: StoreHost) -> None:
        self._store = store
        self._repos: dict[str, tuple[float, tuple[str, str] | None]] = {}

    def ensure_ready(self, progress: Progress | None = None) -> str:
        """Nothing to build: the schema is migrated with the first connection."""
        return "ready"

    def get(self, thread_id: str) -> ThreadSummary | None:
        found = self._store.summaries([thread_id])
        return found[0] if found else None

    def count(self) -> int:
        with self._store.db.read() as conn:
            row = conn.execute("SELECT count(*) FROM sessiond_threads").fetchone()
        return int(row[0]) if row else 0

    def with_prefix(self, prefix: str, limit: int) -> Rows:
        with self._store.db.read() as conn:
            return rows.with_prefix(conn, prefix, limit)

    def usage(
        self, since_ms: int | None, until_ms: int | None, grain_ms: int, *, threads: bool
    ) -> Usage:
        """Summed from the items' generated `usage` column (migration 008), under the
        items' row policies."""
        ms = "(usage->>'ms')::bigint"
        where, params = usage_window(ms, since_ms, until_ms, "%s")
        condition = " AND ".join(["usage IS NOT NULL", *where])
        with self._store.db.read() as conn:
            found = conn.execute(
                f"SELECT {'thread_id::text' if threads else NO_THREAD}, min({ms}), max({ms}), "
                "usage->>'model', "
                "sum((usage->>'input')::bigint), sum((usage->>'output')::bigint), "
                "sum((usage->>'read')::bigint), sum((usage->>'write')::bigint), "
                "sum((usage->>'usd')::double precision), "
                "count(*) FILTER (WHERE usage->'priced' = 'false'::jsonb), count(*) "
                f"FROM sessiond_items WHERE {condition} "
                f"GROUP BY {'thread_id, ' if threads else ''}{ms} / %s, usage->>'model'",
                [*params, max(1, grain_ms)],
            ).fetchall()
            entries = [
                UsageEntry(
                    row[0],
                    int(row[1]),
                    int(row[2]),
                    row[3],
                    int(row[4]),
                    int(row[5]),
                    int(row[6]),
                    int(row[7]),
                    float(row[8]),
                    int(row[9]),
                    int(row[10]),
                )
                for row in found
            ]
            ids = sorted({entry.threadId for entry in entries}) if threads else []
            named: dict[str, UsageThread] = {}
            if ids:
                for row in conn.execute(
                    "SELECT thread_id::text, title, cwd, workspace_folder, origin, "
                    "parent_thread_id::text FROM sessiond_threads "
                    "WHERE thread_id = ANY(%s::uuid[])",
                    (ids,),
                ).fetchall():
                    named[row[0]] = usage_thread(*row)
        return entries, named

    def usage_apart(self) -> SharedIndex:
        """Itself: its queries take a connection of the read pool, from any thread."""
        return self

    def child_counts(self, thread_ids: Sequence[str]) -> dict[str, int]:
        with self._store.db.read() as conn:
            return rows.child_counts(conn, thread_ids)

    def list(self, filters: ListFilters = FIRST_PAGE) -> Listing:
        folder = filters.workspace_folder
        repo = self.repo_of(folder) if folder else None
        with self._store.db.read() as conn:
            return rows.listing(conn, filters, repo=repo)

    def key_threads(self, key: str) -> KeyThreads:
        with self._store.db.read() as conn:
            return rows.key_threads(conn, key)

    def repo_of(self, folder: str) -> tuple[str, str] | None:
        """(repoId, the folder's path inside its repository), cached briefly: a listing
        must not run git for every page."""
        now = time.monotonic()
        cached = self._repos.get(folder)
        if cached is not None and now - cached[0] < REPO_CACHE_SECONDS:
            return cached[1]
        from restore.engine.environment import repo_identity

        found = repo_identity(folder)
        binding = None
        if found is not None:
            inside = os.path.relpath(folder, found[1])
            if not inside.startswith(".."):
                binding = (found[0], "" if inside == "." else inside)
        self._repos[folder] = (now, binding)
        return binding
