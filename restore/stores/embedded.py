"""The embedded store: JSONL thread files, the SQLite index, snapshot and blob files.

The default, with no service to run: everything under `$SESSIOND_HOME` (docs/storage.md).
This class gathers the parts the store interface names (restore/stores/base.py) over the
modules that implement them, so `ThreadService` asks one object whichever backend it has.
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.errors import ErrorKind, ProtocolError
from restore import blobs, snapshots
from restore.index import ThreadIndex
from restore.paths import Layout
from restore.store import Durability, ThreadStore
from restore.stores.base import Announce
from restore.summary import ThreadSummary


class EmbeddedStore(ThreadStore):
    """Thread files plus their derived companions, under one data directory."""

    def __init__(self, layout: Layout, durability: Durability = Durability.FSYNC) -> None:
        super().__init__(layout, durability)
        self.index = ThreadIndex(layout, self.read_summary)

    def set_archived(self, thread_id: str, archived: bool) -> ThreadSummary:
        """Archive or unarchive: the file moves between `threads/` and `archived/`."""
        path = self.move(thread_id, to_archived=archived)
        summary = self.read_summary(path, archived)
        if summary is None:
            raise ProtocolError(
                ErrorKind.THREAD_NOT_FOUND, "thread vanished while moving", threadId=thread_id
            )
        self.index.upsert(summary, path)
        return summary

    def delete(self, thread_id: str) -> None:
        super().delete(thread_id)
        snapshots.discard(self.layout, thread_id)
        self.index.remove(thread_id)

    def exists(self, thread_id: str) -> bool:
        return self.layout.locate(thread_id) is not None

    def transcript_path(self, thread_id: str) -> str | None:
        return str(self.layout.thread_path(thread_id))

    def load_snapshot(self, thread_id: str) -> tuple[snapshots.Snapshot | None, str | None]:
        return snapshots.load(self.layout, thread_id)

    def save_snapshot(self, thread_id: str, snapshot: snapshots.Snapshot) -> None:
        snapshots.save(self.layout, thread_id, snapshot)

    def put_blob(self, data: bytes) -> str:
        return blobs.put(self.layout, data)

    def get_blob(self, sha: str) -> bytes | None:
        return blobs.get(self.layout, sha)

    def begin_commit(self) -> Callable[[], None] | None:
        """Group commit here is one fdatasync per file, begun by the service per writer."""
        return None

    def watch(self, announce: Announce) -> None:
        """One machine: other processes' changes reach clients through the index."""

    def close(self) -> None:
        self.index.close()
