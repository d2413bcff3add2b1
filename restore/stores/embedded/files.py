"""Append-only JSONL thread files: one writer per thread, idempotent, durable before ack.

Why a file per thread with an OS lock: resuming needs nothing but the id (no index, no
service), a crash can at worst tear the last line, and `flock` makes a second writer (in
this process or another) fail fast with ThreadBusy instead of interleaving lines.

A writer holds its thread by its claim (claims.py) for as long as it is open, and by the
file's `flock` while its descriptor is open. A store may let an idle writer's descriptor
go (`park`: store.py keeps a bounded number open); its next append opens the file again,
takes the flock and checks that the file is exactly as the writer left it (its size and
last line) before it writes: a writer that lost its thread meanwhile (to a writer that
takes no claims, or a hand edit) is ThreadBusy, and never writes beside the other.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import threading
import uuid
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

import orjson

from protocol.errors import ErrorKind, ProtocolError, thread_not_found
from restore.home.files import fsync_dir, private_dirs, read_regular, write_new
from restore.home.layout import Layout
from restore.ids import sha256_of, validate_thread_id
from restore.redaction.settings import RedactorSlot
from restore.stores.api import AppendResult, Durability, ThreadFile, storage_failure
from restore.stores.embedded.claims import Claims
from restore.stores.embedded.index import Indexed
from restore.stores.embedded.jsonl import LineMark, parse_bytes
from restore.stores.records import Item, Staged, encode_line, stamp
from restore.stores.snapshots import Checkpoint
from restore.summary import ThreadSummary, summarize

logger = logging.getLogger("sessiond.store")
ORIGIN_LINE_MAX = 1 << 16  # a first line longer than this is no session_meta of ours


def thread_file_error(exc: OSError, thread_id: str, path: Path | None = None) -> ProtocolError:
    """A thread file's OSError as the typed error (the store's one mapping of them)."""
    where = str(path) if path is not None else None
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return storage_failure(
            "disk full: nothing was written", full=True, threadId=thread_id, path=where
        )
    return storage_failure(
        f"thread file {where or thread_id}: {exc.strerror or exc}", threadId=thread_id, path=where
    )


def deleted_error(what: Path, thread_id: str | None, home: Path) -> ProtocolError:
    """A write into a file or data directory deleted under sessiond: refused, with the
    mend (the deleted file would take the record with it, unseen: issue 34)."""
    return storage_failure(
        f"{what} was deleted while sessiond had it open (was the data directory {home} "
        "removed?): nothing more is written there, and this was not kept. Restart sessiond "
        "(it makes the data directory anew) or put the directory back from a backup",
        threadId=thread_id,
        path=str(what),
        deleted=True,
        retryable=False,
    )


def open_thread_file(path: Path, flags: int, thread_id: str) -> int:
    """A descriptor on a thread file, which must be a regular file reached without a
    symlink (O_NOFOLLOW): a link planted in the data dir would send appends, and a torn
    tail's repair, to a file elsewhere. StorageError otherwise, naming the path."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ProtocolError(
                ErrorKind.STORAGE_ERROR,
                f"thread file {path} is a symlink; sessiond does not follow it",
                threadId=thread_id,
                path=str(path),
            ) from None
        raise thread_file_error(exc, thread_id, path) from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ProtocolError(
            ErrorKind.STORAGE_ERROR,
            f"thread file {path} is not a regular file",
            threadId=thread_id,
            path=str(path),
        )
    return fd


def _exists(thread_id: str) -> ProtocolError:
    return ProtocolError(ErrorKind.INVALID_ID, "thread id already exists", threadId=thread_id)


def read_thread_file(path: Path, thread_id: str) -> bytes:
    """The whole thread file, read through `open_thread_file`."""
    fd = open_thread_file(path, os.O_RDONLY, thread_id)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise thread_file_error(exc, thread_id, path) from exc
    finally:
        os.close(fd)


MARK_AHEAD_BYTES = 1 << 20
"""A last line at least this long is hashed for its mark while it is written, on a thread
of its own (hashlib lets go of the GIL): otherwise the next index flush (every
`thread/list` runs one) read the line back and hashed it on the store thread, where every
other client's record and listing waited for it (16 MiB: ~13 ms, more under load)."""

_hasher: ThreadPoolExecutor | None = None
_hasher_made = threading.Lock()


