"""The embedded store's index file read on its own, for a `sessiond usage` spawn: when
nothing has changed behind the index since the store last opened it, the report is the
index's answer, and opening the store (its interface, its dataclasses, logging, the thread
files' readers) would cost a spawn most of its time (docs/benchmarks.md, "Usage reports
beside ccusage").

"Nothing changed" is what ThreadIndex's first open decides before it reads any file
(index.py `_caught_up`): the same boot, every shard directory's mtime as the index
recorded it and none of them recent, and no writer mark. When any of that is not so, or
the file is not the index of this schema, `caught_up` says None and the caller opens the
store, which catches up as always. This module imports no more than `sqlite3` and `orjson`
(it is here, not under restore/stores/, whose package imports the whole store interface);
restore/stores/embedded/index.py takes its constants and `usage_of` from here, so both
read the same rows the same way.
"""

from __future__ import annotations

import os
import stat
import time
from typing import TYPE_CHECKING

import orjson

from restore.usage.entries import Usage, UsageEntry, UsageThread, usage_thread, usage_window

if TYPE_CHECKING:
    import sqlite3

SCHEMA_VERSION = 9
"""ThreadIndex.SCHEMA_VERSION (tests/test_usage.py holds them equal): another version's
index is the store's to rebuild."""
RACY_NS = 2_000_000_000
"""A shard directory changed this recently is not trusted to show the next change by its
mtime (a coarse clock tick could hide it): it is read again at the next open."""
BOOT_ID = "/proc/sys/kernel/random/boot_id"
QUARTER_MS = 900_000
"""The grain `usage_quarters` sums calls in (restore/usage/report.py GRAIN_MS)."""
THREADS_BATCH = 500  # ids per query (SQLite binds at most 999 by default)


def boot_id() -> str | None:
    """This boot's id (Linux); None where there is none (then every open compares every file)."""
    try:
        with open(BOOT_ID) as file:
            return file.read().strip() or None
    except OSError:
        return None


class IndexFile:
    """`usage` (api.UsageSource) from the index file, over a read-only connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def usage(
        self, since_ms: int | None, until_ms: int | None, grain_ms: int, *, threads: bool
    ) -> Usage:
        return usage_of(self._conn, since_ms, until_ms, grain_ms, threads=threads)

    def close(self) -> None:
        self._conn.close()


def caught_up(home: str) -> IndexFile | None:
    """The index of the data directory `home`, open read-only, if it needs no catching up
    (module docstring); None: open the store."""
    index = os.path.join(home, "index.sqlite3")
    for end in ("", "-wal", "-shm"):
        try:
            if not stat.S_ISREG(os.lstat(index + end).st_mode):
                return None  # the store sets it aside
        except FileNotFoundError:
            if not end:
                return None  # no index yet: the store builds it
        except OSError:
            return None
    if _writer_marks(home):
        return None
    import sqlite3

    try:
        conn = sqlite3.connect(_uri(index), uri=True, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            conn.close()
            return None
        stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.Error:
        conn.close()
        return None
    boot = boot_id()
    if boot is None or stored.get("boot") != boot or not _same_shards(home, stored.get("shards")):
        conn.close()
        return None
    return IndexFile(conn)


def _uri(path: str) -> str:
    """SQLite's read-only URI of an absolute or relative path (its `%`, `?` and `#`
    escaped, the rest as it is: SQLite decodes only %HH)."""
    escaped = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{escaped}?mode=ro"


def _writer_marks(home: str) -> bool:
    """Any entry in writers/: a writer at work, or one that died before its row was written
    (marks.py); the store reads its thread again."""
    try:
        with os.scandir(os.path.join(home, "writers")) as entries:
            return any(True for _ in entries)
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _same_shards(home: str, recorded: str | None) -> bool:
    """Every shard directory's mtime as the index recorded it, none changed too recently to
    be trusted (Layout.shard_times, ThreadIndex._seen)."""
    if recorded is None:
        return False
    try:
        before = orjson.loads(recorded)
    except orjson.JSONDecodeError:
        return False
    now: dict[str, int] = {}
    recent = time.time_ns() - RACY_NS
    for base in ("threads", "archived"):
        try:
            with os.scandir(os.path.join(home, base)) as shards:
                for shard in shards:
                    if shard.is_dir(follow_symlinks=False):
                        now[f"{base}/{shard.name}"] = shard.stat().st_mtime_ns
        except FileNotFoundError:
            continue
        except OSError:
            return False  # unreadable: the store warns of it
    return isinstance(before, dict) and before == now and all(ns <= recent for ns in now.values())


def _quarter(ms: int | None) -> int | None:
    """The first quarter hour at or after `ms` (report windows start on one)."""
    return None if ms is None else -(-ms // QUARTER_MS)


def usage_of(
    conn: sqlite3.Connection,
    since_ms: int | None,
    until_ms: int | None,
    grain_ms: int,
    *,
    threads: bool,
) -> Usage:
    """ThreadIndex.usage's query, on `conn`."""
    if grain_ms == QUARTER_MS and not threads:
        where, params = usage_window("quarter", _quarter(since_ms), _quarter(until_ms))
        found = conn.execute(
            "SELECT '', firstMs, lastMs, model, input, output, cacheRead, cacheWrite, usd, "
            "unpriced, calls FROM usage_quarters"
            + (" WHERE " + " AND ".join(where) if where else ""),
            params,
        )
        return [UsageEntry(*row) for row in found], {}
    where, params = usage_window("atMs", since_ms, until_ms)
    thread = "threadId" if threads else "''"
    entries = [
        UsageEntry(*row)
        for row in conn.execute(
            f"SELECT {thread}, min(atMs), max(atMs), model, sum(input), sum(output), "
            "sum(cacheRead), sum(cacheWrite), sum(usd), sum(1 - priced), count(*) FROM usage "
            f"{' WHERE ' + ' AND '.join(where) if where else ''} "
            f"GROUP BY {'threadId, ' if threads else ''}atMs / ?, model",
            [*params, max(1, grain_ms)],
        )
    ]
    if not threads:
        return entries, {}
    from restore.home.caches import decoded

    ids = sorted({entry.threadId for entry in entries})
    named: dict[str, UsageThread] = {}
    for start in range(0, len(ids), THREADS_BATCH):
        batch = ids[start : start + THREADS_BATCH]
        for row in conn.execute(
            "SELECT threadId, title, cwd, workspaceFolder, origin, parentThreadId "
            f"FROM threads WHERE threadId IN ({', '.join('?' * len(batch))})",
            batch,
        ):
            origin = decoded(orjson.loads, row[4]) if row[4] else None
            named[row[0]] = usage_thread(row[0], row[1], row[2], row[3], origin, row[5])
    return entries, named
