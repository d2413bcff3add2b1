"""Threads as a client lists them: pages of the store's index with their filters, the
`childCount`s notifications carry, and what other processes changed meanwhile.

A listing never costs more than its page: the index answers it (the embedded one opens,
and reconciles every file, the first time it is asked; a notification never opens it)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from protocol.errors import ErrorKind, ProtocolError
from restore.engine.environment import canonical
from restore.ids import id_prefix, validate_thread_id
from restore.stores.api import ExternalChange, ListFilters, Listing, Progress, Store
from restore.summary import ThreadSummary

logger = logging.getLogger("sessiond.threads")
ThreadInfo = dict[str, Any]
# Aliases, so no annotation in the class below names `list` (its method there).
Infos = list[ThreadInfo]
Changes = list[ExternalChange]
Ids = list[str]
Rows = list[ThreadSummary]
CANDIDATES = 10
"""Threads an ambiguous prefix names, at most: enough to pick from, one line to read."""


class Lists:
    """The listing side of the thread service (restore/service/threads.py)."""

    store: Store

    def list(self, filters: ListFilters, progress: Progress | None = None) -> Listing:
        """A page of top-level threads, or of `parent_thread_id`'s children (sub-agents);
        `session_key`: the threads whose key starts with it (sub-agents' too)."""
        texts = (
            ("cwd", filters.cwd),
            ("workspaceFolder", filters.workspace_folder),
            ("search", filters.search),
            ("sessionKey", filters.session_key),
        )
        for name, value in texts:
            if value is not None and "\0" in value:  # PostgreSQL text cannot hold one
                raise ProtocolError(
                    ErrorKind.INVALID_PARAMS, f"{name} must not contain NUL", field=name
                )
        parent = filters.parent_thread_id
        checked = replace(
            filters,
            cwd=canonical(filters.cwd) if filters.cwd is not None else None,  # stored so
            parent_thread_id=validate_thread_id(parent) if parent is not None else None,
        )
        index = self.store.index
        index.ensure_ready(progress)
        self.store.flush()
        return index.list(checked)

    def with_prefix(self, text: str, limit: int = CANDIDATES) -> Rows:
        """The threads whose id starts with what a person typed (restore/ids.py
        `id_prefix`), archived and sub-agents too, in id order, at most `limit`."""
        prefix = id_prefix(text)
        index = self.store.index
        index.ensure_ready()
        self.store.flush()
        return index.with_prefix(prefix, limit)

    def thread_id_of(self, text: str) -> str:
        """The one thread a typed id or unique prefix names, git-style: a whole id as it
        is (no lookup), a prefix looked up (`not_one` otherwise)."""
        if len(text.strip()) == 36:
            return validate_thread_id(text.strip().lower())
        found = self.with_prefix(text, CANDIDATES + 1)
        if len(found) == 1:
            return found[0].threadId
        infos = [row.thread_info() for row in found[:CANDIDATES]]
        raise not_one(id_prefix(text), infos, more=len(found) > CANDIDATES)

    def listed_parent(self, thread_id: str) -> str | None:
        """The parent a listing files this thread under (None: a top-level thread, or no
        listing open yet, which no client can be showing)."""
        if not self.store.index.is_open:
            return None
        row = self.store.index.get(validate_thread_id(thread_id))
        return row.parentThreadId if row is not None else None

    def with_child_counts(self, infos: Infos, parents: Sequence[str] = ()) -> Infos:
        """ThreadInfos for notifications: `infos` with their `childCount` filled in place
        where the listing knows it, then the rows of `parents` (threads whose children just
        changed), with theirs. Only an index that is open (a shared store's always is) is
        asked: opening one reconciles every file, which a notification must not cost;
        before any listing no client holds a count to keep current. Pending rows are
        written first, so a child started a moment ago is counted."""
        index = self.store.index
        if not index.is_open:
            return []
        try:
            if parents:
                self.store.flush()
            rows = [row for p in dict.fromkeys(parents) if (row := index.get(p))]
            wanted = [i["threadId"] for i in infos if i.get("childCount") is None]
            counts = index.child_counts([*wanted, *(row.threadId for row in rows)])
        except Exception as exc:  # sqlite3.Error, psycopg.Error: the counts are derived
            logger.warning("child counts not read: %s", exc)
            return []
        for info in infos:
            if info.get("childCount") is None and info["threadId"] in counts:
                info["childCount"] = counts[info["threadId"]]
        return [{**row.thread_info(), "childCount": counts[row.threadId]} for row in rows]

    def external_changes(self, thread_ids: Sequence[str]) -> Changes:
        """What other processes on this machine did to these threads (their files changed),
        with the listing rows brought up to date, so this process's listings agree at once.
        Nothing for a store whose other writers announce themselves (`Store.watch`)."""
        local = self.store.local
        return local.changed(thread_ids) if local is not None else []

    def threads_changed_since(self, seconds: float) -> Ids:
        """Threads written at or after `seconds` (epoch): what a watcher that was still
        starting may have missed."""
        local = self.store.local
        return local.changed_since(seconds) if local is not None else []

    def flush_index(self) -> None:
        """Write the listing rows the store held back (`FLUSH_SECONDS` after the last
        write, from the host's timer). Never raises: the rows are derived."""
        self.store.flush()

    def idle(self) -> None:
        """The store's housekeeping for a pause in requests (`Store.idle`)."""
        self.store.idle()


def not_one(prefix: str, infos: Infos, *, more: bool = False) -> ProtocolError:
    """Why a typed prefix names no thread (ThreadNotFound) or several (InvalidId, one
    line naming each with its title, so the person types more of the one they mean)."""
    if not infos:
        return ProtocolError(
            ErrorKind.THREAD_NOT_FOUND, f"no thread id starts with {prefix}", threadId=prefix
        )
    named = ", ".join(
        f"{info['threadId']} ({info['title'] or info['preview'] or 'no messages yet'})"[:100]
        for info in infos
    )
    return ProtocolError(
        ErrorKind.INVALID_ID,
        f"{prefix} is the start of {len(infos)}{' and more' if more else ''} thread ids: "
        f"{named}; type more of the one you mean",
        field="threadId",
        candidates=[info["threadId"] for info in infos],
    )
