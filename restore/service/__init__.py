"""The thread service the server calls: sessions, leases, resume reports, ledger, edits.
Invariant: talks to storage only through the store interface (restore/stores/api.py), and
is built in one place, `open_service`, from the settings serve, acp, every command, the
tests and the bench share."""

from __future__ import annotations

from restore.home.layout import Layout
from restore.home.state import open_home
from restore.service.threads import ThreadService
from restore.stores import Settings, open_store
from restore.stores.api import Store

__all__ = ["Settings", "ThreadService", "open_service"]


def open_service(settings: Settings, *, store: Store | None = None) -> ThreadService:
    """The thread service on the configured store, once the data directory checks out
    (StorageError otherwise: restore/home/state.py). `store`: one the caller opened
    already from the same settings (the server's, whose pages its reader threads share)."""
    home = open_home(settings.home)
    if store is None:
        store = open_store(settings, read_only=home.read_only is not None)
    return ThreadService(Layout(home.path), store, home)
