"""Schema migrations for the PostgreSQL store: numbered SQL files, applied on first use.

`NNN_name.sql` beside this module, applied in order, each once, in one transaction with
its row in `sessiond_migrations`, under a transaction-level advisory lock so several
sessiond processes starting against an empty database do not race. Nothing runs at server
startup: the store migrates when its first connection is made (the first request that
needs it). A database migrated by a newer sessiond is refused, not written. A schema that
is up to date costs no DDL at all, so everyday roles without CREATE on the schema (the
owner role created it: docs/storage.md) connect as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.errors import ErrorKind, ProtocolError

if TYPE_CHECKING:
    import psycopg

DIRECTORY = Path(__file__).resolve().parent / "migrations"
LOCK_KEY = 0x5E55_10D0_0000_0001  # pg_advisory_xact_lock key: "sessiond migrations"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path


def available() -> list[Migration]:
    found = []
    for path in sorted(DIRECTORY.glob("[0-9][0-9][0-9]_*.sql")):
        number, _, name = path.stem.partition("_")
        found.append(Migration(int(number), name, path))
    return found


def migrate(conn: psycopg.Connection) -> list[int]:
    """Bring the schema up to date; the versions applied now (usually none)."""
    known = available()
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        exists = conn.execute("SELECT to_regclass('sessiond_migrations') IS NOT NULL").fetchone()
        if not (exists and exists[0]):
            conn.execute(
                "CREATE TABLE sessiond_migrations (version integer PRIMARY KEY,"
                " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
        done = {row[0] for row in conn.execute("SELECT version FROM sessiond_migrations")}
        newest = max((m.version for m in known), default=0)
        if done and max(done) > newest:
            raise ProtocolError(
                ErrorKind.STORAGE_ERROR,
                f"the database schema is version {max(done)}, newer than this sessiond "
                f"knows ({newest}): upgrade sessiond",
                retryable=False,
            )
        for migration in known:
            if migration.version in done:
                continue
            conn.execute(migration.path.read_text())
            conn.execute(
                "INSERT INTO sessiond_migrations (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
            applied_now.append(migration.version)
    return applied_now
