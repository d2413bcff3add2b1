"""Thread operations as one facade: start, record, list, resume, fork, clear, compact, ...

The server calls these from one worker thread and turns results into wire answers; this
module decides what is written where, through the store interface alone. The parts it is
made of: sessions.py (open sessions, leases, the one write path), resume.py (the
RestoreReport), ledger.py (the operation ledger's door), listing.py (pages of threads and
their counts); edits.py and edit_blobs.py build on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import restore.service.ledger as ledger
from protocol.errors import ErrorKind, ProtocolError
from restore.engine.subsystems import ThreadState
from restore.faults import crash_point
from restore.home.layout import Layout
from restore.home.state import Home
from restore.ids import validate_thread_id
from restore.keys import validate_key
from restore.service.listing import Lists
from restore.service.search import Searches
from restore.service.sessions import (
    LOCAL_OWNER,
    OpenSession,
    Sessions,
    StartedThread,
    end_item,
    new_id,
    session_meta,
)
from restore.stores.api import AppendResult, Store
from restore.stores.records import Item, Staged
from restore.summary import ThreadSummary

if TYPE_CHECKING:
    from restore.service.continuation import ContinueAsk, Continued
    from restore.service.resume import Report
    from restore.session_policy import SettingsFile

# Stamped by the store on every line; a fork re-stamps copied items in the new thread.
STAMP_FIELDS = ("v", "seq", "ts", "sessionId")
# Items that belong to one session of the source thread and are not copied by a fork.
NOT_FORKED = frozenset(
    {"session_meta", "lifecycle", "thread_title", "import_checkpoint", "thread_successor"}
)

__all__ = ["LOCAL_OWNER", "OpenSession", "StartedThread", "ThreadService"]


class ThreadService(Lists, Searches):
    """Everything a thread request does to the store: its records, snapshots, listing.

    The store is whichever backend `open_service` opened (restore/stores/): the service
    asks only what the store interface names, so both keep the same promises."""

    def __init__(self, layout: Layout, store: Store, home: Home) -> None:
        self.layout = layout
        """The data directory (the import ledger lives there, whichever store)."""
        self.home = home
        self.store = store
        # A read-only home (restore/home/state.py) is listed from an index in memory, read,
        # and resumed as a report; every write is refused with StorageError before it starts.
        self.read_only = store.read_only
        self.pages = store.pages
        self.index = store.index
        self.sessions = Sessions(store, home)
        self._session_settings: SettingsFile | None = None

    # --- sessions ----------------------------------------------------------------------

    def start(
        self,
        *,
        cwd: str,
        workspace_folder: str | None,
        title: str | None = None,
        model: str | None = None,
        permissions: dict[str, Any] | None = None,
        client: dict[str, Any] | None = None,
        owner: str = LOCAL_OWNER,
        origin: dict[str, Any] | None = None,
        trusted_folders: Sequence[str] = (),
        thread_id: str | None = None,
        parent_thread_id: str | None = None,
        parent_operation_id: str | None = None,
        session_key: str | None = None,
        replaces: tuple[str, str] | None = None,
    ) -> StartedThread:
        """A new thread, durable at once: the store holds its first `session_meta`.

        `origin` marks a thread that mirrors another agent's session (ACP, an import).
        `trusted_folders` (here and below): where git may run the repository's programs.
        `thread_id`: an id the caller handed out already (`sessiond acp` names a session
        at `session/new` and writes its thread at the first prompt); a new one otherwise.
        `parent_thread_id`: a sub-agent's thread, under that one (which must exist), started
        by its operation `parent_operation_id`. `session_key`: the key the thread belongs
        to (restore/keys.py); `replaces`: (thread id, daily|idle) of the key's thread this
        one resets (thread/continue: restore/service/continuation.py)."""
        if parent_thread_id is not None:
            parent_thread_id = validate_thread_id(parent_thread_id)
            if not self.store.exists(parent_thread_id):
                raise ProtocolError(
                    ErrorKind.THREAD_NOT_FOUND,
                    "the parent thread does not exist",
                    threadId=parent_thread_id,
                    field="parentThreadId",
                )
        meta = session_meta(
            thread_id=validate_thread_id(thread_id) if thread_id is not None else None,
            source="startup" if replaces is None else "reset",
            reason="user" if replaces is None else replaces[1],
            environment=_probe(cwd, trusted_folders),
            workspace_folder=workspace_folder,
            title=title,
            model=model,
            permissions=permissions,
            client=client,
            origin=origin,
        )
        if parent_thread_id is not None:
            meta["parentThreadId"] = parent_thread_id
            if parent_operation_id:
                meta["parentOperationId"] = parent_operation_id
        if session_key is not None:
            meta["sessionKey"] = validate_key(session_key)
        if replaces is not None:
            meta["previousThreadId"] = validate_thread_id(replaces[0])
            meta["resetReason"] = replaces[1]
        return self._create(meta, owner)

    def continue_key(self, ask: ContinueAsk, *, link_after: bool = False) -> Continued:
        """`thread/continue`: the key's current thread goes on, or a new one replaces it
        (restore/service/continuation.py)."""
        from restore.service.continuation import continue_key

        return continue_key(self, ask, link_after=link_after)

    def link_replaced(self, old_id: str, new: ThreadSummary) -> ThreadSummary | None:
        """A reset's successor item, after its answer (`continue_key(link_after=True)`)."""
        from restore.service.continuation import link_replaced

        return link_replaced(self, old_id, new)

    @property
    def session_settings(self) -> SettingsFile:
        """The home's sessions.toml (restore/session_policy.py), read by the first
        `thread/continue`."""
        if self._session_settings is None:
            from restore.session_policy import SettingsFile

            self._session_settings = SettingsFile(self.home.path)
        return self._session_settings

    def resume(
        self,
        thread_id: str,
        *,
        cwd: str | None,
        accept_drift: bool,
        message_limit: int,
        available_models: list[str] | None = None,
        owner: str = LOCAL_OWNER,
        trusted_folders: Sequence[str] = (),
        max_bytes: int = 8 * 1024 * 1024,
    ) -> Report:
        """Restore every subsystem in order; a new session, or `needs_review` and none
        (restore/service/resume.py). The newest `message_limit` messages come along,
        within `max_bytes`."""
        from restore.service.resume import Ask, resume  # not needed by a list (issue 26)

        ask = Ask(
            cwd, accept_drift, message_limit, available_models, owner, trusted_folders, max_bytes
        )
        return resume(self.sessions, self.pages, thread_id, ask)

    def preview(
        self, thread_id: str, *, cwd: str | None, accept_drift: bool, message_limit: int
    ) -> Report:
        """What a resume would restore and say, writing nothing (`sessiond resume`)."""
        from restore.service.resume import Ask, preview

        ask = Ask(cwd, accept_drift, message_limit, None, LOCAL_OWNER, (), 8 * 1024 * 1024)
        return preview(self.sessions, self.pages, thread_id, ask)

    def fork(
        self,
        thread_id: str,
        *,
        at_turn_id: str | None,
        at_seq: int | None,
        owner: str = LOCAL_OWNER,
        trusted_folders: Sequence[str] = (),
    ) -> StartedThread:
        """A new thread holding exactly the items up to the cut (a turn or a seq)."""
        contents, _ = self.store.read(thread_id)
        cut = _fork_cut(contents.items, at_turn_id, at_seq)
        prefix = [item for item in contents.items if item["seq"] <= cut]
        source = ThreadState().apply_all(prefix)
        title = _title_at(prefix)
        latest_meta = next((i for i in reversed(prefix) if i.get("type") == "session_meta"), None)
        if latest_meta is None:  # an empty file (a thread/start cut short) or a damaged one
            raise ProtocolError(
                ErrorKind.INVALID_PARAMS,
                "nothing to fork: no session_meta record before the cut",
                threadId=validate_thread_id(thread_id),
            )
        meta = session_meta(
            source="startup",
            reason="fork",
            environment=_probe(source.states["worktree"].get("cwd") or ".", trusted_folders),
            workspace_folder=latest_meta.get("workspaceFolder"),
            title=title,
            model=(source.states["model_override"] or {}).get("model"),
            permissions=source.states["permissions"] or None,
            client=latest_meta.get("client"),
            forked_from={"threadId": validate_thread_id(thread_id), "seq": cut},
        )
        copied = [
            {k: v for k, v in item.items() if k not in STAMP_FIELDS}
            for item in prefix
            if item.get("type") not in NOT_FORKED
        ]
        started = self._create(meta, owner)
        session = self.sessions.open[started.summary.threadId]
        if copied:
            self.sessions.append(session, copied, started.session_id)
        return StartedThread(session.writer.summary, started.session_id)

    def clear(
        self,
        thread_id: str,
        session_id: str,
        owner: str = LOCAL_OWNER,
        *,
        trusted_folders: Sequence[str] = (),
    ) -> dict[str, Any]:
        """A new session with an empty conversation; cost, todos, model, permissions and
        file history carry over (they are state, not conversation)."""
        session = self.sessions.lease(thread_id, session_id, owner)
        boundary = {"type": "clear_boundary", "id": new_id(), "endedSessionId": session_id}
        self.sessions.append(session, [boundary], session_id)
        new_session = new_id()
        state = session.state.states
        meta = session_meta(
            source="clear",
            reason="user",
            environment=_probe(state["worktree"].get("cwd") or ".", trusted_folders),
            workspace_folder=session.writer.summary.workspaceFolder,
            model=(state["model_override"] or {}).get("model"),
            permissions=state["permissions"] or None,
            resumed_from=session_id,
            thread_id=session.writer.thread_id,
        )
        meta["parentSessionId"] = session_id
        session.session_id = new_session
        self.sessions.append(session, [meta], new_session)
        return {"sessionId": new_session, "previousSessionId": session_id}

    def compact(
        self, thread_id: str, session_id: str, summary: str, owner: str = LOCAL_OWNER
    ) -> dict[str, Any]:
        """Replace the history before this point with `summary`; everything else stays."""
        session = self.sessions.lease(thread_id, session_id, owner)
        boundary = {"type": "compact_boundary", "id": new_id(), "summary": summary}
        result = self.sessions.append(session, [boundary], session_id)
        return {"boundarySeq": result.last_seq}

    def close(
        self, thread_id: str, session_id: str, owner: str = LOCAL_OWNER, *, reason: str = "close"
    ) -> None:
        """End the session: snapshot its state (a clean close), release the writer.
        `reason`: why, as its end item says (`close`; `reset` when thread/continue moved
        its key on to a new thread)."""
        session = self.sessions.lease(thread_id, session_id, owner)
        # The session's end, as its start has meta. Minted id: no need to load the id set.
        self.sessions.append(session, [end_item(session_id, reason)], session_id, minted=True)
        del self.sessions.open[session.writer.thread_id]
        self.sessions.end(session)

    def release_owner(self, owner: str, end_reason: str | None = None) -> list[str]:
        """Close every session a client holds (it disconnected); returns their thread ids.
        With `end_reason` each session's end is recorded first, as a close's is."""
        return self.sessions.release_owner(owner, end_reason)

    def close_all(self) -> None:
        """Server shutdown: every open session ends cleanly, with its snapshot."""
        self.sessions.close_all()
        self.store.flush()
        self.store.close()

    # --- writing -----------------------------------------------------------------------

    def stage(
        self, thread_id: str, session_id: str, items: list[Item], owner: str, *, redacted: bool
    ) -> Staged | None:
        """Off the store thread, before `record`: a large record's lines written ahead
        where the store does that (`Writer.stage`). Only reads the open session: whatever
        it finds wrong (no such session, another owner) `record` says, on the store thread,
        where the operation ledger may also drop a repeated operation: the staged lines no
        longer fit then, and the append writes the items itself."""
        session = self.sessions.open.get(thread_id)
        if session is None or session.session_id != session_id or session.owner != owner:
            return None
        return session.writer.stage(items, session_id, redacted=redacted)

    def record(
        self,
        thread_id: str,
        session_id: str,
        items: list[Item],
        owner: str = LOCAL_OWNER,
        *,
        defer_sync: bool = False,
        redacted: bool = False,
        staged: Staged | None = None,
    ) -> tuple[AppendResult, ThreadSummary]:
        """Append client items. With `defer_sync` (group commit) the items are written but
        not yet durable: acknowledge them only after the next `begin_commit`'s work.
        `redacted`: the items were redacted already, off the store thread (the server's)."""
        session = self.sessions.lease(thread_id, session_id, owner)
        items, no_ops = ledger.check(session, items)
        result = self.sessions.append(
            session, items, session_id, defer_sync=defer_sync, redacted=redacted, staged=staged
        )
        crash_point("record.before_ack")  # written (durable unless deferred), not answered
        if no_ops:
            result = AppendResult(
                result.first_seq, result.last_seq, result.duplicates + no_ops, result.stored
            )
        return result, session.writer.summary

    def set_title(self, thread_id: str, title: str) -> ThreadSummary:
        """Titles are items too, so a rename survives a lost index."""
        return self.append_bookkeeping(
            thread_id, [{"type": "thread_title", "id": new_id(), "title": title}]
        )

    def append_if_open(self, thread_id: str, items: list[Item]) -> bool:
        """Server-written items (hook records) through a session this process has open.

        Never takes the thread's lock: once closed, the thread may already be another
        process's, and a late record must not make it busy for them. False: not written.
        """
        session = self.sessions.open.get(validate_thread_id(thread_id))
        if session is None:
            return False
        self.sessions.append(session, items, session.session_id)
        return True

    def append_bookkeeping(
        self, thread_id: str, items: list[Item], *, flush: bool = True, derived: bool = False
    ) -> ThreadSummary:
        """Server-written items (titles, lifecycle records) for a thread, open or not.

        Uses the open session when this process has one, else takes the lock just for
        this append (ThreadBusy if another process writes the thread). `flush` False: the
        caller writes the index rows itself right after (a reset's link: one index write
        for the new thread's row and the replaced one's, not two). `derived`: the items
        can be made again from other records, so the store may skip their sync
        (`Store.open_writer`).
        """
        thread_id = validate_thread_id(thread_id)
        self.sessions.writable()
        if (session := self.sessions.open.get(thread_id)) is not None:
            self.sessions.append(session, items, session.session_id)
            return session.writer.summary
        writer = self.store.open_writer(thread_id, derived=derived)
        try:
            writer.append(items, writer.summary.latestSessionId or new_id())
        finally:
            writer.close()
        if flush:
            self.store.flush()  # its row at once: no session of ours keeps it current
        return writer.summary

    def begin_commit(self) -> Callable[[], None] | None:
        """Group commit, on the store thread: take every deferred append and return the
        work that makes them durable (one fdatasync per file, for the embedded store), to
        run on another thread while this one appends the next batch. None: nothing to do
        (a store with transactions committed here). Raises when deferred records cannot
        be made durable: none of them may be acknowledged."""
        return self.store.begin_commit()

    def session_for(self, thread_id: str, session_id: str, owner: str) -> OpenSession:
        """The open session a request names (StaleSession / ThreadBusy otherwise)."""
        return self.sessions.lease(thread_id, session_id, owner)

    def append(self, session: OpenSession, items: list[Item]) -> AppendResult:
        """Append server-decided items (edits, rewinds) to an open session."""
        return self.sessions.append(session, items, session.session_id)

    # --- archive and delete ------------------------------------------------------------

    def archive(self, thread_id: str, archived: bool, owner: str = LOCAL_OWNER) -> ThreadSummary:
        thread_id = validate_thread_id(thread_id)
        self.sessions.writable()
        self.sessions.release(thread_id, owner)
        return self.store.set_archived(thread_id, archived)

    def delete(self, thread_id: str, owner: str = LOCAL_OWNER) -> None:
        thread_id = validate_thread_id(thread_id)
        self.sessions.writable()
        self.sessions.release(thread_id, owner)
        self.store.delete(thread_id)  # with its snapshot, offset map and listing row

    def _create(self, meta: Item, owner: str) -> StartedThread:
        self.sessions.writable()
        thread_id, session_id = meta["threadId"], new_id()
        writer = self.store.create(thread_id, session_id, meta)
        state = ThreadState()
        for line in writer.loaded.items if writer.loaded else []:
            state.apply(line)
        writer.loaded = None
        self.sessions.register(thread_id, OpenSession(session_id, writer, owner, state))
        return StartedThread(writer.summary, session_id)


