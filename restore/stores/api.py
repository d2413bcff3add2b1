"""The store interface: everything the service, the importer and the server may ask of
wherever threads are kept, and every type the two backends share.

Two backends implement it: the embedded store (JSONL files + SQLite index under
`$SESSIOND_HOME`, restore/stores/embedded/) and PostgreSQL (restore/stores/postgres/). Both
promise the same things, each by its own means: append with a per-thread `seq`, idempotent
item ids, one writer per thread (across processes and, for PostgreSQL, machines),
acknowledgement only once durable (group commit included), pages both ways, listing with
filters before paging, snapshots, archive and delete, content-addressed blobs. One test
suite runs against each (tests/test_stores.py), and the type checker holds each backend to
these Protocols (`_conforms` at the end of each backend's store module).

What is here besides the Protocols is what a caller gets back from a store (the value
types), the cut of a page that is too large, and the typed error a storage failure reaches
a client as. What both stores must also do identically lives beside it: the record
envelope (records.py), snapshots (snapshots.py), listing rows and cursors (cursors.py).
Nothing here does I/O.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from protocol.errors import ErrorKind, ProtocolError
from restore.search.cancel import Cancel
from restore.search.query import Query
from restore.stores.records import Item, Staged
from restore.stores.snapshots import Checkpoint, Snapshot
from restore.summary import ThreadSummary
from restore.usage.entries import Usage, UsageSource

if TYPE_CHECKING:
    from restore.redaction.engine import Redactor

logger = logging.getLogger("sessiond.threads")

Progress = Callable[[int, int], None]
"""(done, total) of a long step: an index rebuild, an import, a copy."""
StepProgress = Callable[[str, int, int], None]
"""(what, done, total) of one of several steps (`sessiond doctor`)."""
Announce = Callable[[str, str, ThreadSummary | None], None]
"""(event, threadId, row) for a change another process made: started, updated, deleted;
and `listening` (no thread, no row) each time the listener is (again) in place: changes
before it may have been missed, changes after it are not."""
Listing = tuple[list[ThreadSummary], str | None]
"""One page of a listing and the cursor of the next (None: the last page)."""
KeyThreads = tuple[ThreadSummary | None, list[tuple[str, ThreadSummary]]]
"""A session key's current thread (None: none), and (threadId, its successor's row) of
each of its threads whose row does not name the successor yet (`Index.key_threads`)."""
Rows = list[ThreadSummary]
"""Listing rows, however found (an id prefix's threads)."""

FLUSH_SECONDS = 0.5
"""How long a store may hold listing rows back (the embedded store batches them: one SQLite
transaction per record would cost more than the record). A host calls `Store.flush` this
long after a burst of writes pauses, so other processes list them within about a second."""


# --- what stores hand back -----------------------------------------------------------------


class Durability(StrEnum):
    """When an append counts as durable (and may be acknowledged)."""

    FSYNC = "fsync"
    """fsync after every append call: survives power loss. The default."""
    GROUP = "group"
    """Group commit: concurrent records share one fdatasync (one COMMIT), and each is
    acknowledged only after it. Survives power loss; far more records per second."""
    NONE = "none"
    """Written to the OS only: survives a process crash, not a power loss. For tests."""


@dataclass(frozen=True)
class SkippedLine:
    """A line the reader could not use; reported, never deleted."""

    lineNo: int
    byteOffset: int
    reason: str
    preview: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "lineNo": self.lineNo,
            "byteOffset": self.byteOffset,
            "reason": self.reason,
            "preview": self.preview,
        }


