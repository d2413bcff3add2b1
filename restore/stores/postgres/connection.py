"""Connections to the store's database: the writer connection (locks, appends, commits:
the store thread only), a small pool for reads (any thread), the schema migrated with the
first one this process makes, reconnects with backoff, and failures as typed errors.

Credentials come from the URL, a service file or PGPASSFILE (libpq reads them); no
message or log line ever contains the password (`Redactor`).
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg import conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from protocol.errors import ProtocolError
from restore.stores.api import Durability, storage_failure
from restore.stores.postgres import channels, schema

logger = logging.getLogger("sessiond.postgres")

CONNECT_TIMEOUT = 5  # seconds, unless the URL says otherwise
POOL_WAIT = 5.0  # seconds a read waits for a pooled connection
BACKOFF_FIRST, BACKOFF_MAX = 0.1, 2.0


def describe(url: str) -> str:
    """Where a URL points, without its credentials: for messages and logs."""
    try:
        params = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "PostgreSQL (unparsable URL)"
    # What libpq itself falls back on (`postgresql:///` names nothing): the environment's
    # PGHOST, else its Unix socket; PGDATABASE, else the user's name.
    host = str(params.get("host") or os.environ.get("PGHOST") or "")
    port = params.get("port") or os.environ.get("PGPORT")
    if not host or host.startswith("/"):
        where = f"the Unix socket in {host}" if host else "the local Unix socket"
        where += f" (port {port})" if port else ""
    else:
        where = f"{host}:{port}" if port else host
    user = params.get("user") or os.environ.get("PGUSER") or getpass.getuser()
    database = params.get("dbname") or os.environ.get("PGDATABASE") or user
    return f"PostgreSQL at {where}, database {database}"


class Redactor:
    """Removes the URL's password from anything said about a failure."""

    def __init__(self, url: str) -> None:
        try:
            password = conninfo.conninfo_to_dict(url).get("password")
        except psycopg.ProgrammingError:
            password = None
        self._secrets = [s for s in (str(password) if password else None, url) if s]

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def storage_error(exc: BaseException, where: str, redact: Redactor) -> ProtocolError:
    """A driver failure as the typed error clients get: never a traceback, never a secret."""
    if isinstance(exc, ProtocolError):
        return exc
    sqlstate = getattr(exc, "sqlstate", None)
    first = next(iter(str(exc).strip().splitlines()), type(exc).__name__)
    message = redact(f"{where}: {first}")
    if sqlstate == "42501":  # insufficient_privilege: a grant, or row-level security
        from protocol.errors import ErrorKind

        return ProtocolError(ErrorKind.UNAUTHORIZED, message, retryable=False)
    retryable = isinstance(exc, psycopg.OperationalError | PoolTimeout) or sqlstate in (
        "40001",
        "40P01",
        "57P01",
        "57P02",
        "57P03",
    )
    full = sqlstate == "53100"  # disk_full
    return storage_failure(message, full=full, retryable=True if full else retryable)


class Backoff:
    """Reconnect attempts spaced out after failures (0.1 s doubling to 2 s), so a stream of
    requests against a database that is down fails fast instead of each waiting."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.next_try = 0.0
        self.last_error: ProtocolError | None = None

    def check(self) -> None:
        if self.last_error is not None and time.monotonic() < self.next_try:
            raise self.last_error

    def failed(self, error: ProtocolError) -> None:
        self.delay = min(max(self.delay * 2, BACKOFF_FIRST), BACKOFF_MAX)
        self.next_try = time.monotonic() + self.delay
        self.last_error = error

    def succeeded(self) -> None:
        self.delay, self.next_try, self.last_error = 0.0, 0.0, None


class Connections:
    """One process's connections to the database."""

    def __init__(self, url: str, durability: Durability) -> None:
        self.url = url
        self.durability = durability
        self.where = describe(url)
        self.redact = Redactor(url)
        self.host = socket.gethostname()
        self.conn: psycopg.Connection | None = None
        """The writer connection: every lock, append and commit of this process."""
        self.serial = 0
        """Which writer connection this is: advisory locks die with their connection."""
        self.in_tx = False
        """A transaction is open on the writer connection (group commit keeps it open)."""
        self.channel: str | None = None
        """This role's own notification channel (channels.py), read with the writer."""
        self._backoff = Backoff()
        self._pool: ConnectionPool | None = None
        self._pool_lock = threading.Lock()
        self._schema_lock = threading.Lock()
        self._migrated = False

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"application_name": f"sessiond {self.host} pid {os.getpid()}"}
        if "connect_timeout" not in conninfo.conninfo_to_dict(self.url):
            params["connect_timeout"] = CONNECT_TIMEOUT
        return params

    def writer(self) -> psycopg.Connection:
        """The writer connection (made, and the schema migrated, on first use)."""
        conn = self.conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        self.drop()
        conn = self.connect(writer=True)
        self.conn = conn
        self.serial += 1
        return conn

    def usable(self) -> psycopg.Connection | None:
        """The writer connection if it is still up (None: gone, and its locks with it)."""
        conn = self.conn
        if conn is None or conn.closed or conn.broken:
            return None
        return conn

    def connect(self, *, writer: bool = False) -> psycopg.Connection:
        """A new connection, the schema migrated with the first one this process makes;
        with backoff, so a database that is down fails fast and its first failure says
        why (StorageError, never the password)."""
        self._backoff.check()
        conn = None
        try:
            conn = psycopg.connect(self.url, autocommit=True, **self.params())
            self.ensure_schema(conn)
            if writer:
                self.channel = channels.own_channel(conn)
            if writer and self.durability is Durability.NONE:
                # Committed rows survive a sessiond crash; a database crash may lose the
                # last ones, as `none` loses the page cache of the embedded store.
                conn.execute("SET synchronous_commit = off")
        except Exception as exc:
            if conn is not None:
                conn.close()
            error = storage_error(exc, f"cannot reach {self.where}", self.redact)
            self._backoff.failed(error)
            logger.info("%s", error.message)
            raise error from None
        self._backoff.succeeded()
        return conn

    def ensure_schema(self, conn: psycopg.Connection) -> None:
        """The schema brought up to date by this process's first connection (any other
        waits for it: the listener's may come first)."""
        with self._schema_lock:
            if not self._migrated:
                schema.migrate(conn)
                self._migrated = True

    def drop(self) -> None:
        """Close the writer connection (PostgreSQL releases its advisory locks)."""
        if self.conn is not None:
            with suppress(Exception):  # already gone; nothing else to release
                self.conn.close()
            self.conn = None
            self.in_tx = False

    def _reader(self) -> ConnectionPool:
        """Reads go through a small pool (they may run on several threads at once)."""
        with self._pool_lock:
            if self._pool is None:
                if not self._migrated:  # a read first: reach it (and migrate) on our own
                    self.connect().close()
                self._pool = ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=4,
                    kwargs={"autocommit": True, **self.params()},
                    check=ConnectionPool.check_connection,
                    timeout=POOL_WAIT,
                    name="sessiond-read",
                    open=True,
                )
            return self._pool

    @contextmanager
    def read(self) -> Iterator[psycopg.Connection]:
        """A pooled connection for reads; driver failures become StorageError."""
        try:
            with self._reader().connection() as conn:
                yield conn
        except ProtocolError:
            raise
        except (psycopg.Error, PoolTimeout) as exc:
            raise storage_error(exc, self.where, self.redact) from None

    def close(self) -> None:
        self.drop()
        with self._pool_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
