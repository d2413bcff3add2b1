"""Where each imported source file was left: a derived cache of the threads' checkpoints.

The truth is in the threads: every import ends with an `import_checkpoint` item (the
source path, how far it was read, fingerprints of what was read, the parser's state).
This SQLite file (`imports.sqlite3`) repeats the latest checkpoint per source so a rescan
of 10k unchanged sessions costs one query and a stat each, not a read of every thread.
Deleted or corrupt, it is rebuilt one source at a time from the threads' checkpoints.
`sqlite3` is imported on first use only (no warmup).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar
from urllib.parse import quote

import orjson

from restore.home.caches import content_fault, decoded, set_aside
from restore.home.files import create_file, not_regular

if TYPE_CHECKING:
    import sqlite3

SCHEMA_VERSION = 1


@dataclass
class SourceCheckpoint:
    """How far one source file was imported, and into which thread."""

    source: str
    agent: str
    sessionId: str
    revision: int
    threadId: str
    offset: int
    """Bytes read and turned into items; the next import starts here."""
    lines: int
    lineStart: int
    """Where the last line read starts: its sha (`tailSha`) proves the file was appended to."""
    headSha: str
    """sha256 of the file's first `min(offset, HEAD_BYTES)` bytes."""
    tailSha: str
    size: int
    mtimeNs: int
    parser: dict[str, Any]

    def to_item(self) -> dict[str, Any]:
        """The checkpoint as a thread item. Its fields as they are, not `asdict`'s deep
        copy: the item is written at once, and nothing changes the parser state after."""
        return {
            "type": "import_checkpoint",
            "id": f"ckpt:{self.offset}",
            **{name: getattr(self, name) for name in _COLUMNS},
        }

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> SourceCheckpoint | None:
        try:
            return cls(**{f.name: item[f.name] for f in fields(cls)})
        except (KeyError, TypeError):
            return None


_COLUMNS = tuple(f.name for f in fields(SourceCheckpoint))
_SCHEMA = f"""
CREATE TABLE sources ({
    ", ".join(f"{c} {'TEXT PRIMARY KEY' if c == 'source' else ''}" for c in _COLUMNS)
});
"""


P = ParamSpec("P")
T = TypeVar("T")


def _mended(method: Callable[P, T]) -> Callable[P, T]:
    """A ledger whose contents are damaged (restore/home/caches.py) is set aside and the
    call made again on a new, empty one: the importer then finds each source's checkpoint
    in its thread (`plan.py`), so nothing is imported twice."""

    @functools.wraps(method)
    def mended(*args: P.args, **kwargs: P.kwargs) -> T:
        ledger: ImportLedger = args[0]  # type: ignore[assignment]
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            fault = content_fault(exc)
            if fault is None:
                raise
            ledger.close()
            set_aside(ledger._path, fault)
        return method(*args, **kwargs)

    return mended


class ImportLedger:
    """The checkpoints by source path, shared by every process on the data dir (WAL)."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self._path = path
        self._read_only = read_only
        """A read-only data directory (`sessiond doctor` there): read as it is, never
        made, set aside or migrated; missing or of another version, it holds nothing."""
        self._conn: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            import sqlite3

            if not self._read_only and not_regular(self._path):  # a FIFO would block SQLite
                set_aside(self._path, "not a regular file")
            try:
                self._conn = self._open(sqlite3)
            except sqlite3.DatabaseError as exc:  # corrupt: it is only a cache, start over
                if (fault := content_fault(exc)) is None or self._read_only:
                    raise
                set_aside(self._path, fault)
                self._conn = self._open(sqlite3)
        return self._conn

    def _open(self, driver: Any) -> sqlite3.Connection:
        if self._read_only:
            return self._open_read_only(driver)
        create_file(self._path)  # 0600 (SQLite would make it 0644); its -wal/-shm follow
        conn: sqlite3.Connection = driver.connect(
            self._path, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA busy_timeout = 5000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                conn.executescript(f"DROP TABLE IF EXISTS sources; {_SCHEMA}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_read_only(self, driver: Any) -> sqlite3.Connection:
        """`immutable`: on a read-only mount SQLite cannot make the WAL's shared memory,
        and nothing can write the file meanwhile."""
        conn: sqlite3.Connection = driver.connect(":memory:", check_same_thread=False)
        conn.executescript(_SCHEMA)
        if not self._path.is_file():
            return conn
        uri = f"file:{quote(str(self._path))}?mode=ro&immutable=1"
        found: sqlite3.Connection = driver.connect(uri, uri=True, check_same_thread=False)
        if found.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            found.close()
            return conn
        conn.close()
        return found

    @_mended
    def get(self, source: str) -> SourceCheckpoint | None:
        row = (
            self._db()
            .execute(f"SELECT {', '.join(_COLUMNS)} FROM sources WHERE source = ?", (source,))
            .fetchone()
        )
        return None if row is None else self._checkpoint(row)

    @_mended
    def all(self, agent: str) -> dict[str, SourceCheckpoint]:
        rows = self._db().execute(
            f"SELECT {', '.join(_COLUMNS)} FROM sources WHERE agent = ?", (agent,)
        )
        return {row[0]: self._checkpoint(row) for row in rows}

    @_mended
    def put_many(self, checkpoints: list[SourceCheckpoint]) -> None:
        """Store checkpoints, one transaction for all."""
        rows = []
        for checkpoint in checkpoints:
            values = [getattr(checkpoint, c) for c in _COLUMNS]
            values[_COLUMNS.index("parser")] = orjson.dumps(checkpoint.parser).decode()
            rows.append(values)
        conn = self._db()
        with conn:
            conn.execute("BEGIN")
            conn.executemany(
                f"INSERT OR REPLACE INTO sources ({', '.join(_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(_COLUMNS))})",
                rows,
            )

    @staticmethod
    def _checkpoint(row: tuple[Any, ...]) -> SourceCheckpoint:
        values: dict[str, Any] = decoded(dict, zip(_COLUMNS, row, strict=True))
        values["parser"] = decoded(orjson.loads, values["parser"])
        return decoded(SourceCheckpoint, **values)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
