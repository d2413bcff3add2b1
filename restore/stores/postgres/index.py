"""The listing side of the PostgreSQL store: rows are written with their items (store.py),
so a listing is one query, ready at once, on any machine. A workspace folder inside a git
repository also lists that repository's threads recorded on every machine, at the same
place inside it."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from restore.stores.api import Listing, Progress, Rows
from restore.stores.postgres import rows
from restore.summary import ThreadSummary

if TYPE_CHECKING:
    from restore.stores.postgres.store import PostgresStore

REPO_CACHE_SECONDS = 30.0


class SharedIndex:
    files_read = 0  # no files: `sessiond/debug` reports it beside the embedded index's
    is_open = True  # a query away, whenever asked

    def __init__(self, store: PostgresStore) -> None:
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

    def child_counts(self, thread_ids: Sequence[str]) -> dict[str, int]:
        with self._store.db.read() as conn:
            return rows.child_counts(conn, thread_ids)

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
    ) -> Listing:
        repo = self.repo_of(workspace_folder) if workspace_folder else None
        with self._store.db.read() as conn:
            return rows.listing(
                conn,
                cwd=cwd,
                workspace_folder=workspace_folder,
                archived=archived,
                search=search,
                cursor=cursor,
                limit=limit,
                repo=repo,
                parent_thread_id=parent_thread_id,
            )

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
