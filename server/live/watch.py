"""Live updates from files other processes write, announced to every client.

Two kinds of writers are followed with one `watchfiles` watcher: the agents named by
`serve --follow` (their new and growing sessions are imported as they are written), and
other sessiond processes on the same data dir (a second editor window: their threads
appear and grow here without a restart). Both become `thread/started` / `thread/updated`
(and `item/recorded` for subscribers of a thread another process appended to).

Started by the first `thread/list` or `thread/subscribe` (no warmup: docs/architecture.md).
All file work runs on the store worker, a batch of
files per job, so a long first import never holds up other requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server.host import thread_notice

if TYPE_CHECKING:
    from restore.imports.importer import Importer
    from restore.imports.results import FileResult
    from restore.stores.api import ExternalChange
    from server.host import Host, Notice
    from server.live.subscriptions import Subscriptions

logger = logging.getLogger("sessiond.watch")
DEBOUNCE_MS = 200  # changes are grouped at most this long: clients see them within a second
STEP_MS = 3  # a quiet pause this long ends a batch: a follower hears of an append in ~5 ms
LOOK_FILES = 16
"""Changed thread files looked at in one store job (`_threads_changed`): ~0.1 ms
when they are this process's own writes (one `lstat` each)."""
READY_MS = 500  # how long an idle watcher waits between (empty) wake-ups
WATCH_OPTIONS: dict[str, Any] = {"debounce": DEBOUNCE_MS, "step": STEP_MS,
                                 "rust_timeout": READY_MS, "yield_on_timeout": True,
                                 "recursive": True}  # fmt: skip
"""watchfiles' settings, for this watcher and `sessiond import --follow` alike. With
`yield_on_timeout`, the first (empty) yield comes once the watcher is in place: only then
is what was written meanwhile caught up, so nothing falls between the two."""