@dataclass
class ThreadFile:
    """Everything a read of one thread found (a file's bytes, or a database's rows, which
    have no bad lines, BOM or torn tail to report)."""

    items: list[Item] = field(default_factory=list)
    skipped: list[SkippedLine] = field(default_factory=list)
    bom: bool = False
    torn_tail_offset: int | None = None
    """Byte offset of an unparsable last line with no newline (a write cut short)."""
    unterminated_tail: bool = False
    """The last line parsed but lacks its newline; a writer must add it before appending."""
    size: int = 0
    """File offset where the parsed bytes end."""
    lines: int = 0
    """Line count up to `size` (including any before `base_offset` when parsing a tail)."""
    last_line_start: int | None = None
    """File offset of the last newline-terminated line: snapshots verify themselves by it."""


@dataclass(frozen=True)
class AppendResult:
    first_seq: int | None
    last_seq: int | None
    duplicates: int
    stored: list[Item]


ANSWER_OVERHEAD = 512
"""The JSON-RPC envelope, the cursor and the keys around a page, in bytes."""


@dataclass
class Page:
    """One page of a thread's items, ascending, cut by count and by bytes."""

    next_seq: int | None
    """nextAfterSeq going forward, nextBeforeSeq going back; None at the end."""
    skipped: list[dict[str, Any]]
    raw: list[bytes] = field(default_factory=list)
    """The items' JSON text as stored: an answer embeds it rather than encode again."""
    source: tuple[int, int, int] | None = None
    """What the store checks a page read ahead against (`Pages.holds`); the embedded
    store's (device, inode, size) of the file, None for rows."""

    @property
    def items(self) -> list[Item]:
        """The items, decoded on demand: an answer sends `raw`, and keeping 10,000 decoded
        items per page alive made the garbage collector walk them (~20% of a page's time)."""
        return [orjson.loads(raw) for raw in self.raw]


def too_large(seq: int, size: int, budget: int) -> ProtocolError:
    """An item that fits in no answer, named, with where to page on from (both stores)."""
    return ProtocolError(
        ErrorKind.PAYLOAD_TOO_LARGE,
        f"item seq {seq} ({size} bytes) does not fit in one answer of at most "
        f"{budget} bytes; page past it from seq {seq}",
        seq=seq,
        size=size,
        limit=budget,
    )


@dataclass
class ExternalChange:
    """A thread another process on this machine changed (`LocalChanges.changed`)."""

    thread_id: str
    thread: dict[str, Any] | None
    """The thread's row (ThreadInfo); None when the thread is gone."""
    row: tuple[ThreadSummary, Path, os.stat_result] | None = None
    """The row the index now holds: the summary, the file and its stat."""
    first_look: bool = False
    """This process had not seen the thread before (it may be new, or just newly touched)."""


@dataclass
class FileFinding:
    """What `sessiond doctor` found wrong with one thread file (the embedded store's)."""

    path: Path
    skipped: list[SkippedLine] = field(default_factory=list)
    bom: bool = False
    error: str | None = None
    repaired: bool = False
    empty: bool = False
    """A 0-byte file: no record, so no thread (a kill between creating and writing it)."""


