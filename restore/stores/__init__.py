"""Where threads are kept: the store interface (`api`) and its two backends, `embedded`
(JSONL files + SQLite index, the default) and `postgres` (a shared database, for teams and
several machines). Invariant: nothing outside this package imports a backend's modules;
`open_store` picks one from the settings, and the PostgreSQL backend and its driver are
imported only when a `postgresql://` URL asks for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from protocol.errors import ErrorKind, ProtocolError
from restore.stores.api import Durability, Store

__all__ = ["Settings", "is_shared", "open_store"]

SCHEMES = ("postgresql://", "postgres://")


@dataclass(frozen=True)
class Settings:
    """Where threads are kept and how durably: what serve, acp, every command, the tests
    and the bench configure (server/config.py's `--home`, `--store`, `--durability`)."""

    home: Path
    """The data directory: the embedded store's files, and every store's import ledger."""
    store: str | None = None
    """A `postgresql://` URL for the shared store; None: the embedded store under `home`."""
    durability: Durability = Durability.FSYNC
    redaction: str | None = None
    """off | default | strict (`--redact`); None: `SESSIOND_REDACT`, else the home's
    `redaction.toml`, else default (restore/redaction/settings.py)."""


def is_shared(url: str | None) -> bool:
    return bool(url) and str(url).startswith(SCHEMES)


def open_store(settings: Settings, *, read_only: bool = False) -> Store:
    """The embedded store under `settings.home` (no URL), or the database a URL names.
    `read_only`: the data directory cannot be written (restore/home/state.py); a shared
    store keeps its threads elsewhere, so the home's state does not bind it. Either store
    redacts every record and blob before storing it (restore/redaction)."""
    from restore.redaction.settings import deferred_redactor

    redactor = deferred_redactor(settings.home, settings.redaction)  # made on first use
    store = _open_backend(settings, read_only=read_only)
    store.redactor = redactor  # type: ignore[assignment]  # the slot takes a deferred one
    return store


def _open_backend(settings: Settings, *, read_only: bool) -> Store:
    url = settings.store
    if not url:
        from restore.home.layout import Layout
        from restore.stores.embedded.store import EmbeddedStore

        return EmbeddedStore(Layout(settings.home), settings.durability, read_only=read_only)
    if not is_shared(url):
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS,
            "--store takes a postgresql:// URL (or nothing, for the embedded store)",
            field="store",
        )
    try:
        from restore.stores.postgres.store import PostgresStore
    except ImportError:
        raise ProtocolError(
            ErrorKind.STORAGE_ERROR,
            "the PostgreSQL store needs psycopg: pip install 'sessiond[postgres]'",
            retryable=False,
        ) from None
    return PostgresStore(url, settings.durability)
