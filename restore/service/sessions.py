"""Open sessions and their leases: which client writes which thread in this process, and
the one write path every append of a session takes (store, live state, snapshot).

A thread has at most one open session in a process, held by one client (its lease);
other processes are kept out by the store's lock. An open session keeps every subsystem's
state current as items are appended, so the ledger can refuse a conflicting operation and
a snapshot costs nothing to take.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorKind, ProtocolError
from restore.engine.environment import ENVIRONMENT_FIELDS
from restore.engine.subsystems import ThreadState
from restore.home.state import Home
from restore.ids import validate_thread_id
from restore.stores.api import AppendResult, Store, Writer, derived
from restore.stores.records import Item, Staged
from restore.stores.snapshots import EVERY_ITEMS, Snapshot
from restore.summary import ThreadSummary

logger = logging.getLogger(__name__)

LOCAL_OWNER = "local"
SNAPSHOT_RETRY_ITEMS = 100
"""After a failed snapshot, items until the next attempt."""


@dataclass
class OpenSession:
    """A writable session: its id, the writer, the client holding the lease, live state."""

    session_id: str
    writer: Writer
    owner: str
    state: ThreadState
    skipped: list[dict[str, Any]] = field(default_factory=list)
    bom: bool = False
    snapshot_seq: int = 0


@dataclass(frozen=True)
class StartedThread:
    summary: ThreadSummary
    session_id: str


def new_id() -> str:
    return str(uuid.uuid4())


def busy(thread_id: str, holder: str) -> ProtocolError:
    return ProtocolError(
        ErrorKind.THREAD_BUSY,
        f"thread is being written by {holder}",
        threadId=thread_id,
        holder=holder,
    )


def end_item(session_id: str, reason: str) -> Item:
    """The record of a session's end (close, disconnect), written before its lock goes."""
    return {
        "type": "lifecycle",
        "id": new_id(),
        "event": "SessionEnd",
        "status": "ended",
        "reason": reason,
        "targetSessionId": session_id,
    }


