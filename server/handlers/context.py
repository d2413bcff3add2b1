"""What a handler is given: its connection, and the server as the `Serving` interface.

`Serving` is the host interface (server/host.py) plus what only the JSON-RPC server has:
its configuration, lifecycle hooks, followers, the store worker's batches, index rows
for other processes. `SessiondServer` (server/app.py) is the one that implements it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from server.handlers.readahead import ReadAhead
from server.host import Host

if TYPE_CHECKING:
    import asyncio

    from restore.redaction.engine import Redactor
    from restore.service import ThreadService
    from restore.stores.api import Progress
    from restore.summary import ThreadSummary
    from server.config import ServerConfig
    from server.hooks.lifecycle import LifecycleHooks
    from server.live.subscriptions import Subscriptions
    from server.rpc.dispatch import SessiondProtocol
    from server.worker import StoreWorker

T = TypeVar("T")


class Serving(Host, Protocol):
    """The JSON-RPC server, as its handlers see it."""

    config: ServerConfig
    worker: StoreWorker
    subscriptions: Subscriptions

    @property
    def hooks(self) -> LifecycleHooks:
        """Created by the first session start or end (no warmup)."""

    def ensure_watching(self, since: float | None = None) -> None:
        """Follow files other processes write, from now on."""

    def watch_after_answer(self, since: float) -> None:
        """Start watching once the current request's answer is written."""

    async def run_search(self, work: Callable[[], T]) -> T:
        """`work()` on the search thread (one search at a time), beside the store thread."""

    def run_redaction(self, work: Callable[[], T], *, large: bool) -> asyncio.Future[T]:
        """`work()` (a record's redaction) on a redaction thread, never the store thread."""

    def opened_service(self) -> ThreadService | None:
        """The service if a request opened it already; never opens it (any thread)."""

    def redactor(self) -> Redactor | None:
        """The open store's redactor (None: off, or no store yet: it redacts in `stamp`)."""

    def schedule_index_flush(self) -> None:
        """Batched index rows written once records pause (other processes' listings)."""

    def announce_update(self, summary: ThreadSummary) -> None:
        """`thread/updated` after records, coalesced per thread."""

    def workspace_changed(self) -> None:
        """The set of open workspace folders changed."""


@dataclass
class Context:
    connection: SessiondProtocol
    server: Serving
    read_ahead: ReadAhead = field(default_factory=ReadAhead)

    @property
    def service(self) -> ThreadService:
        return self.server.service

    def workspace_folder_of(self, cwd: str) -> str | None:
        """The innermost workspace folder the client opened that holds `cwd` (resolved:
        `A/../B` is not in A). Does file I/O (realpath): call it on the worker."""
        from restore.access import folder_of

        return folder_of(cwd, self.folder_paths())

    def folder_paths(self) -> list[str]:
        """Every workspace folder the client opened, as it named them."""
        return [str(folder.get("path", "")) for folder in self.connection.workspace_folders]

    def trusted_folders(self) -> list[str]:
        """The folders the client marked trusted: only there may git run the repository's
        own programs (fsmonitor, hooks, filters) and workspace hooks run."""
        return [
            str(folder.get("path", ""))
            for folder in self.connection.workspace_folders
            if folder.get("trusted") is True
        ]

    def progress(self, title: str) -> Progress:
        """A `$/progress` reporter for this client, callable from the worker thread."""
        from server.rpc.progress import reporter

        loop = self.server.loop
        assert loop is not None, "progress is only reported while serving"
        return reporter(loop, self.connection.notify, title, "thread", "indexed")


Handler = Callable[[Context, Any], Any]
"""A handler: (context, params validated) -> a result, or an awaitable of one."""
