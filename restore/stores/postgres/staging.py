"""A large record's lines written ahead, on a connection of their own (migration 010).

The writer connection carries every append of the process in order: a 16 MiB record's
bytes and search columns held it, and every other client's record behind it, for about a
second. Staged first (from the record's redaction thread), the append only moves the row:
`INSERT … SELECT` from `sessiond_staged`, the stored value copied as it is compressed.

The staging table is UNLOGGED: staging writes no WAL, so another client's commit never
waits for a 16 MiB record's to be flushed; the append that moves the row writes it to the
WAL then, in its own transaction, which is what makes it durable. A row whose append never
came (a crash between the two, a thread that moved on) is an unacknowledged record:
deleted by a later staging once it is a day old (or by a database restart after a crash).
"""

from __future__ import annotations

import logging
import threading
from contextlib import suppress

import psycopg

from protocol.errors import ProtocolError
from restore.faults import pause_point
from restore.stores.postgres.connection import Connections, storage_error

logger = logging.getLogger(__name__)

STAGE = (
    "INSERT INTO sessiond_staged (line, search_ts, usage, search_role, search_vector) "
    "SELECT l.line, sessiond_search_json(l.line)->>'ts', sessiond_usage_of(l.line), "
    "sessiond_search_role(l.line), sessiond_search_vector(l.line) "
    "FROM (SELECT %s::text AS line) AS l RETURNING id::text"
)
"""The derived columns as the items' trigger computes them (migration 010)."""

PLACE = (
    "INSERT INTO sessiond_items "
    "(thread_id, seq, item_id, line, search_ts, usage, search_role, search_vector) "
    "SELECT %s, %s, %s, line, search_ts, usage, search_role, search_vector "
    "FROM sessiond_staged WHERE id = %s"
)

FORGET = "DELETE FROM sessiond_staged WHERE id = ANY(%s::uuid[])"

EXPIRE = "DELETE FROM sessiond_staged WHERE staged_at < now() - interval '1 day'"


class Stager:
    """The staging connection, one staging at a time (the redaction threads share it)."""

    def __init__(self, db: Connections) -> None:
        self._db = db
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()

    def stage(self, lines: list[str]) -> list[str]:
        """Each line staged, committed; their row ids in order. StorageError on failure."""
        pause_point("staging")  # tests/test_postgres_staging.py: others go on meanwhile
        with self._lock:
            try:
                conn = self._connection()
                with conn.transaction():
                    conn.execute(EXPIRE)
                    rows = []
                    for line in lines:
                        row = conn.execute(STAGE, (line,)).fetchone()
                        assert row is not None  # INSERT … RETURNING: one row
                        rows.append(str(row[0]))
                return rows
            except ProtocolError:
                raise
            except psycopg.Error as exc:
                self._drop()
                error = storage_error(exc, self._db.where, self._db.redact)
                logger.info("staging: %s", error.message)
                raise error from None

    def _connection(self) -> psycopg.Connection:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            conn = self._db.connect()
            self._conn = conn
        return conn

    def _drop(self) -> None:
        if self._conn is not None:
            with suppress(Exception):  # already gone
                self._conn.close()
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self._drop()
