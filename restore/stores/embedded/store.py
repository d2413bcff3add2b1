"""The embedded store: JSONL thread files, the SQLite index, snapshot and blob files.

The default, with no service to run: everything under `$SESSIOND_HOME` (docs/storage.md).
This class gathers the parts the store interface names (restore/stores/api.py) over the
modules that implement them, and keeps the policy that is this backend's alone:

- listing rows are batched: a writer's row is written at most `FLUSH_SECONDS` after its
  change (and by `flush`, which the service calls before it lists, closes or moves a
  thread): one SQLite transaction per record would cost more than the record. An index
  not open yet is not opened by a write: its first open reconciles every file, which the
  answer to a start or a resume must not wait for;
- files this process writes are never read by the index: their rows come from the open
  writers (`_live_rows`), and their sizes tell the watcher which changes were our own;
- every writer holds its thread's writer mark (`marks.py`) while its file is open, and
  the mark stays (unheld) until the thread's row is written, so a writer killed in
  between is found by the next first listing without a scan of every file;
- group commit is one fdatasync per written file, on the committer thread (`commit.py`);
- descriptors are bounded: at most `open_limit` writers keep their file (and mark) open,
  the least recently used of the others are parked (files.py) and hold their threads by
  their claims alone (claims.py). A server with 20,000 open sessions needs no more
  descriptors than one with a few hundred.
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import os
import resource
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import restore.stores.api as api
from protocol.errors import ErrorKind, ProtocolError, storage_error
from restore.home.files import private_dirs, sync_filesystem, write_atomically
from restore.home.layout import Layout
from restore.ids import validate_thread_id
from restore.stores.api import (
    FLUSH_SECONDS,
    Announce,
    DoctorReport,
    Durability,
    RedactionReport,
    StepProgress,
    derived,
)
from restore.stores.embedded import blobs, claims, keylocks, marks, snapshots
from restore.stores.embedded.commit import GroupCommit
from restore.stores.embedded.external import DELETED, ExternalThreads
from restore.stores.embedded.files import ThreadStore, ThreadWriter, open_thread_file
from restore.stores.embedded.index import Indexed, ThreadIndex
from restore.stores.embedded.jsonl import LineMark, parse_bytes
from restore.stores.embedded.pages import ThreadPages
from restore.stores.embedded.search import ThreadSearch
from restore.stores.records import Item, encode_line, missing_records
from restore.stores.snapshots import Snapshot
from restore.summary import ThreadSummary

logger = logging.getLogger(__name__)

Row = tuple[ThreadSummary, Path, LineMark | None]
OPEN_LIMIT_ENV = "SESSIOND_OPEN_THREADS"
OPEN_LIMIT_MAX = 512
"""Beyond a few hundred open files, parking costs nothing worth a descriptor more."""
PARK_CANDIDATES = 8
"""How far from the least recently used writer an idle one (nothing owed to a sync) is
looked for, before the least recently used is synced and parked anyway."""


def open_limit() -> int:
    """How many writers keep their files open: `$SESSIOND_OPEN_THREADS`, else an eighth
    of this process's descriptor limit less the claims' files (each writer takes two: its
    thread file and its writer mark), at most `OPEN_LIMIT_MAX`: the rest of the limit is
    for clients' sockets, the index, the search process's pipes and a hook's needs."""
    configured = os.environ.get(OPEN_LIMIT_ENV, "").strip()
    if configured:
        if not configured.isdigit() or int(configured) < 1:
            raise ProtocolError(
                ErrorKind.INVALID_PARAMS,
                f"{OPEN_LIMIT_ENV} must be a whole number of at least 1, not {configured!r}",
                field=OPEN_LIMIT_ENV,
            )
        return int(configured)
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return OPEN_LIMIT_MAX
    return max(1, min(OPEN_LIMIT_MAX, (soft - claims.SHARDS) // 8))


class EmbeddedStore(ThreadStore):
    """Thread files plus their derived companions, under one data directory. `pages` is
    safe on any thread (the server's reader threads share it); the rest is the store
    thread's."""

    def __init__(
        self, layout: Layout, durability: Durability = Durability.FSYNC, *, read_only: bool = False
    ) -> None:
        super().__init__(layout, durability, read_only=read_only)
        self.where = str(layout.home)
        self.index = ThreadIndex(
            layout, self.read_summary, in_memory=read_only, live=self._live_rows
        )
        self.pages = ThreadPages(layout)
        self.search = ThreadSearch(self.index)
        self.group_commit = GroupCommit()
        self.written_sizes: dict[str, int] = {}
        """Each thread's size after this process last wrote it (restore/.../external.py)."""
        self.local = ExternalThreads(layout, self.written_sizes, self.index)
        self._writers: dict[str, ThreadWriter] = {}  # open in this process, by thread
        self._dirty: dict[str, ThreadWriter] = {}  # open writers whose row is not written
        self._held: dict[str, Row] = {}  # rows of writers closed before their row was written
        self._marks: dict[str, int] = {}  # writer marks held, by thread (marks.py)
        self._holders: dict[str, str] = {}  # who holds each thread this process writes
        self._open: OrderedDict[str, ThreadWriter] = OrderedDict()
        """Writers with their file open, least recently used first (`_touch`)."""
        self.open_limit = open_limit()
        self._flushed = 0.0

    # --- what the writers tell -----------------------------------------------------------

    def opened(self, writer: ThreadWriter) -> None:
        """Before its first append: the thread's mark, held until its row is written."""
        self._hold_mark(writer)
        self._writers[writer.thread_id] = writer
        self._touch(writer)

    def reopened(self, writer: ThreadWriter) -> None:
        """A parked writer's file is open again: so is its mark, with its holder's name."""
        self._hold_mark(writer)
        holder = self._holders.get(writer.thread_id)
        if holder is not None:
            self.name_holder(writer.thread_id, holder)
        self._touch(writer)

    def _hold_mark(self, writer: ThreadWriter) -> None:
        if not self.read_only and writer.thread_id not in self._marks:
            try:
                self._marks[writer.thread_id] = marks.hold(self.layout, writer.thread_id)
            except OSError as exc:
                raise storage_error(exc, self.layout.writers_dir, "cannot mark") from exc

    def wrote(self, writer: ThreadWriter) -> None:
        self.written_sizes[writer.thread_id] = writer.size
        if writer.unsynced:
            self.group_commit.owe(writer)
        self._dirty[writer.thread_id] = writer
        self._open.move_to_end(writer.thread_id)  # appends only go to an open file
        stale = time.monotonic() - self._flushed >= FLUSH_SECONDS
        if stale and self.index.is_open:
            self.flush()

    def _touch(self, writer: ThreadWriter) -> None:
        """The writer's file is the most recently used; past `open_limit`, an idle one of
        the least recently used lets its descriptors go."""
        if self.read_only:
            return  # a read-only home's writers are read and closed at once
        self._open[writer.thread_id] = writer
        self._open.move_to_end(writer.thread_id)
        while len(self._open) > self.open_limit and self._park_one(writer):
            pass

    def _park_one(self, keep: ThreadWriter) -> bool:
        """Park the least recently used idle writer (else the least recently used, synced
        first); False when none could go (the bound is then exceeded until next time)."""
        candidates = [
            w for w in itertools.islice(self._open.values(), PARK_CANDIDATES) if w is not keep
        ]
        idle = [w for w in candidates if w.idle]
        for victim in idle[:1] or candidates[:1]:
            if victim.park():
                self._parked(victim)
                return True
        return False

    def _parked(self, writer: ThreadWriter) -> None:
        """Its mark goes with its file: removed if its row is written, else left unheld
        until `flush` writes it (or another process's first listing reads the thread).
        Its holder's name, which the mark held, goes to `locks/<id>.holder`."""
        thread_id = writer.thread_id
        del self._open[thread_id]
        fd = self._marks.pop(thread_id, None)
        if fd is None:
            return
        holder = self._holders.get(thread_id)
        if holder is not None:
            super().name_holder(thread_id, holder)
        if thread_id in self._dirty:
            os.close(fd)
        else:
            marks.release(self.layout, thread_id, fd)

    def lost(self, writer: ThreadWriter) -> None:
        """Another writer wrote the thread while this one was parked: what this process
        knew of it goes (its row too: the file is read again by whoever lists it)."""
        thread_id = writer.thread_id
        self._holders.pop(thread_id, None)
        for known in (self._writers, self._dirty, self._open):
            if known.get(thread_id) is writer:
                del known[thread_id]
        self.written_sizes.pop(thread_id, None)

    def closing(self, writer: ThreadWriter) -> None:
        """Its row, if not written yet, is taken now (the mark needs the open file); its
        writer mark is let go: removed if the row is written, else left unheld (as a dead
        writer's would be: a reader elsewhere reads the thread again) until it is."""
        thread_id = writer.thread_id
        self._holders.pop(thread_id, None)
        if self._writers.get(thread_id) is writer:
            del self._writers[thread_id]
        if self._open.get(thread_id) is writer:
            del self._open[thread_id]
        if self._dirty.get(thread_id) is writer:
            del self._dirty[thread_id]
            self._held[thread_id] = (writer.summary, writer.path, _mark(writer))
        fd = self._marks.pop(thread_id, None)
        if fd is not None and thread_id in self._held:
            os.close(fd)  # no descriptor per closed thread: flush removes the file
        elif fd is not None:
            marks.release(self.layout, thread_id, fd)

    def _row_written(self, thread_id: str) -> None:
        """A closed writer's row is in the index: its mark goes, unless a writer (of this
        process or another) holds the thread again."""
        if self._held.pop(thread_id, None) is not None and thread_id not in self._marks:
            marks.clear_if_free(self.layout, thread_id)

    def _live_rows(self) -> dict[str, Indexed]:
        """Index rows of the files this process writes, current in memory: the index never
        reads them (its first open in a process would otherwise see our own appends)."""
        return {str(w.path): (w.summary, _mark(w)) for w in self._writers.values() if not w.closed}

    def name_holder(self, thread_id: str, holder: str) -> None:
        """Kept in the thread's writer mark while this store holds it (no file made for
        the name: marks.py `name`); a parked writer's goes to `locks/<id>.holder`."""
        thread_id = validate_thread_id(thread_id)
        if thread_id in self._writers:
            self._holders[thread_id] = holder
        fd = self._marks.get(thread_id)
        if fd is None:
            super().name_holder(thread_id, holder)
            return
        try:
            marks.name(fd, holder)
        except OSError as exc:  # only a courtesy to other processes: the thread is ours
            logger.warning("cannot name the holder of %s: %s", thread_id, exc)

    # --- store-wide steps ----------------------------------------------------------------

    def flush(self) -> None:
        """Write every pending index row now; rows that cannot be written (SQLite: disk
        full) stay pending for the next flush. Never raises: the index is derived."""
        self._flushed = time.monotonic()
        if not self._dirty and not self._held:
            return
        rows = [*self._held.values()]
        rows += [(w.summary, w.path, _mark(w)) for w in self._dirty.values() if not w.closed]
        if derived("index rows", self.index.upsert_many, rows):
            parked = [thread_id for thread_id in self._dirty if thread_id not in self._marks]
            self._dirty.clear()
            for thread_id in list(self._held):
                self._row_written(thread_id)
            for thread_id in parked:  # their marks were left unheld for this row
                marks.clear_if_free(self.layout, thread_id)

    def idle(self) -> None:
        self.index.checkpoint()

    def begin_commit(self) -> Callable[[], None] | None:
        """Group commit here is one fdatasync per written file (restore/.../commit.py)."""
        return self.group_commit.begin()

    def sync(self) -> None:
        """One `syncfs` for every file written with `durable=False` (an import's batch)."""
        try:
            sync_filesystem(self.layout.home)
        except OSError as exc:
            raise storage_error(exc, self.layout.home, "cannot sync") from exc

    def watch(self, announce: Announce) -> None:
        """One machine: other processes' changes are read from the files (`local`)."""

    def check(
        self,
        progress: StepProgress | None = None,
        *,
        repair: bool = False,
        rebuild_index: bool = False,
    ) -> DoctorReport:
        """Every thread file read, the index repaired (in memory for a read-only home)."""
        from restore.stores.embedded.doctor import run_doctor

        self.search.close()  # the index file may be replaced: a later search opens the new one
        self.index.close()
        return run_doctor(
            self.layout,
            progress,
            repair=repair,
            read_only=self.read_only,
            rebuild_index=rebuild_index,
        )

    def redact_existing(
        self, progress: StepProgress | None = None, *, apply: bool = False
    ) -> RedactionReport:
        from restore.stores.embedded.redact import redact_existing

        if self.redactor is None:
            raise ProtocolError(ErrorKind.INVALID_PARAMS, "redaction is off", field="redaction")
        if apply and self.read_only:
            raise ProtocolError(ErrorKind.STORAGE_ERROR, f"{self.where} is read-only")
        self.index.close()  # its file goes once a thread changed: rebuilt at the next use
        return redact_existing(self.layout, self.redactor, progress, apply=apply)

    def close(self) -> None:
        self.search.close()  # first: the listing's connection, the file's last, checkpoints
        self.index.close()
        self.close_home()

    # --- threads -------------------------------------------------------------------------

    def set_archived(self, thread_id: str, archived: bool) -> ThreadSummary:
        """Archive or unarchive: the file moves between `threads/` and `archived/`."""
        path = self.move(thread_id, to_archived=archived)
        found = self.read_summary(path, archived)
        if found is None:
            raise ProtocolError(
                ErrorKind.THREAD_NOT_FOUND, "thread vanished while moving", threadId=thread_id
            )
        summary, covered = found
        if derived("index row", self.index.upsert, summary, path, covered):
            self._row_written(summary.threadId)  # the row at its old path: replaced here
        return summary

    def delete(self, thread_id: str) -> None:
        """The file, then what is derived from it (a failure there is logged: a stale
        snapshot, map or row of a missing file is ignored or dropped at its next use)."""
        super().delete(thread_id)
        self.written_sizes[thread_id] = DELETED
        derived("snapshot removal", snapshots.discard, self.layout, thread_id)
        derived("offset map removal", self.pages.forget, thread_id)
        if derived("index row removal", self.index.remove, thread_id):
            self._row_written(thread_id)

    def exists(self, thread_id: str) -> bool:
        return self.layout.locate(thread_id) is not None

    def hold_key(self, key: str) -> AbstractContextManager[None]:
        """The key's lock: a byte of a file in `locks/keys/` (keylocks.py). Whoever starts
        a thread for the key under it flushes its row before letting go
        (restore/service/continuation.py)."""
        return keylocks.held(self.layout, key)

    def transcript_path(self, thread_id: str) -> str | None:
        return str(self.layout.thread_path(thread_id))

    def load_snapshot(self, thread_id: str) -> tuple[Snapshot | None, str | None]:
        return snapshots.load(self.layout, thread_id)

    def save_snapshot(self, thread_id: str, snapshot: Snapshot) -> None:
        self.check_home(thread_id)  # never a directory made anew in a deleted one's place
        snapshots.save(self.layout, thread_id, snapshot)

    def put_blob(self, data: bytes) -> str:
        self.check_home()
        if self.redactor is not None:
            data = self.redactor.data(data)
        return blobs.put(self.layout, data)

    def get_blob(self, sha: str) -> bytes | None:
        return blobs.get(self.layout, sha)

    def blob_size(self, sha: str) -> int | None:
        return blobs.size(self.layout, sha)

    def blob_shas(self) -> list[str]:
        return blobs.shas(self.layout)

    # --- copying (sessiond migrate) ----------------------------------------------------------

    def thread_ids(self) -> list[str]:
        """Every thread on disk, once (a live file wins over an archived copy)."""
        return sorted({path.stem for path, _ in self.layout.iter_thread_files()})

    def import_thread(self, thread_id: str, items: list[Item], archived: bool) -> int:
        """Write a thread's records as they are (seq, ts and ids kept), under its claim, its
        lock and its writer mark (held until its row is written).

        Idempotent: items whose id the file already has are skipped. A file that holds
        other records at the same seqs (the copies diverged) is left alone: InvalidParams.
        """
        if self.redactor is not None:
            items = [self.redactor.item(item) for item in items]
        thread_id = validate_thread_id(thread_id)
        self.claim(thread_id)
        try:
            return self._import_claimed(thread_id, items, archived)
        finally:
            self.claims.drop(thread_id)

    def _import_claimed(self, thread_id: str, items: list[Item], archived: bool) -> int:
        mark = marks.hold(self.layout, thread_id)
        try:
            written = self._import_locked(thread_id, items, archived)
            found = self.layout.locate(thread_id)
            row = None if found is None else self.read_summary(*found)
            if (
                found is None
                or row is None
                or derived("index row", self.index.upsert, row[0], found[0], row[1])
            ):
                marks.release(self.layout, thread_id, mark)
                mark = -1
            return written
        finally:
            if mark != -1:
                os.close(mark)  # not written: the mark stays for the next listing to read

    def _import_locked(self, thread_id: str, items: list[Item], archived: bool) -> int:
        found = self.layout.locate(thread_id)
        if found is None:
            data = b"".join(encode_line(item) for item in items)
            path = self.layout.thread_path(thread_id, archived=archived)
            private_dirs(path.parent)
            write_atomically(path, data)
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
            seqs: dict[str, int] = {}
            for item in present:  # a repeated id (a damaged file) keeps its highest seq
                seqs[str(item["id"])] = max(seqs.get(str(item["id"]), 0), item["seq"])
            new = missing_records(thread_id, items, seqs)
            if new:
                os.write(fd, b"".join(encode_line(item) for item in new))
                os.fsync(fd)
            return len(new)
        finally:
            os.close(fd)


def _mark(writer: ThreadWriter) -> LineMark | None:
    """The writer's last line, for its row; None (read whole later) if it cannot be read."""
    try:
        return writer.mark()
    except OSError:
        return None


def _conforms(store: EmbeddedStore, writer: ThreadWriter) -> tuple[api.Store, api.Writer]:
    """The type checker's proof that this backend is the interface (never called)."""
    return store, writer
