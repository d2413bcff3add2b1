"""Group commit for thread files: the writers owing an fdatasync, and the syncs begun.

Records appended with `defer_sync` are written at once and synced together: the store
thread hands every file owing a sync to the committer thread (`begin`) and goes on
appending; records that finish during that sync share the next one. A file whose sync
failed is synced again before a retried record (a duplicate, which writes nothing) can be
acknowledged on the strength of a sync that failed.
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.errors import ProtocolError
from restore.stores.embedded.files import PendingSync, ThreadWriter


class GroupCommit:
    def __init__(self) -> None:
        self.unsynced: dict[str, ThreadWriter] = {}
        """Writers with appends not synced yet, by thread: the next `begin` takes them."""
        self.syncs: list[PendingSync] = []
        """Syncs begun and not yet checked (a failed one is redone)."""

    def owe(self, writer: ThreadWriter) -> None:
        self.unsynced[writer.thread_id] = writer

    def begin(self) -> Callable[[], None] | None:
        """The syncs that make every deferred append durable (one per file), to run on
        another thread; None: nothing to sync."""
        writers, self.unsynced = self.unsynced, {}
        in_flight = []
        for pending in self.syncs:
            if not pending.done.is_set():
                in_flight.append(pending)
            elif pending.error is not None and not pending.writer.closed:
                pending.writer.unsynced = True
                writers.setdefault(pending.writer.thread_id, pending.writer)
        syncs = [s for w in writers.values() if (s := w.begin_sync()) is not None]
        self.syncs = in_flight + syncs
        if not syncs:
            return None

        def sync_all() -> None:
            failure: ProtocolError | None = None
            for pending in syncs:
                try:
                    pending.run()
                except ProtocolError as exc:
                    failure = failure or exc
            if failure is not None:
                raise failure

        return sync_all
