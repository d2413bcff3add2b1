"""The embedded store: JSONL thread files, the SQLite index, snapshot and blob files.

The default, with no service to run: everything under `$SESSIOND_HOME` (docs/storage.md).
This class gathers the parts the store interface names (restore/stores/base.py) over the
modules that implement them, so `ThreadService` asks one object whichever backend it has.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from typing import Any

from protocol.errors import ErrorKind, ProtocolError
from restore import blobs, snapshots
from restore.atomic import write_atomically
from restore.index import ThreadIndex
from restore.jsonl import encode_line, parse_bytes
from restore.pages import ThreadPages
from restore.paths import Layout
from restore.private import private_dirs
from restore.store import Durability, ThreadStore, open_thread_file
from restore.stores.base import Announce, derived
from restore.summary import Indexed, ThreadSummary


class EmbeddedStore(ThreadStore):
    """Thread files plus their derived companions, under one data directory.

    `live` gives the index rows of the files this process writes (the service's writers),
    which the index takes instead of reading those files (restore/index.py); `pages` may be
    shared with the server's reader threads."""

    shared = False

    def __init__(
        self,
        layout: Layout,
        durability: Durability = Durability.FSYNC,
        *,
        read_only: bool = False,
        pages: ThreadPages | None = None,
        live: Callable[[], dict[str, Indexed]] | None = None,
    ) -> None:
        super().__init__(layout, durability, read_only=read_only)
        self.index = ThreadIndex(layout, self.read_summary, in_memory=read_only, live=live)
        self.pages = pages or ThreadPages(layout)

    def set_archived(self, thread_id: str, archived: bool) -> ThreadSummary:
        """Archive or unarchive: the file moves between `threads/` and `archived/`."""
        path = self.move(thread_id, to_archived=archived)
        found = self.read_summary(path, archived)
        if found is None:
            raise ProtocolError(
                ErrorKind.THREAD_NOT_FOUND, "thread vanished while moving", threadId=thread_id
            )
        summary, covered = found
        derived("index row", self.index.upsert, summary, path, covered)
        return summary

    def delete(self, thread_id: str) -> None:
        """The file, then what is derived from it (a failure there is logged: a stale
        snapshot, map or row of a missing file is ignored or dropped at its next use)."""
        super().delete(thread_id)
        derived("snapshot removal", snapshots.discard, self.layout, thread_id)
        derived("offset map removal", self.pages.forget, thread_id)
        derived("index row removal", self.index.remove, thread_id)

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

    def blob_size(self, sha: str) -> int | None:
        return blobs.size(self.layout, sha)

    def blob_shas(self) -> list[str]:
        if not self.layout.blobs_dir.is_dir():
            return []
        return sorted(
            path.name for path in self.layout.blobs_dir.glob("??/*") if len(path.name) == 64
        )

    # --- copying (sessiond migrate) ----------------------------------------------------------

    def thread_ids(self) -> list[str]:
        """Every thread on disk, once (a live file wins over an archived copy)."""
        return sorted({path.stem for path, _ in self.layout.iter_thread_files()})

    def import_thread(self, thread_id: str, items: list[dict[str, Any]], archived: bool) -> int:
        """Write a thread's records as they are (seq, ts and ids kept), under its lock.

        Idempotent: items whose id the file already has are skipped. A file that holds
        other records at the same seqs (the copies diverged) is left alone: InvalidParams.
        """
        found = self.layout.locate(thread_id)
        if found is None:
            data = b"".join(encode_line(item) for item in items)
            path = self.layout.thread_path(thread_id, archived=archived)
            private_dirs(path.parent)
            write_atomically(path, data)
            self.index.close()  # reconciled (with the new file) at its next use
            return len(items)
        fd = open_thread_file(found[0], os.O_RDWR | os.O_APPEND, thread_id)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ProtocolError(
                    ErrorKind.THREAD_BUSY, "thread is being written", threadId=thread_id
                ) from None
            present = parse_bytes(os.pread(fd, os.fstat(fd).st_size, 0)).items
            ids = {str(item["id"]) for item in present}
            last = max((item["seq"] for item in present), default=0)
            new = [item for item in items if str(item["id"]) not in ids]
            if any(item["seq"] <= last for item in new):
                raise ProtocolError(
                    ErrorKind.INVALID_PARAMS,
                    "the copies diverged: other records at the same seqs",
                    threadId=thread_id,
                )
            if new:
                os.write(fd, b"".join(encode_line(item) for item in new))
                os.fsync(fd)
                self.index.close()
            return len(new)
        finally:
            os.close(fd)

    def begin_commit(self) -> Callable[[], None] | None:
        """Group commit here is one fdatasync per file, begun by the service per writer."""
        return None

    def watch(self, announce: Announce) -> None:
        """One machine: other processes' changes reach clients through the index."""

    def close(self) -> None:
        self.index.close()
