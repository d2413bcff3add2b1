"""A thread's listing row as `sessiond_threads` keeps it, and the listing queries over it.

The row is updated in the same transaction as the items it summarizes (store.py), so a
listing on another machine is never ahead of or behind them. Besides the summary it keeps
where the thread ran inside its git repository (`repo_id`, `repo_path`), so a workspace
folder lists its repository's threads from every machine, wherever it is checked out.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from typing import Any, LiteralString

import psycopg
from psycopg.types.json import Jsonb

from protocol.errors import ErrorKind, ProtocolError, thread_not_found
from restore.ids import validate_thread_id
from restore.keys import key_range
from restore.stores.api import KeyThreads, ListFilters, Listing
from restore.stores.cursors import MAX_LIMIT, decode_cursor, encode_cursor, summary_of
from restore.stores.records import Item
from restore.summary import ThreadSummary

Repo = tuple[str | None, str | None]
"""(repoId, the thread's cwd inside the repository)."""

# The ThreadSummary fields of cursors.ROW_FIELDS, in that order.
ROW_COLUMNS = (
    "thread_id::text, title, preview, cwd, workspace_folder, branch, head_sha, created_at, "
    "updated_at, item_count, archived, forked_from, cost_usd, origin, "
    "parent_thread_id::text, parent_operation_id, last_seq, latest_session_id, "
    "session_key, previous_thread_id::text, next_thread_id::text, reset_reason"
)
_QUALIFIED: LiteralString = ", ".join(f"t.{column}" for column in ROW_COLUMNS.split(", "))
"""ROW_COLUMNS of the table aliased `t`."""
# A listed row's children (what `thread/list {parentThreadId}` would list).
CHILD_COUNT = (
    "(SELECT count(*) FROM sessiond_threads AS child WHERE child.parent_thread_id = "
    "sessiond_threads.thread_id AND NOT child.archived)"
)
UPDATE_ROW = (
    "UPDATE sessiond_threads SET title = %s, preview = %s, cwd = %s, workspace_folder = %s, "
    "branch = %s, head_sha = %s, repo_id = %s, repo_path = %s, created_at = %s, "
    "updated_at = %s, item_count = %s, forked_from = %s, cost_usd = %s, origin = %s, "
    "parent_thread_id = %s, parent_operation_id = %s, last_seq = %s, latest_session_id = %s, "
    "session_key = %s, previous_thread_id = %s, next_thread_id = %s, reset_reason = %s "
    "WHERE thread_id = %s"
)


def row_values(summary: ThreadSummary, repo: Repo) -> tuple[Any, ...]:
    """`UPDATE_ROW`'s parameters."""
    return (
        summary.title,
        summary.preview,
        summary.cwd,
        summary.workspaceFolder,
        summary.branch,
        summary.headSha,
        repo[0],
        repo[1],
        summary.createdAt,
        summary.updatedAt or "",
        summary.itemCount,
        Jsonb(summary.forkedFrom) if summary.forkedFrom else None,
        summary.costUsd,
        Jsonb(summary.origin) if summary.origin else None,
        _uuid_or_none(summary.parentThreadId),
        summary.parentOperationId,
        summary.lastSeq,
        summary.latestSessionId,
        summary.sessionKey,
        _uuid_or_none(summary.previousThreadId),
        _uuid_or_none(summary.nextThreadId),
        summary.resetReason,
        summary.threadId,
    )


def _uuid_or_none(value: str | None) -> str | None:
    """A parent id as the uuid column takes it; anything else (not a thread id) is none."""
    if value is None:
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def repo_binding(item: Item) -> Repo | None:
    """(repoId, cwd relative to the repo root) from a session_meta; None for other items."""
    if item.get("type") != "session_meta":
        return None
    repo_id, root, cwd = item.get("repoId"), item.get("repoRoot"), item.get("cwd")
    if not (repo_id and isinstance(root, str) and isinstance(cwd, str)):
        return (repo_id or None, None)
    relative = os.path.relpath(cwd, root)
    return (repo_id, "" if relative == "." else None if relative.startswith("..") else relative)


def summaries_of(conn: psycopg.Connection, thread_ids: Sequence[str]) -> list[ThreadSummary]:
    rows = conn.execute(
        f"SELECT {ROW_COLUMNS} FROM sessiond_threads WHERE thread_id = ANY(%s::uuid[])",
        (list(thread_ids),),
    ).fetchall()
    return [summary_of(row) for row in rows]


def with_prefix(conn: psycopg.Connection, prefix: str, limit: int) -> list[ThreadSummary]:
    """The ids starting with a canonical prefix: a range of the uuid key, its bounds the
    prefix's digits padded with 0s and with fs."""
    digits = prefix.replace("-", "")
    low, high = digits.ljust(32, "0"), digits.ljust(32, "f")
    found = conn.execute(
        f"SELECT {ROW_COLUMNS} FROM sessiond_threads WHERE thread_id BETWEEN %s::uuid AND "
        "%s::uuid ORDER BY thread_id LIMIT %s",
        (low, high, limit),
    ).fetchall()
    return [summary_of(row) for row in found]


def child_counts(conn: psycopg.Connection, thread_ids: Sequence[str]) -> dict[str, int]:
    """Each thread's unarchived children (as `thread/list` counts them, under the same row
    policies), in one query."""
    ids = [validate_thread_id(thread_id) for thread_id in thread_ids]
    counts = dict.fromkeys(ids, 0)
    if not ids:
        return counts
    rows = conn.execute(
        "SELECT parent_thread_id::text, count(*) FROM sessiond_threads "
        "WHERE parent_thread_id = ANY(%s::uuid[]) AND NOT archived GROUP BY 1",
        (ids,),
    ).fetchall()
    counts.update((parent, int(n)) for parent, n in rows)
    return counts


def under_folder(
    folder: str, repo: tuple[str, str] | None, table: LiteralString = ""
) -> tuple[LiteralString, list[Any]]:
    """SQL: the thread (`table`, an alias with its dot, or none) is of the workspace
    folder, runs in it or below (a byte range, as the embedded index has it), or, with
    `repo` (repoId, the folder's path inside it), is of that repository's same folder on
    any machine. For the listing and the search alike."""
    base = folder.rstrip("/")
    clause: LiteralString = (
        f'{table}workspace_folder = %s OR {table}cwd COLLATE "C" = %s OR '
        f'({table}cwd COLLATE "C" >= %s AND {table}cwd COLLATE "C" < %s)'
    )
    params: list[Any] = [folder, folder, base + "/", base + "0"]
    if repo is not None:
        repo_id, inside = repo
        if inside:
            clause += (
                f' OR ({table}repo_id = %s AND ({table}repo_path COLLATE "C" = %s OR '
                f'({table}repo_path COLLATE "C" >= %s AND {table}repo_path COLLATE "C" < %s)))'
            )
            params += [repo_id, inside, inside + "/", inside + "0"]
        else:
            clause += f" OR {table}repo_id = %s"
            params.append(repo_id)
    return f"({clause})", params


def listing(
    conn: psycopg.Connection, filters: ListFilters, *, repo: tuple[str, str] | None = None
) -> Listing:
    """One page, newest first, every filter applied before paging (keyset cursor):
    top-level threads, or the children of `parent_thread_id`.

    `repo` (repoId, path of the folder inside the repository) widens a workspace-folder
    filter to that repository's threads from every machine, wherever it is checked out.
    """
    limit = max(1, min(MAX_LIMIT, filters.limit))
    cwd, workspace_folder, search = filters.cwd, filters.workspace_folder, filters.search
    session_key, parent_thread_id = filters.session_key, filters.parent_thread_id
    cursor = filters.cursor
    where: list[LiteralString] = ["archived = %s"]
    params: list[Any] = [filters.archived]
    if session_key is not None:  # a prefix: a range of sessiond_threads_by_key
        low, high = key_range(session_key)
        where.append('session_key IS NOT NULL AND session_key COLLATE "C" >= %s')
        params.append(low)
        if high is not None:
            where.append('session_key COLLATE "C" < %s')
            params.append(high)
    if parent_thread_id is None and session_key is None:
        # Top-level threads: a child whose parent is not here (or not ours) is one.
        where.append(
            "(parent_thread_id IS NULL OR NOT EXISTS (SELECT 1 FROM sessiond_threads AS p "
            "WHERE p.thread_id = sessiond_threads.parent_thread_id))"
        )
    elif parent_thread_id is not None:
        where.append("parent_thread_id = %s::uuid")
        params.append(validate_thread_id(parent_thread_id))
    if cwd is not None:
        where.append('cwd COLLATE "C" = %s')
        params.append(cwd)
    if workspace_folder is not None:
        clause, values = under_folder(workspace_folder, repo)
        where.append(clause)
        params += values
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
    sql: LiteralString = (
        f"SELECT {ROW_COLUMNS}, {CHILD_COUNT} FROM sessiond_threads "
        f"WHERE {' AND '.join(where)} ORDER BY updated_at DESC, thread_id DESC LIMIT %s"
    )
    rows = conn.execute(sql, [*params, limit + 1]).fetchall()
    page = [summary_of(row) for row in rows[:limit]]
    if len(rows) <= limit:
        return page, None
    last = page[-1]
    return page, encode_cursor(last.updatedAt or "", last.threadId)


def key_threads(conn: psycopg.Connection, key: str) -> KeyThreads:
    """The key's current thread, and its replaced threads whose row does not name their
    successor yet (api.Index.key_threads), among the threads this role may write (its own,
    or those stored before row-level security: migrations/002_*.sql): under `team` every
    role reads every thread, but a key's thread goes on only in its writer's hands, so
    each role has a current thread of its own per key."""
    current = conn.execute(
        f"SELECT {ROW_COLUMNS} FROM sessiond_threads AS t WHERE session_key IS NOT NULL "
        'AND session_key COLLATE "C" = %s AND NOT archived AND next_thread_id IS NULL '
        "AND (owner_role IS NULL OR owner_role = current_user) "
        "AND NOT EXISTS (SELECT 1 FROM sessiond_threads AS n "
        "WHERE n.previous_thread_id = t.thread_id) "
        "ORDER BY updated_at DESC, thread_id DESC LIMIT 1",
        (key,),
    ).fetchone()
    unlinked = conn.execute(
        f"SELECT p.thread_id::text, {_QUALIFIED} FROM sessiond_threads AS t "
        "JOIN sessiond_threads AS p ON p.thread_id = t.previous_thread_id "
        'WHERE t.session_key IS NOT NULL AND t.session_key COLLATE "C" = %s '
        "AND t.previous_thread_id IS NOT NULL AND p.next_thread_id IS NULL "
        "AND (p.owner_role IS NULL OR p.owner_role = current_user)",
        (key,),
    ).fetchall()
    return (
        None if current is None else summary_of(current),
        [(row[0], summary_of(row[1:])) for row in unlinked],
    )


def is_archived(conn: psycopg.Connection, thread_id: str) -> bool:
    """Whether the thread is archived; ThreadNotFound when there is no such thread."""
    found = conn.execute(
        "SELECT archived FROM sessiond_threads WHERE thread_id = %s", (thread_id,)
    ).fetchone()
    if found is None:
        raise thread_not_found(thread_id)
    return bool(found[0])