def _title_at(items: list[Item]) -> str | None:
    """The thread's title at the end of `items`, as its listing row has it: the latest
    rename, else the title its first titled session began with (a resumed session's
    `session_meta` carries none, so the latest one's is not the thread's)."""
    for item in reversed(items):
        if item.get("type") == "thread_title" and isinstance(item.get("title"), str):
            return str(item["title"])
    for item in items:
        if item.get("type") == "session_meta" and isinstance(item.get("title"), str):
            return str(item["title"])
    return None


def _fork_cut(items: list[Item], at_turn_id: str | None, at_seq: int | None) -> int:
    last = int(items[-1]["seq"]) if items else 0
    if at_turn_id is not None:
        seqs = [int(item["seq"]) for item in items if item.get("turnId") == at_turn_id]
        if not seqs:
            raise ProtocolError(
                ErrorKind.INVALID_PARAMS, f"no turn {at_turn_id!r}", turnId=at_turn_id
            )
        return max(seqs)
    if at_seq is not None:
        if at_seq > last:
            raise ProtocolError(
                ErrorKind.INVALID_PARAMS, f"seq {at_seq} is past the end", lastSeq=last
            )
        return at_seq
    return last


def _probe(cwd: str, trusted_folders: Sequence[str]) -> dict[str, Any]:
    """The git probe, imported by the first request that needs it (never by a list)."""
    from restore.engine.environment import probe

    return probe(cwd, trusted_folders)
