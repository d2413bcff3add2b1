"""The store interface: what `ThreadService` needs from wherever threads are kept.

Two backends implement it: the embedded store (JSONL files + SQLite index under
`$SESSIOND_HOME`, restore/store.py and restore/index.py) and PostgreSQL
(restore/stores/postgres.py). Both promise the same things, each by its own means:
append with a per-thread `seq`, idempotent item ids, one writer per thread (across
processes and, for PostgreSQL, machines), acknowledgement only once durable (group commit
included), pages both ways, listing with filters before paging, snapshots, archive and
delete, content-addressed blobs. One test suite runs against each (tests/test_stores.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from restore.jsonl import FORMAT_VERSION, ThreadFile, now_ts
from restore.summary import ThreadSummary

logger = logging.getLogger("sessiond.threads")
ProgressCallback = Callable[[int, int], None]
Announce = Callable[[str, str, ThreadSummary | None], None]
"""(event, threadId, row) for a change another process made: started, updated, deleted;
and `listening` (no thread, no row) each time the listener is (again) in place: changes
before it may have been missed, changes after it are not."""


@dataclass(frozen=True)
class Stamped:
    """Items stamped for appending: the new lines, every item's seq, how many repeated."""

    stored: list[dict[str, Any]]
    seqs: list[int]
    new_ids: dict[str, int]
    duplicates: int
    last_seq: int


def stamp(
    items: Iterable[dict[str, Any]],
    session_id: str,
    last_seq: int,
    known_ids: dict[str, int],
    *,
    keep_ts: bool = False,
) -> Stamped:
    """The store envelope (`v, seq, ts, type, sessionId, id`, in that order) on every item
    whose id is new; a repeated id (also within `items`) keeps its original seq. Both
    stores stamp here. With `keep_ts` an item's own `ts` is kept (an import dates its
    items by the source transcript, not by now)."""
    seqs: list[int] = []
    stored: list[dict[str, Any]] = []
    new_ids: dict[str, int] = {}
    duplicates = 0
    ts = now_ts()
    for item in items:
        item_id = str(item["id"])
        known = known_ids.get(item_id) or new_ids.get(item_id)
        if known is not None:
            duplicates += 1
            seqs.append(known)
            continue
        last_seq += 1
        line = {
            "v": FORMAT_VERSION,
            "seq": last_seq,
            "ts": item["ts"] if keep_ts and isinstance(item.get("ts"), str) else ts,
            "type": item["type"],
            "sessionId": session_id,
            "id": item_id,
        }
        for key, value in item.items():  # a loop, not update(genexpr): 1.5x faster here
            if key not in line:
                line[key] = value
        new_ids[item_id] = last_seq
        seqs.append(last_seq)
        stored.append(line)
    return Stamped(stored, seqs, new_ids, duplicates, last_seq)


def derived(what: str, work: Callable[..., Any], *args: Any) -> bool:
    """Run a write of derived state (snapshot, index row, offset map) after a durable one:
    a failure is logged, never raised, because what the client wrote is safe."""
    try:
        work(*args)
    except Exception as exc:  # OSError, sqlite3.Error, ProtocolError: all the same here
        logger.warning("%s not written (retried later): %s", what, exc)
        return False
    return True


class Writer(Protocol):
    """The exclusive handle on one thread: every append of a session goes through it."""

    thread_id: str
    path: Any
    """The thread's file (None: the store keeps rows, not files)."""
    summary: ThreadSummary
    last_seq: int
    loaded: ThreadFile | None
    """What opening it read (after `base`, if any), for the opener; then dropped."""
    base: Any
    """The snapshot checkpoint the open started from; None when it read everything."""
    base_rejected: str | None

    @property
    def closed(self) -> bool: ...

    def append(
        self,
        items: Iterable[dict[str, Any]],
        session_id: str,
        *,
        minted: bool = False,
        defer_sync: bool = False,
    ) -> Any: ...

    def seq_of(self, item_id: str) -> int | None: ...

    def checkpoint(self) -> Any: ...

    def mark(self) -> Any:
        """The last line written, for derived state to check itself against (or None)."""
        ...

    def revalidate(self) -> bool:
        """Before a session's next request: True when the writer had to reload what the
        store holds (a shared store lost a transaction), so derived state is rebuilt."""
        ...

    def close(self) -> None: ...