def _hash_ahead(line: bytes) -> Future[str]:
    """`sha256_of(line)` on the hasher thread (made on first use: no work at startup)."""
    global _hasher
    with _hasher_made:
        if _hasher is None:
            _hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessiond-mark")
    return _hasher.submit(sha256_of, line)


class ThreadWriter:
    """The exclusive, open handle on one thread file; all appends go through it."""

    def __init__(
        self,
        thread_id: str,
        path: Path,
        fd: int,
        contents: ThreadFile,
        durability: Durability,
        archived: bool,
        base: Checkpoint | None = None,
        store: ThreadStore | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.path = path
        self._store = store
        """Told of every write and of the close (the embedded store's rows, sizes, syncs)."""
        self._fd = fd
        """The open descriptor (which holds the file's flock); -1 when parked or closed."""
        self._closed = False
        self._parked_mark: LineMark | None = None
        """The last line when the descriptor was let go: to verify the file by, reopened."""
        self._lost: str | None = None
        """Why the thread was lost while parked (another writer had it): ThreadBusy."""
        self._durability = durability
        self._size = contents.size
        self._needs_cut = False
        self.unsynced = False  # group commit: written, not yet synced
        self._syncing: PendingSync | None = None
        self.lines = contents.lines
        self.last_line_start = contents.last_line_start
        self._mark_ahead: tuple[int, int, Future[str]] | None = None
        """A long last line's (start, end, sha256 being computed): see MARK_AHEAD_BYTES."""
        # Item ids seen so far, for idempotency. Reading them needs the whole file, so after
        # a snapshot-based open they are loaded by the first append, not by the resume.
        self._seq_of_id: dict[str, int] | None = None
        if base is None:
            self._seq_of_id = {}
            for item in contents.items:
                self._seq_of_id.setdefault(str(item["id"]), item["seq"])
            self.summary = summarize(thread_id, contents.items, archived=archived)
        else:
            self.summary = ThreadSummary(**{**base.summary, "archived": archived})
            for item in contents.items:
                self.summary.apply(item)
        self.last_seq = max(
            (item["seq"] for item in contents.items), default=base.seq if base else 0
        )
        self.loaded: ThreadFile | None = contents
        """What the open read found (after `base`, if any); for the opener, then dropped."""
        self.base = base
        self.base_rejected: str | None = None
        if store is not None:
            store.opened(self)

    @property
    def size(self) -> int:
        return self._size

    def mark(self) -> LineMark | None:
        """The last line written: derived state (a snapshot, an index row) keeps it to check
        later that the file still holds what it was derived from."""
        if self._fd < 0:  # parked: as it was let go (a lost thread has no mark of ours)
            return None if self._lost is not None else self._parked_mark
        if self.last_line_start is None:
            return None
        ahead = self._mark_ahead
        if ahead is not None and ahead[:2] == (self.last_line_start, self._size):
            return LineMark(ahead[0], ahead[1], ahead[2].result())  # the bytes this wrote
        return LineMark.of(self._fd, self.last_line_start, self._size)

    def checkpoint(self) -> Checkpoint | None:
        """Where the file stands now, for a snapshot to verify itself against later."""
        mark = self.mark()
        if mark is None:
            return None
        return Checkpoint(
            offset=self._size,
            seq=self.last_seq,
            lines=self.lines,
            line_start=mark.start,
            line_sha=mark.sha,
            summary=asdict(self.summary),
        )

    def seq_of(self, item_id: str) -> int | None:
        """The seq of an item id already in the file (None if new)."""
        return self._known_ids().get(str(item_id))

    def _known_ids(self) -> dict[str, int]:
        if self._seq_of_id is None:
            contents = parse_bytes(os.pread(self._descriptor(), self._size, 0))
            self._seq_of_id = {}
            for item in contents.items:
                self._seq_of_id.setdefault(str(item["id"]), item["seq"])
        return self._seq_of_id

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def parked(self) -> bool:
        """Open, with its descriptor let go (`park`): the next append takes it back."""
        return self._fd < 0 and not self._closed

    @property
    def idle(self) -> bool:
        """Open, and its descriptor can go without waiting: nothing owed to a group commit,
        no sync of it running, no partial line to cut."""
        return (
            self._fd >= 0
            and not self.unsynced
            and not self._needs_cut
            and (self._syncing is None or self._syncing.done.is_set())
        )

    def revalidate(self) -> bool:
        """Before a session's request: a parked writer takes its file back now (ThreadBusy
        if it was lost). Nothing is ever reloaded: a writer only writes a file it holds."""
        self._descriptor()
        return False

    def park(self) -> bool:
        """Let the descriptor (and with it the file's flock) go while the writer stays
        open; its claim keeps the thread. What it owes a group commit is synced first, and
        a sync of it running is waited for (the committer syncs this descriptor). False
        when it must stay open for now: a sync failed, or a partial line is still to cut."""
        if self._fd < 0 or self._needs_cut:
            return False
        pending, self._syncing = self._syncing, None
        if pending is not None:
            pending.done.wait()
        try:
            if self.unsynced or (pending is not None and pending.error is not None):
                os.fdatasync(self._fd)
                self.unsynced = False
            mark = self.mark()
        except OSError:
            self.unsynced = True  # the group commit syncs it again, and answers its error
            return False
        self._parked_mark = mark
        os.close(self._fd)
        self._fd = -1
        return True

    def _descriptor(self) -> int:
        """The open descriptor, taking a parked writer's file back first."""
        if self._fd < 0:
            if self._closed:
                raise (
                    self._lost_error()
                    if self._lost
                    else ProtocolError(
                        ErrorKind.STALE_SESSION, "thread writer is closed", threadId=self.thread_id
                    )
                )
            self._reopen()
        return self._fd

    def _reopen(self) -> None:
        """The file again, its flock, and the proof that nobody wrote it meanwhile: its
        size and last line as this writer left them. Any other writer's trace, and the
        thread is lost (ThreadBusy): the file is theirs as it is."""
        try:
            fd = open_thread_file(self.path, os.O_RDWR | os.O_APPEND, self.thread_id)
        except ProtocolError:
            if os.path.lexists(self.path):
                raise  # a passing failure (no descriptor left, say): still parked
            self._lose("the thread file was moved or deleted by another process")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self._lose("another process is writing the thread")
        try:
            mark = self._parked_mark
            same = os.fstat(fd).st_size == self._size and (mark is None or mark.holds(fd))
        except OSError as exc:
            os.close(fd)
            raise thread_file_error(exc, self.thread_id, self.path) from exc
        if not same:
            os.close(fd)
            self._lose("another process wrote the thread while this session was idle")
        self._fd = fd
        if self._store is not None:
            try:
                self._store.reopened(self)
            except BaseException:
                os.close(fd)
                self._fd = -1
                raise

    def _lose(self, why: str) -> NoReturn:
        """The thread is someone else's now: this writer is closed, and says why."""
        self._lost = why
        self._closed = True
        if self._store is not None:
            self._store.lost(self)
            self._store.claims.drop(self.thread_id)
        raise self._lost_error()

    def _lost_error(self) -> ProtocolError:
        return ProtocolError(
            ErrorKind.THREAD_BUSY,
            f"{self._lost}: resume it to go on",
            threadId=self.thread_id,
            holder="another process",
        )

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
        """Stamp and write items not seen before; acknowledge only once durable.

        `items` are validated dicts with `type` and `id`. A duplicate `id` (also within the
        batch) is not written again; its original seq is reported, so a retried request gets
        the same answer as the first. On a write error the file is cut back to where it
        was, so a failed append leaves no partial line. With `defer_sync` (group commit)
        the caller must call `sync()` before acknowledging. With `keep_ts` an item's own
        `ts` is kept (an import dates its items by the source transcript, not by now).
        """
        self._descriptor()  # closed: StaleSession (ThreadBusy if lost); parked: reopened
        self.check_linked()
        # Items the server minted (fresh uuid4 ids) cannot be duplicates: skip loading the
        # id set for them, so a resume from a snapshot never reads the whole file.
        known_ids: dict[str, int] = {} if minted and self._seq_of_id is None else self._known_ids()
        redactor = self._store.redactor if self._store is not None and not redacted else None
        stamped = stamp(
            items, session_id, self.last_seq, known_ids, keep_ts=keep_ts, redactor=redactor
        )
        if stamped.stored:
            lines = [encode_line(line) for line in stamped.stored]
            last_start = self._size + sum(len(line) for line in lines[:-1])
            self._write_durably(b"".join(lines), defer_sync)
            self.last_line_start = last_start
            if self._mark_ahead is not None:
                self._mark_ahead[2].cancel()  # not begun: nobody will ask for that line's
            last = lines[-1]
            ahead = len(last) >= MARK_AHEAD_BYTES
            self._mark_ahead = (last_start, self._size, _hash_ahead(last)) if ahead else None
            self.lines += len(lines)
            known_ids.update(stamped.new_ids)
            self.last_seq = stamped.last_seq
            for line in stamped.stored:
                self.summary.apply(line)
            if self._store is not None:
                self._store.wrote(self)
        seqs = stamped.seqs
        return AppendResult(
            min(seqs, default=None), max(seqs, default=None), stamped.duplicates, stamped.stored
        )

    def stage(self, items: list[Item], session_id: str, *, redacted: bool) -> Staged | None:
        """Nothing written ahead: a thread's file is its own, so its append holds no one
        else's (the store thread's time for a 16 MiB record is a file write)."""
        return None

    def check_linked(self) -> None:
        """StorageError if its file or the data directory was deleted under it: one
        `fstat` each, per append and per sync (a deleted file still takes writes, and
        its records would be lost unseen)."""
        if self._store is not None:
            self._store.check_home(self.thread_id)
        if self._fd >= 0 and os.fstat(self._fd).st_nlink == 0:  # (a parked one: at reopen)
            home = self._store.layout.home if self._store is not None else self.path.parent
            raise deleted_error(self.path, self.thread_id, home)

    def _write_durably(self, data: bytes, defer_sync: bool = False) -> None:
        if self._needs_cut:
            self._cut_back()
            if self._needs_cut:
                raise thread_file_error(
                    OSError(errno.EIO, "a partial line could not be removed"), self.thread_id
                )
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            if self._durability is Durability.FSYNC:
                os.fsync(self._fd)
                self.check_linked()  # deleted meanwhile: what was synced is gone with it
            elif self._durability is Durability.GROUP:
                if defer_sync:
                    self.unsynced = True
                else:
                    os.fdatasync(self._fd)
        except OSError as exc:
            self._cut_back()
            raise thread_file_error(exc, self.thread_id, self.path) from exc
        self._size += len(data)

    def begin_sync(self) -> PendingSync | None:
        """Group commit: hand the deferred appends' sync to another thread (None: nothing
        to sync). Appends may go on meanwhile; they are owed the next sync."""
        if self._fd < 0:  # closed, or parked: a parked writer was synced when it let go
            self.unsynced = False
            return None
        if not self.unsynced:
            return None
        self.unsynced = False
        self._syncing = PendingSync(self, self._fd)
        return self._syncing

    def _cut_back(self) -> None:
        """Remove a partial write; if even that fails, retry before the next append."""
        try:
            os.ftruncate(self._fd, self._size)
            self._needs_cut = False
        except OSError:
            self._needs_cut = True

    def close(self) -> None:
        """Release the lock; the thread can be written by someone else afterwards."""
        if self._closed:
            return
        if self._store is not None:
            self._store.closing(self)
        if self._fd >= 0:
            if self._syncing is not None:
                # The committer may be about to sync this descriptor: closed under it, its
                # number could already name another file. (Syncs run in order, so the
                # latest one done means all are.)
                self._syncing.done.wait()
            if self.unsynced:
                with contextlib.suppress(OSError):
                    os.fdatasync(self._fd)
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = -1
        self._closed = True
        if self._store is not None:
            self._store.claims.drop(self.thread_id)  # after the flock: nobody meets it held


class PendingSync:
    """One file's share of a group commit, run off the store thread (the committer).

    It syncs the writer's own descriptor, which the writer does not close before the sync
    is done. (Not a duplicate: a `dup` and a `close` per sync cost two more releases of
    the GIL, and winning the GIL back is most of what a sync costs the committer.)
    """

    def __init__(self, writer: ThreadWriter, fd: int) -> None:
        self.writer = writer
        self._fd = fd
        self.error: ProtocolError | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            os.fdatasync(self._fd)
            self.writer.check_linked()  # deleted meanwhile: the batch is gone with it
        except OSError as exc:
            self.error = thread_file_error(exc, self.writer.thread_id, self.writer.path)
            raise self.error from exc
        except ProtocolError as exc:
            self.error = exc
            raise
        finally:
            self.done.set()


class ThreadStore:
    """Thread files under one data directory."""

    redactor = RedactorSlot()

    def __init__(
        self, layout: Layout, durability: Durability = Durability.FSYNC, *, read_only: bool = False
    ) -> None:
        self.layout = layout
        self.durability = durability
        self.redactor = None
        self.read_only = read_only
        """A read-only home: `open_writer` opens files for reading only, locks and repairs
        nothing (the files are nobody's to write here), and its writer cannot append."""
        self.claims = Claims(layout)
        """The threads this store's writers hold, whether their files are open or not."""
        self._home_fd: int | None = None
        """The data directory as this store found it: deleted, it has no link left."""
        with contextlib.suppress(OSError):
            self._home_fd = os.open(layout.home, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def check_home(self, thread_id: str | None = None) -> None:
        """StorageError (`deleted`) if the data directory was deleted since the store
        opened it: a write would go into deleted files, or into a directory made anew
        that no other process knows of."""
        if self._home_fd is not None and os.fstat(self._home_fd).st_nlink == 0:
            raise deleted_error(self.layout.home, thread_id, self.layout.home)

    def close_home(self) -> None:
        if self._home_fd is not None:
            os.close(self._home_fd)
            self._home_fd = None

    # What a subclass hears of its writers (restore/stores/embedded/store.py): nothing here.

    def opened(self, writer: ThreadWriter) -> None:
        """A writer of this store now holds its thread."""

    def wrote(self, writer: ThreadWriter) -> None:
        """After an append that wrote lines (`writer.unsynced`: it owes a group-commit sync)."""

    def closing(self, writer: ThreadWriter) -> None:
        """Before the writer's descriptor (and lock) goes."""

    def reopened(self, writer: ThreadWriter) -> None:
        """A parked writer has its descriptor (and the file's lock) again."""

    def lost(self, writer: ThreadWriter) -> None:
        """A parked writer found its thread written by someone else: it is closed, and
        what it knew of the thread is stale."""

    def claim(self, thread_id: str) -> None:
        """The thread is this store's until `claims.drop`; ThreadBusy if a writer has it."""
        if not self.claims.take(thread_id):
            raise self._busy(thread_id)

    def _busy(self, thread_id: str) -> ProtocolError:
        holder = self._holder(thread_id)
        return ProtocolError(
            ErrorKind.THREAD_BUSY,
            f"thread is being written by {holder}",
            threadId=thread_id,
            holder=holder,
        )

    def _durability(self, durable: bool) -> Durability:
        return self.durability if durable else Durability.NONE

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
    ) -> ThreadWriter:
        """Make a new thread durable at once: its file with the `session_meta` line (and
        `items` after it, in the same write and sync: an import creates whole threads).
        `durable=False`: written to the OS only, synced by the caller (`sync_filesystem`)."""
        thread_id = validate_thread_id(thread_id)
        self.check_home(thread_id)  # not a new data directory in a deleted one's place
        path = self.layout.thread_path(thread_id)
        if not self.claims.take(thread_id):
            raise _exists(thread_id) if os.path.lexists(path) else self._busy(thread_id)
        try:
            private_dirs(path.parent)
            try:
                fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                raise _exists(thread_id) from None
        except BaseException:
            self.claims.drop(thread_id)
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # only a writer that takes no claims could hold it
            os.close(fd)
            self.claims.drop(thread_id)
            raise self._busy(thread_id) from None
        durability = self._durability(durable)
        try:
            writer = ThreadWriter(thread_id, path, fd, ThreadFile(), durability, False, store=self)
        except BaseException:  # the store could not take the thread (its writer mark)
            os.close(fd)
            path.unlink(missing_ok=True)
            self.claims.drop(thread_id)
            raise
        try:
            stored = writer.append(
                [meta, *items], session_id, keep_ts=keep_ts, redacted=redacted
            ).stored
            writer.loaded = ThreadFile(items=stored)
            if durability is not Durability.NONE:  # NONE leaves syncing to the caller
                fsync_dir(path.parent)
        except BaseException:
            writer.close()
            path.unlink(missing_ok=True)
            raise
        return writer

    def open_writer(
        self,
        thread_id: str,
        base: Checkpoint | None = None,
        *,
        durable: bool = True,
        derived: bool = False,
    ) -> ThreadWriter:
        """Take the thread's lock (ThreadBusy if held) and repair a torn tail first.

        With a `base` checkpoint (from a snapshot) only the bytes after it are read, once
        the checkpoint is verified against the file; `writer.base` is None when it was not
        usable and the whole file was read instead (`writer.base_rejected` says why).
        """
        path, archived = self._locate(thread_id)
        thread_id = path.stem  # validated by `_locate`
        if self.read_only:
            fd = open_thread_file(path, os.O_RDONLY, thread_id)
        else:
            self.claim(thread_id)
            try:
                fd = open_thread_file(path, os.O_RDWR | os.O_APPEND, thread_id)
            except BaseException:
                self.claims.drop(thread_id)
                raise
        try:
            if not self.read_only:
                self._lock(fd, thread_id)
            rejected = None
            if base is not None:
                rejected = self._verify(fd, base)
                if rejected is not None:
                    base = None
            found = self._read_locked(fd, base)
            repaired = found if self.read_only else self._repair_tail(thread_id, fd, found, base)
            # Report what was found (torn tail included), write on what was repaired.
            repaired.skipped = found.skipped
            repaired.bom = found.bom
            repaired.torn_tail_offset = found.torn_tail_offset
            writer = ThreadWriter(
                thread_id,
                path,
                fd,
                repaired,
                self._durability(durable and not derived),  # derived: no sync of its own
                archived,
                base,
                store=self,
            )
            writer.base_rejected = rejected
            return writer
        except BaseException:
            os.close(fd)
            self.claims.drop(thread_id)
            raise

    def _lock(self, fd: int, thread_id: str) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise self._busy(thread_id) from None
        self._holder_path(thread_id).unlink(missing_ok=True)  # a previous holder's name

    def read(self, thread_id: str) -> tuple[ThreadFile, bool]:
        """Read a thread without locking it (readers never block the writer)."""
        path, archived = self._locate(thread_id)
        return parse_bytes(read_thread_file(path, thread_id)), archived

    def read_origin(self, thread_id: str) -> dict[str, Any] | None:
        """The `origin` of a thread's first `session_meta`, from its first line alone (an
        imported thread is resumed differently, and this must not cost a full read)."""
        path, _ = self._locate(thread_id)
        fd = open_thread_file(path, os.O_RDONLY, thread_id)
        try:
            with open(fd, "rb", closefd=False) as handle:
                first = handle.readline(ORIGIN_LINE_MAX)
        except OSError as exc:
            raise thread_file_error(exc, thread_id, path) from exc
        finally:
            os.close(fd)
        contents = parse_bytes(first if first.endswith(b"\n") else b"")
        meta = contents.items[0] if contents.items else {}
        origin = meta.get("origin") if meta.get("type") == "session_meta" else None
        return origin if isinstance(origin, dict) else None

    def read_summary(
        self, path: Path, archived: bool, since: Indexed | None = None
    ) -> Indexed | None:
        """Summary of one file for the index, and the last line it covers; None when it
        vanished or cannot be read (one unreadable file must not stop a listing; `sessiond
        doctor` reports it).

        With `since` (a row's summary and last line), a file that only grew since is read
        from that line on: files are append-only, and the line still being there proves
        it. Otherwise it is read whole."""
        try:
            fd = open_thread_file(path, os.O_RDONLY, path.stem)
        except ProtocolError:
            return None
        try:
            size = os.fstat(fd).st_size
            start, summary = 0, None
            row, mark = since if since is not None else (None, None)
            if row is not None and mark is not None and mark.end <= size and mark.holds(fd):
                start = mark.end
                summary = ThreadSummary(**{**asdict(row), "archived": archived})
            data = os.pread(fd, size - start, start)
        except OSError:
            return None
        finally:
            os.close(fd)
        contents = parse_bytes(data, start)
        if summary is None:
            if not contents.items:  # no record (a thread/start cut short): nothing to list
                return None
            summary = summarize(path.stem, contents.items, archived=archived)
        else:
            for item in contents.items:
                summary.apply(item)
        # Up to the end of the last whole record: a torn tail is read again next time.
        torn = contents.torn_tail_offset
        covered = torn if torn is not None else contents.size
        if covered == start:  # nothing whole was appended: the same last line
            return summary, mark
        end = covered - start
        line_start = data.rfind(b"\n", 0, end - 1) + 1
        line = data[line_start:end]
        return summary, LineMark(start + line_start, covered, sha256_of(line))

    def move(self, thread_id: str, *, to_archived: bool) -> Path:
        """Archive or unarchive: rename between `threads/` and `archived/`, under the lock."""
        writer = self.open_writer(thread_id)
        try:
            target = self.layout.thread_path(writer.thread_id, archived=to_archived)
            if target == writer.path:
                return target
            private_dirs(target.parent)
            os.rename(writer.path, target)
            fsync_dir(target.parent)
            fsync_dir(writer.path.parent)
            return target
        finally:
            writer.close()

    def delete(self, thread_id: str) -> None:
        writer = self.open_writer(thread_id)
        try:
            writer.path.unlink()
            fsync_dir(writer.path.parent)
        finally:
            writer.close()

    def name_holder(self, thread_id: str, holder: str) -> None:
        """Name the client holding a thread's lock, for other processes' ThreadBusy errors.

        flock says only that the thread is held; here the name lives in
        `locks/<id>.holder`, replaced atomically (the embedded store keeps it in the
        thread's writer mark while it holds one: store.py), and is trusted only while its
        process is alive.
        """
        path = self._holder_path(validate_thread_id(thread_id))
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
        try:
            write_new(temporary, orjson.dumps({"holder": holder, "pid": os.getpid()}))
            os.replace(temporary, path)
        except OSError as exc:  # only a courtesy to other processes: the thread is ours
            logger.warning("cannot name the holder of %s: %s", thread_id, exc)
            with contextlib.suppress(OSError):
                temporary.unlink()

    def _holder_path(self, thread_id: str) -> Path:
        return self.layout.home / "locks" / f"{thread_id}.holder"

    def _holder(self, thread_id: str) -> str:
        """Who holds the thread, as its holder named itself: in the thread's writer mark,
        else in `locks/<id>.holder` (a parked writer's, which holds no mark)."""
        for path in (self.layout.writer_mark_path(thread_id), self._holder_path(thread_id)):
            try:
                named = orjson.loads(read_regular(path))
                pid, holder = named["pid"], str(named["holder"])
                os.kill(pid, 0)
            except (OSError, ValueError, TypeError, KeyError):
                continue
            return holder
        return "another process"

    def _locate(self, thread_id: str) -> tuple[Path, bool]:
        found = self.layout.locate(thread_id)
        if found is None:
            raise thread_not_found(thread_id)
        return found

    @staticmethod
    def _read_locked(fd: int, base: Checkpoint | None = None) -> ThreadFile:
        size = os.fstat(fd).st_size
        start = base.offset if base is not None else 0
        contents = parse_bytes(
            os.pread(fd, size - start, start), start, base.lines if base is not None else 0
        )
        if base is not None and contents.last_line_start is None:
            contents.last_line_start = base.line_start
        return contents

    @staticmethod
    def _verify(fd: int, base: Checkpoint) -> str | None:
        """Why a checkpoint does not describe this file (None when it does)."""
        size = os.fstat(fd).st_size
        if base.offset > size:
            return "stale: the file is shorter than the snapshot"
        if not 0 <= base.line_start < base.offset:
            return "corrupt: bad offsets"
        line = os.pread(fd, base.offset - base.line_start, base.line_start)
        if sha256_of(line) != base.line_sha:
            return "stale: the file changed before the snapshot's offset"
        return None

    def _repair_tail(
        self, thread_id: str, fd: int, contents: ThreadFile, base: Checkpoint | None = None
    ) -> ThreadFile:
        """Before appending: copy a torn tail aside and cut it off, or finish an open line.

        The torn bytes go to `recovered/` first and are fsynced, so truncating loses nothing.
        """
        if contents.torn_tail_offset is not None:
            offset = contents.torn_tail_offset
            torn = os.pread(fd, contents.size - offset, offset)
            aside = self.layout.recovered_dir / f"{thread_id}.{offset}.{uuid.uuid4().hex[:8]}.torn"
            write_new(aside, torn, sync=True)
            os.ftruncate(fd, offset)
            os.fsync(fd)
            return self._read_locked(fd, base)
        if contents.unterminated_tail:
            os.write(fd, b"\n")
            os.fsync(fd)
            return self._read_locked(fd, base)
        return contents