class Watcher:
    """One per server: follows the data dir and the followed agents' stores."""

    def __init__(self, host: Host, subscriptions: Subscriptions, follow: tuple[str, ...]) -> None:
        self.host = host
        self.subscriptions = subscriptions
        self.follow = follow
        """The agents `serve --follow` names: their sessions imported as they are written."""
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.importers: list[Importer] = []
        self._since = 0.0  # when watching was asked for: threads newer than that are new
        self._since_ts = ""

    def ensure_started(self, since: float | None = None) -> None:
        """Start watching (once); called by the requests that show clients threads.

        `since` (a time.time()) is when the caller began looking: threads written after it
        are caught up once the watcher is in place, so a start deferred past the caller's
        answer misses nothing."""
        if self._task is None and self.host.loop is not None:
            from restore.stores.records import ts_at

            # One instant for both: a thread created after the caller began looking (before
            # the deferred start) is announced as started, not as updated.
            self._since = since or time.time()
            self._since_ts = ts_at(self._since)
            self._task = self.host.loop.create_task(self._run(), name="sessiond-watch")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        try:
            await self._watch()
        except Exception:  # the server goes on without live updates, and says why
            logger.exception("file watching stopped")

    async def _watch(self) -> None:
        from watchfiles import Change, awatch

        host = self.host
        # Other processes' thread files (the embedded store's); a shared store announces
        # other writers itself (LISTEN/NOTIFY), so only the followed agents are watched.
        local = await host.run_in_worker(lambda: host.service.store.local)
        threads = local.directories if local is not None else []
        self.importers = await host.run_in_worker(self._make_importers)
        roots = [importer.root for importer in self.importers if importer.root.is_dir()]
        for importer in self.importers:
            if not importer.root.is_dir():
                logger.warning(
                    "not following %s: %s is not a directory", importer.agent.id, importer.root
                )
        for directory in threads:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        watched = [*threads, *roots]
        if not watched:
            return
        changes_seen = awatch(*watched, stop_event=self._stop, **WATCH_OPTIONS)
        catch_up: asyncio.Task[None] | None = None
        # A batch is sorted with strings, not paths: it runs on the loop, between answers,
        # and a busy server's batch is hundreds of its own writes (as paths, ~3 ms).
        thread_dirs = frozenset(str(directory) for directory in threads)
        under_threads = tuple(f"{directory}{os.sep}" for directory in thread_dirs)
        try:
            async for changes in changes_seen:
                # The first (empty) yield: the threads written meanwhile are looked at and
                # each followed store imported (WATCH_OPTIONS).
                catch_up = catch_up or asyncio.create_task(self._catch_up())
                added = {path for change, path in changes if change == Change.added}
                shards = [
                    p
                    for p in added
                    if os.path.dirname(p) in thread_dirs and not p.endswith(".jsonl")
                ]
                if shards:  # listed on the worker, like every other file this watcher reads
                    added |= await host.run_in_worker(_files_in_new_shards, shards)
                touched = {path for _, path in changes} | added
                files = sorted(
                    p for p in touched if p.endswith(".jsonl") and p.startswith(under_threads)
                )
                if files:
                    await self._threads_changed(files, added)
                if self.importers:
                    await self._agents_changed(touched, added)
        finally:
            if catch_up is not None:
                catch_up.cancel()

    async def _agents_changed(self, touched: set[str], added: set[str]) -> None:
        """The followed agents' session files in a batch, imported."""
        roots = [importer.root for importer in self.importers]
        new = {Path(path) for path in added}
        folders = [p for p in new if any(root in p.parents for root in roots)]
        if folders:  # an agent's new project (or day) folder and its first session
            new |= await self.host.run_in_worker(files_in_new_folders, folders)
        paths = sorted({Path(path) for path in touched} | new)
        for importer in self.importers:
            mine = [p for p in paths if importer.watches(p)]
            if mine:
                await self._import(importer, mine)

    def _make_importers(self) -> list[Importer]:
        if not self.follow:  # the importers' modules are most of an import's: not for this
            return []
        from restore.agents.registry import named
        from restore.imports.importer import Importer

        return [Importer(self.host.service, named(flag), live=True) for flag in self.follow]

    async def _catch_up(self) -> None:
        """Threads other processes wrote while the watcher started, then the first import
        of each followed store, in batches, with `$/progress`."""
        service = self.host.service
        since = await self.host.run_in_worker(service.threads_changed_since, self._since)
        self._announce_external(await self.host.run_in_worker(service.external_changes, since))
        if not self.importers:
            return
        from restore.imports.importer import CHUNK
        from server.rpc.progress import reporter

        for importer in self.importers:
            sources = await self.host.run_in_worker(importer.scan)
            assert self.host.loop is not None
            progress = reporter(
                self.host.loop,
                self.host.broadcast,
                f"Importing {importer.agent.name} sessions",
                "session",
                "imported",
            )
            progress(0, len(sources))
            for start in range(0, len(sources), CHUNK):
                batch = sources[start : start + CHUNK]
                self._announce(await self.host.run_in_worker(importer.import_files, batch))
                progress(min(start + CHUNK, len(sources)), len(sources))

    async def _import(self, importer: Importer, paths: list[Path]) -> None:
        """Session files (or a database store) that changed: what is new, announced."""
        self._announce(await self.host.run_in_worker(importer.import_changed, paths))

    def _announce(self, results: list[FileResult]) -> None:
        """Each imported thread to every client (with its `childCount`; a new sub-agent's
        parent with its new one), then its new lines to its followers."""
        notices, parents, appended = [], [], []
        results = [*results, *(child for result in results for child in result.children)]
        for result in results:
            if result.not_read:  # a followed store has no summary: the log says it
                logger.warning(
                    "not imported: %s: %s: %s", result.path, result.status, result.reason
                )
            if result.changed and result.summary is not None:
                started = result.status != "updated"
                notices.append(thread_notice(result.summary.thread_info(), started=started))
                if started:
                    parents.append(result.summary.parentThreadId)
                appended.append((result.summary.threadId, result.appended))

        def recorded() -> None:
            for thread_id, lines in appended:
                self.subscriptions.recorded(thread_id, lines)

        if notices:
            self.host.announce_threads(notices, parents, then=recorded)

    async def _threads_changed(self, paths: list[str], added: set[str]) -> None:
        """Thread files another sessiond process wrote: their new rows, to everyone."""
        from restore.ids import is_thread_id

        # Not a thread file (a temporary, say): not looked at.
        ids = [stem for path in paths if is_thread_id(stem := _stem(path))]
        new = frozenset(_stem(path) for path in added)
        # A few files a job, each submitted once the one before is done and between
        # requests: a request that arrives meanwhile runs between two, not after all (most
        # of a batch is often this process's own writes, ~5 us a file to tell).
        for start in range(0, len(ids), LOOK_FILES):
            chunk = ids[start : start + LOOK_FILES]
            look = self.host.service.external_changes
            changes = await self.host.run_between_requests(look, chunk)
            self._announce_external(changes, new)

    def _announce_external(
        self, changes: list[ExternalChange], added: Collection[str] = frozenset()
    ) -> None:
        """A thread is new to clients when its file was created while watched, or seen
        for the first time and created after watching began."""
        notices: list[Notice] = []
        parents, followed = [], []
        for change in changes:
            if change.thread is None:
                notices.append(thread_notice({"threadId": change.thread_id}, deleted=True))
                continue
            created = change.thread.get("createdAt") or ""
            new = change.thread_id in added or (change.first_look and created >= self._since_ts)
            notices.append(thread_notice(change.thread, started=new))
            parents.append(change.thread.get("parentThreadId"))  # archived there, say
            last_seq = change.row[0].lastSeq if change.row is not None else None
            followed.append((change.thread_id, last_seq))

        def tell_followers() -> None:
            for thread_id, last_seq in followed:
                self.subscriptions.changed_elsewhere(thread_id, last_seq)

        if notices:
            self.host.announce_threads(notices, parents, then=tell_followers)

    def close(self) -> None:
        """Release the importers' ledgers (on the store thread, at shutdown)."""
        for importer in self.importers:
            importer.close()


def _files_in_new_shards(shards: list[str]) -> set[str]:
    """Thread files in shard directories created since the last batch. The watch on a new
    directory is only added once its creation is seen, so a thread file another process
    created right after its shard (the first thread of that shard) sends no event itself."""
    found: set[str] = set()
    for shard in shards:
        with contextlib.suppress(OSError):  # gone again, or not a directory
            found.update(
                os.path.join(shard, name) for name in os.listdir(shard) if name.endswith(".jsonl")
            )
    return found


def files_in_new_folders(added: list[Path]) -> set[Path]:
    """Files in the folders among `added` (paths created under a followed agent's store
    since the last batch), at any depth (Codex makes `YYYY/MM/DD` at once), never through
    a link. As with a new shard, the watch on a new folder is only added once its creation
    is seen: the session an agent creates in it right away sends no event of its own (a
    person's first session in a new directory was not imported until written again)."""
    found: set[Path] = set()
    for folder in added:
        if folder.suffix in (".jsonl", ".json"):
            continue  # a session file itself, not a folder: nothing to list
        for directory, _, names in os.walk(folder):
            found.update(Path(directory, name) for name in names)
    return found


def _stem(path: str) -> str:
    """The file name without its extension (`Path.stem`, for a string)."""
    return os.path.splitext(os.path.basename(path))[0]
