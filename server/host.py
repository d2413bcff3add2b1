"""The host interface: what a feature (hooks, relay, subscriptions, watch, handlers, debug)
may ask of the process that serves it.

Two processes serve: the JSON-RPC server (server/app.py, `SessiondServer`) and the ACP
proxy (server/acp/proxy.py, `AcpProxy`). A feature takes a `Host` and a `Client`, never
one of them, so it can be read (and checked by mypy) without the rest of the server, and
no feature imports the module that composes it (tests/test_layers.py: no import circle).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from restore.service import ThreadService
    from restore.stores.api import Pages

T = TypeVar("T")

Notice = tuple[str, dict[str, Any]]
"""A notification to every client: (method, params)."""


class Host(Protocol):
    """The loop, the thread service, where store work runs, and how clients are told."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop while serving (None before it runs)."""

    @property
    def service(self) -> ThreadService:
        """Created by its first use (no warmup: docs/architecture.md)."""

    @property
    def pages(self) -> Pages:
        """Pages of any thread, for reader threads."""

    async def run_in_worker(self, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` where store work runs, after every job queued before it."""

    async def run_between_requests(self, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` where store work runs, once no request is being answered (soon
        after, under a steady stream): the server's own work that no client waits for."""

    async def run_reader(self, work: Callable[[], T]) -> T:
        """`work()` off the store's thread: reads that need no lock and no store state."""

    def broadcast(self, method: str, params: Any) -> None:
        """A notification to every client that initialized (none in ACP: no such
        notifications there)."""

    def announce_threads(
        self,
        notices: list[Notice],
        parents: Iterable[str | None] = (),
        then: Callable[[], None] | None = None,
    ) -> asyncio.Future[None]:
        """`thread/started` / `thread/updated` notices, with the child counts the listing
        knows, then a `thread/updated` for each parent, then `then()`."""


class Client(Protocol):
    """Who asked: the owner its sessions are held under and the folders it opened
    (`{"path", "name", "trusted"}`; an ACP editor opens none, so only user-level hooks
    run for its sessions)."""

    @property
    def owner(self) -> str: ...

    @property
    def workspace_folders(self) -> list[dict[str, Any]]: ...


def thread_notice(info: dict[str, Any], *, started: bool = False, deleted: bool = False) -> Notice:
    """The one way a `thread/started` or `thread/updated` notification is built: `info`
    is a ThreadInfo (`ThreadSummary.thread_info()`), or only `{"threadId"}` when deleted."""
    if deleted:
        return "thread/updated", {"thread": {"threadId": info["threadId"]}, "deleted": True}
    return ("thread/started" if started else "thread/updated"), {"thread": info}