@dataclass
class DoctorReport:
    """A store's check of itself (`Store.check`)."""

    files: int = 0
    items: int = 0
    findings: list[FileFinding] = field(default_factory=list)
    index_action: str = ""
    indexed: int = 0
    unmapped: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Per agent, the record types and tools imports met and did not map (from the import
    checkpoints in the threads): `record:<type>` → {count, example: "path:line"}."""

    @property
    def clean(self) -> bool:
        return not any(f.skipped or f.error or f.empty for f in self.findings)


@dataclass
class RedactionReport:
    """What `sessiond doctor --redact` found (and, `applied`, rewrote) in a store."""

    applied: bool = False
    threads: int = 0
    changed: list[str] = field(default_factory=list)
    """Threads that held a secret (rewritten when applied)."""
    busy: list[str] = field(default_factory=list)
    """Threads another process was writing: left as they were."""
    failed: list[str] = field(default_factory=list)
    blobs: int = 0
    recovered: int = 0
    """`recovered/` copies (the embedded store's torn tails) that held a secret."""
    counts: dict[str, int] = field(default_factory=dict)
    """Secrets by kind."""


# --- failures --------------------------------------------------------------------------------


def storage_failure(
    message: str, *, full: bool = False, retryable: bool | None = None, **details: Any
) -> ProtocolError:
    """The one typed error a storage failure reaches a client as, whichever store: a full
    disk (or database) is StorageFull, anything else StorageError; one line, never a
    traceback or a secret. Each backend maps its own failures here (a thread file's
    OSError, SQLite's error, a PostgreSQL sqlstate)."""
    kind = ErrorKind.STORAGE_FULL if full else ErrorKind.STORAGE_ERROR
    if retryable is not None:
        details["retryable"] = retryable
    return ProtocolError(kind, message, **details)


def derived(what: str, work: Callable[..., Any], *args: Any) -> bool:
    """Run a write of derived state (snapshot, index row, offset map) after a durable one:
    a failure is logged, never raised, because what the client wrote is safe."""
    try:
        work(*args)
    except Exception as exc:  # OSError, sqlite3.Error, ProtocolError: all the same here
        logger.warning("%s not written (retried later): %s", what, exc)
        return False
    return True


@dataclass(frozen=True, slots=True)
class ListFilters:
    """What a listing asks for, the one spelling every caller and both indexes use: the
    filters, applied before paging, and the page (a keyset `cursor`, at most `limit`)."""

    cwd: str | None = None
    workspace_folder: str | None = None
    archived: bool = False
    search: str | None = None
    cursor: str | None = None
    limit: int = 50
    parent_thread_id: str | None = None
    session_key: str | None = None


FIRST_PAGE = ListFilters()
"""The newest top-level unarchived threads, one page of the default size."""


# --- the interface ---------------------------------------------------------------------------


class Writer(Protocol):
    """The exclusive handle on one thread: every append of a session goes through it."""

    thread_id: str
    summary: ThreadSummary
    last_seq: int
    loaded: ThreadFile | None
    """What opening it read (after `base`, if any), for the opener; then dropped."""
    base: Checkpoint | None
    """The snapshot checkpoint the open started from; None when it read everything."""
    base_rejected: str | None

    @property
    def closed(self) -> bool: ...

    def append(
        self,
        items: Iterable[Item],
        session_id: str,
        *,
        minted: bool = False,
        defer_sync: bool = False,
        keep_ts: bool = False,
        redacted: bool = False,
        staged: Staged | None = None,
    ) -> AppendResult:
        """Stamp and write the items whose id is new; durable on return, unless
        `defer_sync` (group commit: durable after the store's next `begin_commit`) or the
        writer was opened with `durable=False` (after the store's next `sync`). `minted`:
        fresh server ids, which cannot repeat (no need to load the thread's id set).
        `redacted`: made from records the store's redactor already ran over (an import
        redacts each source record as it is read), so `stamp` does not run it again.
        `staged`: what `stage` wrote ahead for these very items; used when nothing was
        appended since (else the items are written as if it were None)."""
        ...

    def stage(self, items: list[Item], session_id: str, *, redacted: bool) -> Staged | None:
        """Off the store thread, before the append of `items`: their lines written ahead
        where that spares the append's connection their bytes (the PostgreSQL store, for
        a record past `STAGE_BYTES`); None where the append writes them at no one else's
        cost (a file of its own: the embedded store)."""
        ...

    def seq_of(self, item_id: str) -> int | None: ...

    def checkpoint(self) -> Checkpoint | None:
        """Where the thread stands now, for a snapshot to verify itself against later."""
        ...

    def revalidate(self) -> bool:
        """Before a session's next request: True when the writer had to reload what the
        store holds (a shared store lost a transaction), so derived state is rebuilt."""
        ...

    def close(self) -> None: ...


class Index(Protocol):
    """The listing side: one row per thread, filters before paging, keyset cursors."""

    @property
    def files_read(self) -> int:
        """Thread files read to build rows (`sessiond/debug`); 0 where there are none."""
        ...

    @property
    def is_open(self) -> bool:
        """Whether a listing can be answered without opening anything first (the embedded
        index reconciles every file when it opens: a notification must not cost that)."""
        ...

    def ensure_ready(self, progress: Progress | None = None) -> str:
        """Open (build, reconcile) what a listing needs: "opened", "rebuilt", "ready"."""
        ...

    def get(self, thread_id: str) -> ThreadSummary | None: ...

    def list(self, filters: ListFilters = FIRST_PAGE) -> Listing:
        """Top-level threads (no parent), or the children of `filters.parent_thread_id`;
        each row with its `childCount`. `session_key`: only threads whose key starts with
        it (restore/keys.py `key_range`), sub-agents' too."""
        ...

    def key_threads(self, key: str) -> KeyThreads:
        """The key's current thread (the newest unarchived thread with exactly this key
        that no thread replaced, by `nextThreadId` or a successor's `previousThreadId`),
        and the key's threads a successor names but whose own row does not name it yet
        (their `thread_successor` item is still to be written)."""
        ...

    def child_counts(self, thread_ids: Sequence[str]) -> dict[str, int]:
        """Each thread's `childCount` (its unarchived children), as a listing gives it."""
        ...

    def count(self) -> int: ...

    def usage(
        self, since_ms: int | None, until_ms: int | None, grain_ms: int, *, threads: bool
    ) -> Usage:
        """The model calls recorded in [since_ms, until_ms) (epoch milliseconds, None: no
        bound), summed per model and `grain_ms` of time (calls in one grain are one entry;
        1: each distinct millisecond) and, with `threads`, per thread, with the threads
        they are of (without: every entry's `threadId` is '', and no threads). Answered
        from what the store keeps per call, never by reading the threads' records again."""
        ...

    def usage_apart(self) -> UsageSource | None:
        """What answers `usage` off the store's thread (a connection of its own: a long
        report never holds a record), or None: ask `usage` on the store's thread."""
        ...

    def with_prefix(self, prefix: str, limit: int) -> Rows:
        """The threads whose id starts with `prefix` (canonical: restore/ids.py `id_prefix`),
        archived and sub-agents too, in id order, at most `limit`: what a person's
        `sessiond show 88180741` names. One range of the key, never a scan."""
        ...


class Pages(Protocol):
    """Pages of a thread both ways, cut by bytes; safe on any thread."""

    def read(
        self,
        thread_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int,
        max_bytes: int,
    ) -> Page: ...

    def pick(self, thread_id: str, seqs: Sequence[int], max_bytes: int) -> tuple[list[Item], bool]:
        """The items with these seqs (ascending), newest first within `max_bytes`; True when
        older ones were left out for the budget (resume's newest messages)."""
        ...

    def holds(self, thread_id: str, page: Page, backward: bool) -> bool:
        """Whether a page read ahead (server/handlers/readahead.py) is still the answer."""
        ...

    def after(
        self, thread_id: str, after: int, *, limit: int, max_bytes: int
    ) -> tuple[list[tuple[int, bytes]], bool]:
        """(seq, line) of the items after seq `after`, cut like a forward page, and
        whether more follow; nothing for a thread that is gone (server/live/relay.py)."""
        ...

    def last_seq(self, thread_id: str) -> int:
        """The seq of the thread's last item (0: none); ThreadNotFound if no such thread."""
        ...


class LocalChanges(Protocol):
    """Other processes on this machine writing the same store, seen through its files (the
    embedded store). A shared store has none: it announces other writers itself (`watch`)."""

    @property
    def directories(self) -> list[Path]:
        """Where a watcher looks for their writes."""
        ...

    def changed(self, thread_ids: Sequence[str]) -> list[ExternalChange]:
        """What other processes did to these threads (their files changed), with the
        listing rows brought up to date; this process's own writes are not reported."""
        ...

    def changed_since(self, seconds: float) -> list[str]:
        """Threads written at or after `seconds` (epoch): what a watcher that was still
        starting may have missed."""
        ...


@dataclass(frozen=True)
class SearchFilters:
    """What a search is narrowed to before it is paged (`thread/search`'s filters)."""

    cwd: str | None = None
    workspace_folder: str | None = None
    agent: str | None = None
    """The thread's origin agent (`claude-code`, `codex`, `gemini`, `acp`), or `sessiond`
    for threads recorded over the protocol."""
    role: str | None = None
    since: str | None = None
    """Records at or after this timestamp (the stored format, `now_ts`)."""
    until: str | None = None
    archived: bool = False


@dataclass(frozen=True)
class SearchHit:
    """One record a query matched: where it is, what it is, its text and its thread."""

    thread: ThreadSummary
    seq: int
    role: str
    ts: str
    text: str
    """Its searchable text; empty once `shown` holds its snippet."""
    shown: tuple[str, list[list[int]]] | None = None
    """Its snippet and highlights (restore/search/snippets.py), when the search made them
    already: in a process of its own (embedded/search_child.py), the text stays there."""


@dataclass
class SearchPage:
    hits: list[SearchHit]
    next_cursor: str | None
    partial: bool = False
    """Some threads were not indexed yet (the search index is built on demand, a budget
    at a time): their hits may be missing. Asking again continues the build. Or the
    page's snippets ran out of their time budget: the rest show their text's start."""


class SearchIndex(Protocol):
    """Full-text search over every thread's searchable text (restore/search/text.py).

    Each backend finds and ranks with its own machinery (SQLite FTS5, PostgreSQL
    tsvector); best first, ties by recency; filters before paging; the cursor is a keyset
    over (rank, ts, position), so pages neither lose nor repeat a hit while the matching
    records stay as they are. The index is derived: never built at startup; the embedded
    one catches up with the thread files when asked, within `budget` seconds (None: all
    of it), reporting `progress`."""

    @property
    def beside_store(self) -> bool:
        """`search` may run on a thread of its own, beside the store thread (one search
        at a time): it does not touch the store's state or connection. False: on the store
        thread."""
        ...

    def run_apart(self) -> None:
        """For a long-running server: run each search where it takes no CPU from the
        records (the embedded store: a process of its own, started by the first search;
        PostgreSQL's runs in the database server already)."""

    def search(
        self,
        query: Query,
        filters: SearchFilters,
        *,
        cursor: str | None = None,
        limit: int = 20,
        progress: Progress | None = None,
        budget: float | None = None,
        cancel: Cancel | None = None,
    ) -> SearchPage:
        """A page of hits. `cancel`: the client no longer waits; the search stops
        (`Cancelled`) wherever it is, the database's query included."""
        ...


class Store(Protocol):
    """Where threads live: their records, locks, snapshots, blobs and listing rows."""

    redactor: Redactor | None
    """Secrets out of every record (`stamp`) and blob (`put_blob`) before they are
    stored; None: redaction is off (`open_store` sets it from the settings)."""

    @property
    def durability(self) -> Durability: ...

    @property
    def where(self) -> str:
        """Where the threads are, for messages (a data directory; a database, no password)."""
        ...

    @property
    def index(self) -> Index: ...

    @property
    def pages(self) -> Pages: ...

    @property
    def search(self) -> SearchIndex: ...

    @property
    def read_only(self) -> bool:
        """Every write is refused (a read-only data directory): threads are only read."""
        ...

    @property
    def local(self) -> LocalChanges | None:
        """Other processes' changes to follow by their files (None: `watch` brings them)."""
        ...

    def create(
        self,
        thread_id: str,
        session_id: str,
        meta: Item,
        *,
        items: Iterable[Item] = (),
        keep_ts: bool = False,
        durable: bool = True,
        redacted: bool = False,
    ) -> Writer:
        """A new thread with its first `session_meta` (and `items`, in the same write: an
        import creates whole threads), its writer held; InvalidId if it exists. Durable at
        once, or with `durable=False` at the store's next `sync` (the writer's appends too)."""
        ...

    def open_writer(
        self,
        thread_id: str,
        base: Checkpoint | None = None,
        *,
        durable: bool = True,
        derived: bool = False,
    ) -> Writer:
        """The thread's one writer (ThreadBusy when another process holds it), having read
        what follows `base` (a snapshot's checkpoint, once verified) or everything.
        `derived`: what it appends can be made again from other records (a reset's link,
        from the new thread's `previousThreadId`): a store may leave it unsynced, kept
        through a crash but not always through a power cut (the embedded store); one
        whose appends are transactions commits it as any other (PostgreSQL)."""
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

    def hold_key(self, key: str) -> AbstractContextManager[None]:
        """A session key held against every other process (and machine) deciding about the
        same key (`thread/continue`): while held, the key's current thread found in the
        index is the truth, and a thread this process starts for the key is listed before
        the key is let go. KeyBusy-like ThreadBusy when it cannot be had in time."""
        ...

    def load_snapshot(self, thread_id: str) -> tuple[Snapshot | None, str | None]:
        """The thread's snapshot, or None and why not ("missing", "corrupt: ...")."""
        ...

    def save_snapshot(self, thread_id: str, snapshot: Snapshot) -> None: ...

    def put_blob(self, data: bytes) -> str:
        """Store file contents (redacted first, as records are) under their sha256: the
        sha of what is stored, which for contents that held a secret is not the sha the
        edit that named them recorded (a rewind to them is refused, docs/security.md)."""
        ...

    def get_blob(self, sha: str) -> bytes | None: ...

    def blob_size(self, sha: str) -> int | None:
        """The stored blob's length in bytes (None: not stored), without reading it, so a
        blob too large for an answer is refused before it is read."""
        ...

    def blob_shas(self) -> list[str]: ...

    def thread_ids(self) -> list[str]:
        """Every thread, archived ones too (`sessiond migrate`)."""
        ...

    def import_thread(self, thread_id: str, items: list[Item], archived: bool) -> int:
        """Add the records this store lacks, as they are (seq, ts, ids kept); how many."""
        ...

    def begin_commit(self) -> Callable[[], None] | None:
        """Group commit, on the store thread: take every deferred append and return the
        work that makes them durable, to run on another thread while the store thread
        appends the next batch (None: nothing left to do). Raises when what was deferred
        can no longer be made durable: none of it may be acknowledged."""
        ...

    def sync(self) -> None:
        """Make every write of writers opened with `durable=False` durable now."""
        ...

    def flush(self) -> None:
        """Write listing rows the store held back (`FLUSH_SECONDS`); never raises: the
        rows are derived."""
        ...

    def idle(self) -> None:
        """What is best done while no request waits (the host calls it after a pause:
        server/worker.py): the embedded store checkpoints its index. Never raises."""
        ...

    def watch(self, announce: Announce) -> None:
        """Report changes other processes make that `local` does not (a shared store's)."""
        ...

    def redact_existing(
        self, progress: StepProgress | None = None, *, apply: bool = False
    ) -> RedactionReport:
        """`sessiond doctor --redact`: every stored record and blob run through `redactor`;
        with `apply`, what held a secret is rewritten in place (a new file, rows updated)
        and what is derived from it dropped to be rebuilt. Needs a redactor."""
        ...

    def check(
        self,
        progress: StepProgress | None = None,
        *,
        repair: bool = False,
        rebuild_index: bool = False,
    ) -> DoctorReport:
        """`sessiond doctor`: what is damaged (and, with `repair`, what a crash can leave
        is repaired: torn tails, empty files); the listing rebuilt or brought up to date
        (`rebuild_index`: rebuilt from the thread files whatever its state)."""
        ...

    def close(self) -> None: ...
