"""The sessiond server, the composition root of `sessiond serve`: it builds the thread
service, the store worker and reader threads, hooks, subscriptions and the watcher, each
on first use, and hands each feature itself as the host interface (server/host.py,
server/handlers/context.py's `Serving`). Nothing here is imported by a feature.

All thread work runs on one worker thread, in order (server/worker.py): the store needs no
locks of its own, fsync never blocks the event loop, and the loop stays free to read, cancel
and answer `initialize`. Pages of `thread/read` are the exception: they run on reader
threads, since files are append-only and readers need no lock, so one client paging
through a long thread never holds another client's record. So are searches of the
embedded store, waited for on a search thread, run in a process with a connection of
their own (restore/stores/embedded/search_child.py). The thread service (and with
it SQLite and the git probe) is created by the first request that needs it, never at
startup (no warmup: docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from server import compose
from server.config import ServerConfig
from server.host import Notice, thread_notice
from server.index_flush import IndexFlush
from server.live.subscriptions import Subscriptions
from server.rpc.dispatch import SessiondProtocol
from server.worker import LANE, Batched, StoreWorker, log_failure

if TYPE_CHECKING:
    from protocol.errors import ProtocolError
    from restore.redaction.engine import Redactor
    from restore.service import ThreadService
    from restore.stores import Settings
    from restore.stores.api import Pages, Store
    from restore.summary import ThreadSummary
    from server.handlers.context import Serving
    from server.hooks.lifecycle import LifecycleHooks
    from server.live.watch import Watcher

T = TypeVar("T")
UPDATE_COALESCE_SECONDS = 0.05
QUIET_WAIT_SECONDS = 0.02
"""How long work no request waits for (`run_between_requests`) waits for the requests being
answered: under a steady stream of requests it runs anyway, this much later."""
READER_THREADS = 2
logger = logging.getLogger("sessiond")


# Collect the youngest objects every 50,000 net allocations instead of Python's 700. A
# `thread/read` page of 10,000 items, a resume or an index reconcile allocates hundreds of
# thousands of objects that live until the answer is sent; at 700 the collector walked
# them again and again (a quarter of reading 125,000 items back: 400 -> 300 ms in
# process). Cyclic garbage waits a little longer; nothing else changes.
GC_THRESHOLDS = (50_000, 20, 100)


class SessiondServer:
    def __init__(self, config: ServerConfig) -> None:
        gc.set_threshold(*GC_THRESHOLDS)
        self.config = config
        self._service: ThreadService | None = None
        self._store: Store | None = None
        self._store_lock = threading.Lock()
        self.worker = StoreWorker(begin_commit=self._begin_commit, idle=self._idle)
        # Threads start on the first read, not here.
        self._readers = ThreadPoolExecutor(READER_THREADS, thread_name_prefix="sessiond-read")
        self._searches = ThreadPoolExecutor(1, thread_name_prefix="sessiond-search")
        # A record's redaction, off the store thread (`run_redaction`): one thread for
        # records of ordinary size, one for the large, so that neither kind waits behind
        # the other (a client's 16 MiB record, another's small one).
        self._redacting = (Batched("sessiond-redact"), Batched("sessiond-redact-large"))
        self.connections: list[SessiondProtocol] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self._index_flush = IndexFlush(self._flush_index)
        self._pending_updates: dict[str, ThreadSummary] = {}
        self._announcing = 0
        """Notices waiting on the worker for their counts (`announce_threads`)."""
        self.subscriptions = Subscriptions(self, config.max_frame)
        self.workspace_listeners: list[Callable[[], None]] = []
        self.home_lost_listeners: list[Callable[[], None]] = []
        """Told once when a write finds the data directory (or a thread file) deleted
        under the server (a lingering WebSocket server then leaves)."""
        self._home_lost = False
        self._hooks: LifecycleHooks | None = None
        self._watcher: Watcher | None = None

    @property
    def hooks(self) -> LifecycleHooks:
        """Lifecycle hooks, created by the first session start or end (no warmup:
        docs/architecture.md)."""
        if self._hooks is None:
            self._hooks = compose.lifecycle_hooks(self)
        return self._hooks

    def ensure_watching(self, since: float | None = None) -> None:
        """Follow files other processes write (server/live/watch.py), from the first request
        that shows a client threads on (no warmup: docs/architecture.md)."""
        if self.config.store and not self.config.follow:
            return  # a shared store's changes come by LISTEN/NOTIFY (`_changed_elsewhere`)
        if self._watcher is None:
            self._watcher = compose.watcher(self, self.subscriptions, self.config.follow)
        self._watcher.ensure_started(since)

    def watch_after_answer(self, since: float) -> None:
        """Start watching once the current request's answer is written: importing and
        starting watchfiles (~35 ms) would otherwise share the CPU with the first
        `thread/list` of a window, the wait a person feels. Called from a handler, the
        call_soon runs before the handler's answer is sent, and the watcher's first step
        (a task) after it; `since` lets the watcher's catch-up cover the gap."""
        assert self.loop is not None
        self.loop.call_soon(self.ensure_watching, since)

    async def stop_watching(self) -> None:
        if self._watcher is not None:
            await self._watcher.stop()

    async def stop_hooks(self) -> None:
        """Before exit: SessionEnd hooks get a short grace, every other hook is killed."""
        if self._hooks is not None:
            await self._hooks.stop()

    @property
    def service(self) -> ThreadService:
        """Created on first use (worker thread only), so startup reads no file."""
        if self._service is None:
            self._service = compose.thread_service(self.settings(), store=self.store)
            # Threads other sessiond processes start or change reach this one's clients
            # (a shared store's LISTEN/NOTIFY), from the first request that needs the store.
            self._service.store.watch(self._changed_elsewhere)
        return self._service

    def settings(self) -> Settings:
        return self.config.store_settings(durability=self.config.durability)

    @property
    def store(self) -> Store:
        """The configured store, made on first use (by a read or by the service), once the
        data directory checks out; a shared store connects with its first request."""
        with self._store_lock:
            if self._store is None:
                self._store = compose.store(self.settings())
                self._store.search.run_apart()  # records and searches side by side
            return self._store

    def _changed_elsewhere(self, event: str, thread_id: str, summary: Any) -> None:
        """From the store's listener thread: tell this server's clients, on the loop."""
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._announce_elsewhere, event, thread_id, summary)

    def _announce_elsewhere(self, event: str, thread_id: str, summary: Any) -> None:
        relay = self.subscriptions.relay
        if event == "listening":
            if relay is not None:
                relay.listening()
            return
        # Followers get the items (nothing for unfollowed threads).
        self.subscriptions.changed_elsewhere(
            thread_id, summary.lastSeq if summary is not None else None
        )
        if event == "started" and summary is not None:
            self.announce_threads(
                [thread_notice(summary.thread_info(), started=True)],
                parents=[summary.parentThreadId],
            )
        elif event == "deleted":
            self.broadcast(*thread_notice({"threadId": thread_id}, deleted=True))
        elif summary is not None:
            self.announce_update(summary)

    @property
    def pages(self) -> Pages:
        """Pages of threads, for any thread (reader threads, and the service's resume)."""
        return self.store.pages

    def _idle(self) -> None:
        """On the store thread, after a pause: nothing if no request opened the store."""
        if self._service is not None:
            self._service.idle()

    def _begin_commit(self) -> Callable[[], None] | None:
        """Group commit's first step (server/worker.py). Never creates the service: the
        committer may ask once more while `close` has already taken it away."""
        return self._service.begin_commit() if self._service is not None else None

    def connect(self, send_bytes: Callable[[bytes], None]) -> SessiondProtocol:
        """A protocol for a new connection, with every handler registered on it."""
        from server.handlers.table import register

        connection = SessiondProtocol()
        connection.send_bytes = send_bytes
        connection.max_frame = self.config.max_frame
        connection.failed = self._failed
        serving: Serving = self  # mypy: the server is what its handlers expect
        register(connection, serving)
        if os.environ.get("SESSIOND_DEBUG") == "1":
            from server import debug

            connection.methods[debug.METHOD] = lambda params: debug.report(
                self._service, self._hooks is not None, self.worker, self.subscriptions.relay
            )
        self.connections.append(connection)
        return connection

    async def disconnect(self, connection: SessiondProtocol) -> None:
        """A client went away: wait for its requests, then end its sessions."""
        if connection not in self.connections:
            return
        self.connections.remove(connection)
        self.subscriptions.drop(connection)
        pending = [f for f in connection.in_flight.values() if not f.done()]
        if pending:
            await asyncio.wait(pending)
        if self._service is not None:
            # Gone without `shutdown` (closed socket, end of input): its sessions end here,
            # recorded and with their SessionEnd hooks, as a close would end them.
            reason = None if connection.shutdown_requested else "disconnect"
            released = await self.run_in_worker(
                lambda: self.service.release_owner(connection.owner, reason)
            )
            if reason is not None and released and self._hooks is not None:
                self._hooks.connection_lost(connection, released)
        self.workspace_changed()

    def workspace_folders(self) -> list[str]:
        """Every folder an initialized client opened, once each, in connection order."""
        paths = (f["path"] for c in self.connections for f in c.workspace_folders)
        return list(dict.fromkeys(paths))

    def _failed(self, error: ProtocolError) -> None:
        """A typed error was answered: one that says the data directory or a thread file
        was deleted under this server tells `home_lost_listeners`, once."""
        if error.details.get("deleted") is True and not self._home_lost:
            self._home_lost = True
            for listener in self.home_lost_listeners:
                listener()

    def workspace_changed(self) -> None:
        for listener in self.workspace_listeners:
            listener()

    async def run_in_worker(self, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` on the store thread, after every job queued before it."""
        return await self.worker.submit(work, *args)

    async def run_between_requests(self, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` on the store thread once no request is being answered (at most
        `QUIET_WAIT_SECONDS` later). For the server's own work that no client waits for:
        the file watcher's look at what changed is mostly this process's own writes, and
        run beside an answer (the store thread's stats and the loop's writing taking the
        interpreter lock from each other) it took ~5x longer and held that answer."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + QUIET_WAIT_SECONDS
        while (left := deadline - loop.time()) > 0:
            pending = [f for c in self.connections for f in c.in_flight.values() if not f.done()]
            if not pending:
                break
            await asyncio.wait(pending, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        return await self.worker.submit(work, *args)

    async def run_reader(self, work: Callable[[], T]) -> T:
        """`work()` on a reader thread: for reads that need no lock and no store state."""
        return await asyncio.get_running_loop().run_in_executor(self._readers, work)

    async def run_search(self, work: Callable[[], T]) -> T:
        """`work()` on the search thread, one search at a time, beside the store thread: a
        search's catch-up and query never hold another client's record."""
        return await asyncio.get_running_loop().run_in_executor(self._searches, work)

    def run_redaction(self, work: Callable[[], T], *, large: bool) -> asyncio.Future[T]:
        """`work()` (a record's redaction) on a redaction thread: never the store thread,
        where its cost held every other client's request (docs/security.md)."""
        return self._redacting[1 if large else 0].submit(work)

    def opened_service(self) -> ThreadService | None:
        return self._service

    def redactor(self) -> Redactor | None:
        """The store's redactor, if the store is open (None: redaction is off, or no
        store yet: it redacts on its own, in `stamp`)."""
        service = self._service
        return service.store.redactor if service is not None else None

    def schedule_index_flush(self) -> None:
        """The batched index rows written once records pause (server/index_flush.py)."""
        self._index_flush.soon(self.loop)

    def _flush_index(self) -> None:
        if self._service is not None:
            # The server's own job, whoever's request set the timer: no connection's lane
            # (its timer callback inherits the request's context), so a record waiting for
            # its redaction does not hold the rows back.
            lane = LANE.set(None)
            try:
                self.worker.submit(self._service.flush_index).add_done_callback(
                    log_failure("background index flush failed", logging.ERROR)
                )
            finally:
                LANE.reset(lane)

    def announce_update(self, summary: ThreadSummary) -> None:
        """`thread/updated` after records, coalesced: at most one per thread every
        `UPDATE_COALESCE_SECONDS`, carrying the latest row. A client streaming records
        would otherwise get one notification per record, which doubles the traffic."""
        if self.loop is None:
            return
        first = summary.threadId not in self._pending_updates
        self._pending_updates[summary.threadId] = summary
        if first:
            self.loop.call_later(UPDATE_COALESCE_SECONDS, self._send_update, summary.threadId)

    def _send_update(self, thread_id: str) -> None:
        summary = self._pending_updates.pop(thread_id, None)
        if summary is not None:
            self.announce_threads([thread_notice(summary.thread_info())])

    def announce_threads(
        self,
        notices: list[Notice],
        parents: Iterable[str | None] = (),
        then: Callable[[], None] | None = None,
    ) -> asyncio.Future[None]:
        """Broadcast `thread/started` / `thread/updated` notices (method, params), their
        ThreadInfos carrying `childCount` where the listing knows it, then a
        `thread/updated` for each of `parents` (a thread whose sub-agents just changed:
        started, archived, deleted) with its new count, then `then()`. The counts are read
        on the worker, after every job queued before; notices with nothing to count go at
        once unless an earlier one still waits for its counts: either way, in order."""
        infos = [
            p["thread"]
            for _, p in notices
            if "childCount" in p["thread"] and p["thread"]["childCount"] is None
        ]
        wanted = [parent for parent in parents if parent]
        if not infos and not wanted and not self._announcing:
            # Nothing to count and no notice before it still waiting for its counts: sent
            # now, in order. A hop to the store thread would put the answer of the request
            # that announces (a reset's, say) behind whatever the worker took up meanwhile
            # (the file watcher's look at our own writes, a successor item: ~1 ms each).
            sent_now: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            try:
                self._send_notices(notices, [], then)
            except Exception as exc:
                sent_now.set_exception(exc)
            else:
                sent_now.set_result(None)
            sent_now.add_done_callback(log_failure("thread notifications not sent", logging.ERROR))
            return sent_now

        def count() -> list[dict[str, Any]]:
            if not infos and not wanted:
                return []
            try:
                return self.service.with_child_counts(infos, wanted)
            except Exception as exc:  # the notices go out all the same, without counts
                logger.warning("child counts not read: %s", exc)
                return []

        def send(parent_rows: list[dict[str, Any]]) -> None:
            self._send_notices(notices, parent_rows, then)

        def counted(_: asyncio.Future[None]) -> None:
            self._announcing -= 1

        self._announcing += 1
        sent = self.worker.submit(count, then=send)
        sent.add_done_callback(counted)
        sent.add_done_callback(log_failure("thread notifications not sent", logging.ERROR))
        return sent

    def _send_notices(
        self,
        notices: list[Notice],
        parent_rows: list[dict[str, Any]],
        then: Callable[[], None] | None,
    ) -> None:
        for method, params in notices:
            self.broadcast(method, params)
        for row in parent_rows:
            self.broadcast("thread/updated", {"thread": row})
        if then is not None:
            then()

    def broadcast(self, method: str, params: Any) -> None:
        for connection in self.connections:
            if connection.initialized:
                connection.notify(method, params)

    def close(self) -> None:
        """Release every writer lock and the index; safe to call more than once."""
        if self._hooks is not None:
            self._hooks.kill_all()
        if self._watcher is not None:
            self.worker.run_blocking(self._watcher.close)
        self._searches.shutdown(wait=True)  # before the store closes the search's connection
        if self._service is not None:
            service, self._service = self._service, None
            self.worker.run_blocking(service.close_all)  # the store too
        elif self._store is not None:  # pages were read, nothing written
            self.worker.run_blocking(self._store.close)
        self.worker.shutdown()
        self._readers.shutdown(wait=True)
        for batched in self._redacting:
            batched.shutdown()