class Sessions:
    """This process's open sessions, by thread id."""

    def __init__(self, store: Store, home: Home) -> None:
        self.store = store
        self.home = home
        self.open: dict[str, OpenSession] = {}

    def register(self, thread_id: str, session: OpenSession) -> None:
        """The session holds its thread from now on. Its client is named to the store in
        the same step, so another process's ThreadBusy names it from the answer on (the
        local owner, a command of this machine's, has no client to name)."""
        self.open[thread_id] = session
        if session.owner == LOCAL_OWNER:
            return
        try:
            self.store.name_holder(thread_id, session.owner)
        except ProtocolError as exc:  # only a courtesy to other processes: the thread is ours
            logger.warning("the holder of %s is not named: %s", thread_id, exc)

    def writable(self) -> None:
        """Every write starts here: a read-only home refuses it before anything happens."""
        if self.store.read_only:
            raise self.home.refuse_write()

    def lease(self, thread_id: str, session_id: str, owner: str) -> OpenSession:
        """The open session a request names (StaleSession / ThreadBusy otherwise),
        revalidated against the store first."""
        self.writable()  # every write through a session (record, clear, edits) starts here
        session = self.open.get(thread_id)  # an open thread's id is valid already
        if session is None:
            thread_id = validate_thread_id(thread_id)
            session = self.open.get(thread_id)
        if session is not None and session.session_id == session_id and session.owner != owner:
            raise busy(thread_id, session.owner)
        if session is None or session.session_id != session_id:
            raise ProtocolError(
                ErrorKind.STALE_SESSION,
                "no open session with this id on the thread: resume it first",
                threadId=thread_id,
                sessionId=session_id,
            )
        self._revalidate(session)
        return session

    def _revalidate(self, session: OpenSession) -> None:
        """A shared store may have lost a transaction (or its connection, and with it the
        thread's lock): the writer takes the lock again and reloads what is committed, and
        the session's state is replayed from that. ThreadBusy if another machine took the
        thread meanwhile (the session is gone); StorageError while the store is down."""
        try:
            reloaded = session.writer.revalidate()
        except ProtocolError as exc:
            if exc.kind is ErrorKind.THREAD_BUSY:
                self.open.pop(session.writer.thread_id, None)
            raise
        if reloaded:
            contents, _ = self.store.read(session.writer.thread_id)
            session.state = ThreadState().apply_all(contents.items)
            session.snapshot_seq = session.state.seq

    def append(
        self,
        session: OpenSession,
        items: list[Item],
        session_id: str,
        *,
        minted: bool = False,
        defer_sync: bool = False,
        redacted: bool = False,
        staged: Staged | None = None,
    ) -> AppendResult:
        """The one write path of an open session: the store, live state, snapshot."""
        result = session.writer.append(
            items,
            session_id,
            minted=minted,
            defer_sync=defer_sync,
            redacted=redacted,
            staged=staged,
        )
        for line in result.stored:
            session.state.apply(line)
        if result.stored and session.state.seq - session.snapshot_seq >= EVERY_ITEMS:
            self.snapshot(session, closed=False)
        return result

    def snapshot(self, session: OpenSession, *, closed: bool) -> None:
        """Write the session's snapshot. A snapshot is derived: when it cannot be written
        (disk full, a broken directory) the records it would cover are durable all the
        same, so the failure is logged and retried `SNAPSHOT_RETRY_ITEMS` items later,
        never answered to the client."""
        checkpoint = session.writer.checkpoint()
        if checkpoint is None:
            return
        snapshot = Snapshot(
            checkpoint=checkpoint,
            state=session.state,
            skipped=session.skipped,
            bom=session.bom,
            closed_session_id=session.session_id if closed else None,
        )
        thread_id = session.writer.thread_id
        if derived("snapshot", self.store.save_snapshot, thread_id, snapshot):
            session.snapshot_seq = session.state.seq
        else:  # the next attempt comes SNAPSHOT_RETRY_ITEMS items from now
            session.snapshot_seq = session.state.seq - EVERY_ITEMS + SNAPSHOT_RETRY_ITEMS

    def end(self, session: OpenSession) -> None:
        """Snapshot the session (a clean close) and release its writer; it is no longer
        open here."""
        try:
            self.snapshot(session, closed=True)
        finally:
            session.writer.close()
        self.store.flush()  # its last row, so other processes list the session's end

    def release(self, thread_id: str, owner: str) -> None:
        """Close this owner's session on the thread; another owner's lease means ThreadBusy."""
        session = self.open.get(thread_id)
        if session is None:
            return
        if session.owner != owner:
            raise busy(thread_id, session.owner)
        del self.open[thread_id]
        self.end(session)

    def release_owner(self, owner: str, end_reason: str | None = None) -> list[str]:
        """Close every session a client holds (it disconnected); returns their thread ids.

        With `end_reason` each session's end is recorded first, as a close's is; without
        one (the client ended them already, e.g. by `shutdown`) they are only closed."""
        released = [tid for tid, session in self.open.items() if session.owner == owner]
        for thread_id in released:
            session = self.open.pop(thread_id)
            if end_reason is not None:
                # Unrecorded (disk full, say), the file shows a session that never ended
                # cleanly, which is what the next resume reports: true enough to go on.
                with contextlib.suppress(ProtocolError):
                    end = end_item(session.session_id, end_reason)
                    self.append(session, [end], session.session_id, minted=True)
            self.end(session)  # the client is gone: its lease ends regardless
        return released

    def close_all(self) -> None:
        """Server shutdown: every open session ends cleanly, with its snapshot."""
        for session in self.open.values():
            self.end(session)
        self.open.clear()


def session_meta(
    *,
    source: str,
    reason: str,
    environment: dict[str, Any],
    workspace_folder: str | None,
    title: str | None = None,
    model: str | None = None,
    permissions: dict[str, Any] | None = None,
    client: dict[str, Any] | None = None,
    resumed_from: str | None = None,
    forked_from: dict[str, Any] | None = None,
    thread_id: str | None = None,
    origin: dict[str, Any] | None = None,
) -> Item:
    """A session's first record: why it began, where (the environment probed now), and
    what it starts from."""
    meta = {
        "type": "session_meta",
        "id": new_id(),
        "threadId": thread_id or new_id(),
        "source": source,
        "reason": reason,
        "resumedFrom": resumed_from,
        "forkedFrom": forked_from,
        "origin": origin,
        **{key: environment.get(key) for key in ENVIRONMENT_FIELDS},
        "repoError": environment.get("repoError"),  # why repo fields may be missing
        "workspaceFolder": workspace_folder,
        "title": title,
        "model": model,
        "permissions": permissions,
        "client": client,
    }
    return {key: value for key, value in meta.items() if value is not None}
