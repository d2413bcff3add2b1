"""Threads another process writes (a second editor window's server, an importer): their
listing rows, kept current by reading only what grew since the last look.

A watcher reports which thread files changed; this module says what that means for
clients: the thread's new row, or that it is gone (followers get the appended items from
server/live/relay.py). Changes this process made itself are recognised by the file's size (the
store notes the size after each of its own writes, and `DELETED` for a file it deleted)
and are not reported twice.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

from protocol.errors import ProtocolError
from restore.home.layout import Layout
from restore.ids import validate_thread_id
from restore.stores.api import ExternalChange
from restore.stores.embedded.index import ThreadIndex
from restore.stores.embedded.jsonl import parse_bytes
from restore.summary import ThreadSummary, summarize

DELETED = -1
"""The size noted for a thread file this process deleted: its removal is not news."""


@dataclass
class _Tail:
    path: Path
    archived: bool
    offset: int
    summary: ThreadSummary


class ExternalThreads:
    """The embedded store's `LocalChanges` (restore/stores/api.py): other processes' writes
    to the data dir's thread files, with the index rows brought up to date."""

    def __init__(self, layout: Layout, own_sizes: dict[str, int], index: ThreadIndex) -> None:
        self._layout = layout
        self._own_sizes = own_sizes
        """Each thread's size after this process last wrote it: a watcher seeing that size
        knows the change was ours."""
        self._index = index
        self._tails: dict[str, _Tail] = {}

    @property
    def directories(self) -> list[Path]:
        return [self._layout.threads_dir, self._layout.archived_dir]

    def changed(self, thread_ids: Sequence[str]) -> list[ExternalChange]:
        """What other processes did to these threads, with their index rows refreshed, so
        this process's listings agree at once."""
        once = dict.fromkeys(thread_ids)  # a move names a thread twice (both directories)
        changes = [c for t in once if (c := self._changed(t)) is not None]
        rows = [change.row for change in changes if change.row is not None]
        if rows:
            self._index.refresh(rows)
        return changes

    def changed_since(self, seconds: float) -> list[str]:
        """Ids of the thread files modified at or after `seconds` (epoch)."""
        found = []
        for path, _, stat in self._layout.scan_thread_files():
            if stat.st_mtime >= seconds:
                with contextlib.suppress(ProtocolError):  # not a thread file: not ours
                    found.append(validate_thread_id(os.path.basename(path)[: -len(".jsonl")]))
        return found

    def _ours(self, thread_id: str) -> bool:
        """The live thread file is as this process last wrote it: one `lstat`, no path
        object (most of what a busy server's watcher sees is its own writes)."""
        own = self._own_sizes.get(thread_id)
        if own is None or own == DELETED:
            return False
        try:
            stat = os.lstat(self._layout.thread_file(thread_id))
        except OSError:
            return False  # archived, moved or gone: the full look says what happened
        return S_ISREG(stat.st_mode) and stat.st_size == own

    def _changed(self, thread_id: str) -> ExternalChange | None:
        """What another process did to a thread file; None when nothing new (or it was us)."""
        if self._ours(thread_id):
            return None
        located = self._layout.locate(thread_id)
        if located is None:
            self._tails.pop(thread_id, None)
            if self._own_sizes.get(thread_id) == DELETED:
                return None  # announced by the delete itself
            return ExternalChange(thread_id, None)
        path, archived = located
        if self._own_sizes.get(thread_id) == DELETED:
            del self._own_sizes[thread_id]  # made again (an import, say): its next removal is news
        try:
            stat = os.lstat(path)
        except FileNotFoundError:
            return None  # moved while we looked: the next event says where
        if not S_ISREG(stat.st_mode):
            return None  # not a file sessiond wrote (a FIFO would block): never opened
        if self._own_sizes.get(thread_id) == stat.st_size:
            return None
        tail = self._tails.get(thread_id)
        whole = tail is None or tail.path != path or tail.offset > stat.st_size
        start = 0 if whole or tail is None else tail.offset
        if start == stat.st_size:
            return None
        with open(path, "rb") as handle:
            handle.seek(start)
            data = handle.read(stat.st_size - start)
        complete = data.rfind(b"\n") + 1  # a line still being written waits for the next look
        items = parse_bytes(data[:complete], start).items
        if whole or tail is None:
            if not items:
                return None  # a thread/start not yet written through
            tail = _Tail(path, archived, 0, summarize(thread_id, items, archived=archived))
            self._tails[thread_id] = tail
        else:
            for item in items:
                tail.summary.apply(item)
        tail.offset = start + complete
        if not items and not whole:
            return None
        # The items themselves reach followers through the relay (server/live/relay.py), read
        # after the last one each was sent; this says the row changed, and to what.
        return ExternalChange(
            thread_id, tail.summary.thread_info(), (tail.summary, path, stat), whole
        )
