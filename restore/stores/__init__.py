"""Where threads are kept: the store interface (`base`) and its backends.

`embedded` (JSONL files + SQLite index, the default) and `postgres` (a shared database, for
teams and several machines). `open_store` picks one from a URL; the PostgreSQL backend and
its driver are imported only when a `postgresql://` URL asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ErrorKind, ProtocolError
from restore.stores.api import Index, Pages, Store, Writer

if TYPE_CHECKING:
    from restore.home.layout import Layout
    from restore.stores.embedded.files import Durability

__all__ = ["Index", "Pages", "Store", "Writer", "is_shared", "open_store"]

SCHEMES = ("postgresql://", "postgres://")


def is_shared(url: str | None) -> bool:
    return bool(url) and str(url).startswith(SCHEMES)


def open_store(url: str | None, layout: Layout, durability: Durability) -> Store:
    """The embedded store under `layout` (no URL), or the database a URL names."""
    if not url:
        from restore.stores.embedded.store import EmbeddedStore

        return EmbeddedStore(layout, durability)
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
    return PostgresStore(url, durability)
