"""`sessiond migrate`: copy threads between stores, as they are, idempotently.

Local threads go into a shared database (`--to postgresql://…`), and a database's threads
come back out as JSONL files (`--to DIR`, a data directory): the files stay the portable
ground truth. Records keep their seq, timestamp and ids; copying again adds only what is
new (by item id), so the command can be rerun at any time. Blobs (file contents for
rewind) come along; snapshots and listing rows are derived and rebuilt on the other side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.errors import ProtocolError
from restore.stores.api import Progress, Store


@dataclass
class TransferReport:
    threads: int = 0
    copied: int = 0
    """Records written to the target (new there)."""
    present: int = 0
    """Records the target had already (an earlier run)."""
    blobs: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    """(threadId, why) for threads left alone: busy, or the copies diverged."""


def copy_threads(source: Store, target: Store, progress: Progress | None = None) -> TransferReport:
    report = TransferReport()
    thread_ids = source.thread_ids()
    for done, thread_id in enumerate(thread_ids, 1):
        contents, archived = source.read(thread_id)
        if contents.items:  # a thread/start cut short by a crash: nothing to carry over
            try:
                added = target.import_thread(thread_id, contents.items, archived)
            except ProtocolError as exc:
                report.failed.append((thread_id, f"{exc.kind}: {exc.message}"))
            else:
                report.threads += 1
                report.copied += added
                report.present += len(contents.items) - added
        if progress:
            progress(done, len(thread_ids))
    have = set(target.blob_shas())
    for sha in source.blob_shas():
        if sha not in have and (data := source.get_blob(sha)) is not None:
            target.put_blob(data)
            report.blobs += 1
    return report