class Index(Protocol):
    """The listing side: one row per thread, filters before paging, keyset cursors."""

    files_read: int
    """Thread files read to build rows (`sessiond/debug`); 0 where there are none."""

    def ensure_ready(self, progress: ProgressCallback | None = None) -> str: ...

    def upsert(self, summary: ThreadSummary, path: Any, mark: Any = None) -> None: ...

    def upsert_many(self, rows: list[tuple[ThreadSummary, Any, Any]]) -> None: ...

    def refresh(self, rows: list[tuple[ThreadSummary, Any, Any]]) -> None:
        """Rows another process changed (restore/external.py)."""
        ...

    @property
    def is_open(self) -> bool: ...

    def remove(self, thread_id: str) -> None: ...

    def get(self, thread_id: str) -> ThreadSummary | None: ...

    def list(
        self,
        *,
        cwd: str | None = None,
        workspace_folder: str | None = None,
        archived: bool = False,
        search: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        parent_thread_id: str | None = None,
    ) -> tuple[list[ThreadSummary], str | None]:
        """Top-level threads (no parent), or the children of `parent_thread_id`; each
        row with its `childCount`."""
        ...

    def child_counts(self, thread_ids: list[str]) -> dict[str, int]:
        """Each thread's `childCount` (its unarchived children), as a listing gives it."""
        ...

    def close(self) -> None: ...


class Pages(Protocol):
    """Pages of a thread both ways, cut by bytes (restore/pages.py); safe on any thread."""

    def read(
        self,
        thread_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int,
        max_bytes: int,
    ) -> Any: ...

    def pick(
        self, thread_id: str, path: Any, seqs: list[int], max_bytes: int
    ) -> tuple[list[dict[str, Any]], bool]: ...

    def holds(self, thread_id: str, page: Any, backward: bool) -> bool:
        """Whether a page read ahead (server/readahead.py) is still the answer."""
        ...

    def after(
        self, thread_id: str, after: int, *, limit: int, max_bytes: int
    ) -> tuple[list[tuple[int, bytes]], bool]:
        """(seq, line) of the items after seq `after`, cut like a forward page, and
        whether more follow; nothing for a thread that is gone (server/relay.py)."""
        ...

    def last_seq(self, thread_id: str) -> int:
        """The seq of the thread's last item (0: none); ThreadNotFound if no such thread."""
        ...

    def forget(self, thread_id: str) -> None: ...


class Store(Protocol):
    """Where threads live: their records, locks, snapshots, blobs and listing rows."""

    durability: Any
    shared: bool
    """Kept outside this machine's data directory, seen by other machines (PostgreSQL)."""
    index: Index
    pages: Pages

    def create(self, thread_id: str, session_id: str, meta: dict[str, Any]) -> Writer:
        """A new thread, durable at once with its first `session_meta`, its writer held."""
        ...

    def open_writer(self, thread_id: str, base: Any = None) -> Writer:
        """The thread's one writer (ThreadBusy when another process holds it)."""
        ...

    def read(self, thread_id: str) -> tuple[ThreadFile, bool]:
        """Every item (and whether archived), without taking the writer's lock."""
        ...

    def read_origin(self, thread_id: str) -> dict[str, Any] | None:
        """The `origin` of the thread's first `session_meta` (an imported thread's agent)."""
        ...

    def set_archived(self, thread_id: str, archived: bool) -> ThreadSummary: ...

    def delete(self, thread_id: str) -> None:
        """The thread, its snapshot and its listing row."""
        ...

    def exists(self, thread_id: str) -> bool: ...

    def transcript_path(self, thread_id: str) -> str | None:
        """A file hooks may read the thread from (None: the store has none)."""
        ...

    def name_holder(self, thread_id: str, holder: str) -> None:
        """Name the client holding a thread, for other processes' ThreadBusy errors."""
        ...

    def load_snapshot(self, thread_id: str) -> tuple[Any, str | None]: ...

    def save_snapshot(self, thread_id: str, snapshot: Any) -> None: ...

    def put_blob(self, data: bytes) -> str: ...

    def get_blob(self, sha: str) -> bytes | None: ...

    def blob_size(self, sha: str) -> int | None:
        """The stored blob's length in bytes (None: not stored), without reading it, so a
        blob too large for an answer is refused before it is read."""
        ...

    def blob_shas(self) -> list[str]: ...

    def thread_ids(self) -> list[str]:
        """Every thread, archived ones too (`sessiond migrate`)."""
        ...

    def import_thread(self, thread_id: str, items: list[dict[str, Any]], archived: bool) -> int:
        """Add the records this store lacks, as they are (seq, ts, ids kept); how many."""
        ...

    def begin_commit(self) -> Callable[[], None] | None:
        """Group commit's store-wide step (a transaction's COMMIT); raises on failure."""
        ...

    def watch(self, announce: Announce) -> None:
        """Report other processes' changes (a shared store); a no-op where none reach."""
        ...

    def close(self) -> None: ...
