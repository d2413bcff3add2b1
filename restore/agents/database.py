"""A store that keeps every session as rows of one SQLite database (OpenCode, Kilo): which
sessions there are and when each last changed, and each one's rows as records for its
parser. Each agent's `store.py` says these for its own tables; the copy it reads is made
here, once.

The agent's database is never opened where it is: it is copied with its write-ahead log
into a private folder first, and the copy read (`snapshot`). A reader in the agent's own
files would take locks the agent waits on, could leave a `-shm` behind, and a copy of the
database file alone would miss every row the WAL still holds (the agent checkpoints it
into the database only now and then). The copy is taken between two looks at the WAL's
header: if a checkpoint restarted the WAL meanwhile (its salts change), it is taken again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG
from typing import Any

WAL_HEADER = 32
COPY_TRIES = 5


@dataclass(frozen=True)
class DatabaseSession:
    """One session of a database store: its id, when it last changed (the agent's own
    clock, milliseconds) and its change counter (-1: none kept), and its parent's id (a
    sub-agent's). A session's row is not touched by every change to its messages and
    parts; the counter is (OpenCode's `event_sequence.seq`)."""

    database: Path
    id: str
    updated: int
    created: int
    parent: str | None = None
    changes: int = -1

    @property
    def source(self) -> str:
        """What the ledger and `origin.path` name it by: `<database>#<session id>`."""
        return f"{self.database}#{self.id}"


class DatabaseStore:
    """An agent's sessions as rows of `<root>/<DATABASE>`."""

    DATABASE: str = ""
    ROOT_HELP: str = ""
    skip_itemless: bool = False

    def default_root(self) -> Path:
        raise NotImplementedError

    def database(self, root: Path) -> Path:
        return root / self.DATABASE

    def touches(self, root: Path, path: Path) -> bool:
        """Whether a change to `path` may be a change to a session (the database or its
        WAL; the agent's other files in that folder are not)."""
        return path.parent == root and path.name in (self.DATABASE, f"{self.DATABASE}-wal")

    def sessions(self, db: sqlite3.Connection, database: Path) -> list[DatabaseSession]:
        """Every session, parents before their sub-agents' (oldest first)."""
        raise NotImplementedError

    def records(
        self, db: sqlite3.Connection, session: DatabaseSession
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """The session's rows as (key, record) in the order they happened: the key names
        the items a record becomes (a row's own id: the same on every read)."""
        raise NotImplementedError

    def spawning_call(self, db: sqlite3.Connection, parent: str, child: str) -> str | None:
        """The parent session's tool call that started the sub-agent session `child`."""
        return None


def snapshot(database: Path, into: Path) -> Path | None:
    """A private copy of `database` and its WAL in the folder `into`, consistent (see the
    module's docstring); None when there is no database (or only a link, which is not
    followed)."""
    wal = Path(f"{database}-wal")
    copy = into / database.name
    for _ in range(COPY_TRIES):
        before = _wal_header(wal)
        for stale in (copy, Path(f"{copy}-wal"), Path(f"{copy}-shm")):
            stale.unlink(missing_ok=True)
        if not _copy_regular(database, copy):
            return None
        _copy_regular(wal, Path(f"{copy}-wal"))
        if _wal_header(wal) == before:
            return copy
    return copy  # the agent kept checkpointing: the last copy (SQLite checks its WAL's frames)


def _wal_header(wal: Path) -> bytes | None:
    try:
        with open(wal, "rb") as handle:
            return handle.read(WAL_HEADER)
    except OSError:
        return None


def _copy_regular(source: Path, target: Path) -> bool:
    """Copy a regular file (never through a link); False when there is none."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    with open(fd, "rb") as handle:
        if not S_ISREG(os.fstat(handle.fileno()).st_mode):
            return False
        with open(target, "wb") as out:
            shutil.copyfileobj(handle, out, 1 << 20)
    return True


class Snapshot:
    """The copy of a database store the importer reads, taken again when asked to
    `refresh` (a change was seen) and removed on `close`."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._db: sqlite3.Connection | None = None

    def refresh(self) -> sqlite3.Connection | None:
        """A connection to a fresh copy (None: there is no database)."""
        self.close()
        self._folder = tempfile.TemporaryDirectory(prefix="sessiond-import-")
        copy = snapshot(self.database, Path(self._folder.name))
        if copy is None:
            return None
        self._db = sqlite3.connect(copy, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        return self._db

    @property
    def db(self) -> sqlite3.Connection | None:
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._folder is not None:
            with contextlib.suppress(OSError):
                self._folder.cleanup()
            self._folder = None
