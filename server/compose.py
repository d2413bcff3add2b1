"""How the parts a host holds are made, for both hosts: `sessiond serve`'s `SessiondServer`
(server/app.py, which also owns the store worker and the reader threads) and the ACP
proxy (server/acp/proxy.py, whose store work runs in place on its loop).

Each part is made by the first request that needs it, never at startup (no warmup:
docs/architecture.md), so every import here is inside the function that needs it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from restore.service import ThreadService
    from restore.stores import Settings
    from restore.stores.api import Durability, Store
    from server.hooks.lifecycle import LifecycleHooks
    from server.host import Host
    from server.live.subscriptions import Subscriptions
    from server.live.watch import Watcher

logger = logging.getLogger("sessiond")


def settings(
    home: str | Path,
    store_url: str | None,
    durability: str | Durability,
    redaction: str | None = None,
) -> Settings:
    """Where threads are kept: the data directory, a `postgresql://` URL or None (the
    embedded store under the home), how durable an acknowledged record is, and the
    redaction mode (None: `SESSIOND_REDACT`, else the home's redaction.toml)."""
    from pathlib import Path

    from restore.stores import Settings
    from restore.stores.api import Durability

    return Settings(Path(home), store_url, Durability(durability), redaction)


def store(settings: Settings) -> Store:
    """The configured store, once the data directory checks out: an embedded store needs a
    usable home (StorageError until it is) and is read-only in a read-only one; a shared
    store keeps its threads elsewhere and connects with its first request."""
    from restore.home.state import open_home
    from restore.stores import open_store

    read_only = False
    if not settings.store:
        read_only = open_home(settings.home).read_only is not None
    return open_store(settings, read_only=read_only)


def thread_service(settings: Settings, *, store: Store | None = None) -> ThreadService:
    """The thread service on `store` (or one opened from `settings`). A home that is a file
    or unreadable is StorageError for this request and the next (checked again: the user
    may fix it while the host runs); a read-only one is said once, here."""
    from restore.home.state import open_home
    from restore.service import open_service

    home = open_home(settings.home)
    if home.read_only is not None and not settings.store:
        logger.warning("serving %s read-only: %s", home.path, home.read_only)
    return open_service(settings, store=store)


def lifecycle_hooks(host: Host) -> LifecycleHooks:
    """The host's lifecycle hooks, made by the first session start or end."""
    from server.hooks.lifecycle import LifecycleHooks

    return LifecycleHooks(host)


def watcher(host: Host, subscriptions: Subscriptions, follow: tuple[str, ...]) -> Watcher:
    """The watcher of files other processes write and of the agents `--follow` names."""
    from server.live.watch import Watcher

    return Watcher(host, subscriptions, follow)
