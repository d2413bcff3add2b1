"""Thread operations as one facade: start, record, read, list, resume, fork, clear, ...

The server calls these from one worker thread and turns results into wire answers; this
module decides what is written where. A thread has at most one open session in a
process, held by one client (its lease); other processes are kept out by the file lock.
An open session keeps every subsystem's state current as items are appended, so the
ledger can refuse a conflicting operation and a snapshot costs nothing to take.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorKind, ProtocolError
from restore.engine.environment import ENVIRONMENT_FIELDS, canonical, probe
from restore.engine.judge import Judgement, judge
from restore.engine.subsystems import ThreadState
from restore.engine.subsystems import cost as cost_subsystem
from restore.engine.subsystems import messages as messages_subsystem
from restore.engine.subsystems import operations as ledger
from restore.home.layout import Layout
from restore.home.state import Home
from restore.ids import validate_thread_id
from restore.sources.handoff import IMPORTED_AGENTS, handoff_command, thread_id_for
from restore.stores.api import (
    EVERY_ITEMS,
    AppendResult,
    ExternalChange,
    Progress,
    Snapshot,
    Store,
    ThreadFile,
    Writer,
    derived,
)
from restore.summary import ThreadSummary, summarize

SNAPSHOT_RETRY_ITEMS = 100
MAX_SUBAGENTS = 500  # sub-agent threads one resume reads for the cost line, at most
"""After a failed snapshot, items until the next attempt."""
logger = logging.getLogger("sessiond.threads")
# Stamped by the store on every line; a fork re-stamps copied items in the new thread.
STAMP_FIELDS = ("v", "seq", "ts", "sessionId")
# Items that belong to one session of the source thread and are not copied by a fork.
NOT_FORKED = frozenset({"session_meta", "lifecycle", "thread_title", "import_checkpoint"})
LOCAL_OWNER = "local"


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


def _new_id() -> str:
    return str(uuid.uuid4())


def _busy(thread_id: str, holder: str) -> ProtocolError:
    return ProtocolError(
        ErrorKind.THREAD_BUSY,
        f"thread is being written by {holder}",
        threadId=thread_id,
        holder=holder,
    )


def _without_none(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


@dataclass
class _Loaded:
    """A thread's state as a resume read it: snapshot + tail, or a full replay."""

    state: ThreadState
    skipped: list[dict[str, Any]]
    bom: bool
    replayed: int
    torn_tail: bool
    snapshot_used: bool
    snapshot_problem: str | None

    @classmethod
    def read(cls, writer: Writer, snapshot: Snapshot | None, problem: str | None) -> _Loaded:
        tail = writer.loaded or ThreadFile()
        writer.loaded = None  # the writer does not keep the items alive
        if snapshot is not None and writer.base is not None:
            state, skipped, bom = snapshot.state, list(snapshot.skipped), snapshot.bom
            problem = None
        else:
            state, skipped, bom = ThreadState(), [], tail.bom
            problem = writer.base_rejected or problem
        skipped += [line.to_wire() for line in tail.skipped]
        state.apply_all(tail.items)
        return cls(state, skipped, bom, len(tail.items), tail.torn_tail_offset is not None,
                   writer.base is not None, problem)  # fmt: skip

    def recovery(self) -> dict[str, Any]:
        return {
            "skippedLines": self.skipped,
            "snapshotUsed": self.snapshot_used,
            "snapshotProblem": self.snapshot_problem,
            "replayedItems": self.replayed,
            "bomStripped": self.bom,
            "tornTailRecovered": self.torn_tail,
        }


class ThreadService:
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
        self._open: dict[str, OpenSession] = {}  # by thread id

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
    ) -> StartedThread:
        """A new thread, durable at once: its file holds the first `session_meta`.

        `origin` marks a thread that mirrors another agent's session (ACP, an import).
        `trusted_folders` (here and below): where git may run the repository's programs.
        `thread_id`: an id the caller handed out already (`sessiond acp` names a session
        at `session/new` and writes its thread at the first prompt); a new one otherwise.
        `parent_thread_id`: a sub-agent's thread, under that one (which must exist), started
        by its operation `parent_operation_id`."""
        if parent_thread_id is not None:
            parent_thread_id = validate_thread_id(parent_thread_id)
            if not self.store.exists(parent_thread_id):
                raise ProtocolError(
                    ErrorKind.THREAD_NOT_FOUND,
                    "the parent thread does not exist",
                    threadId=parent_thread_id,
                    field="parentThreadId",
                )
        meta = self._session_meta(
            thread_id=validate_thread_id(thread_id) if thread_id is not None else None,
            source="startup",
            reason="user",
            environment=probe(cwd, trusted_folders),
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
        return self._create(meta, owner)

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
    ) -> dict[str, Any]:
        """Restore every subsystem in order; a new session, or `needs_review` and none.

        Reads the newest valid snapshot plus the tail after it (full replay otherwise),
        judges the state against the current environment, and opens a writable session
        only when the thread would not continue in the wrong place. The newest
        `message_limit` messages come along, within `max_bytes`.
        """
        thread_id = validate_thread_id(thread_id)
        origin = self.store.read_origin(thread_id)
        if origin is not None and origin.get("agent") in IMPORTED_AGENTS:
            return self._resume_mirror(
                thread_id, origin, cwd, accept_drift, message_limit, available_models, max_bytes
            )
        self._release(thread_id, owner)  # a resume supersedes the same client's session
        snapshot, snapshot_problem = self.store.load_snapshot(thread_id)
        writer = self.store.open_writer(thread_id, snapshot.checkpoint if snapshot else None)
        opened = False
        try:
            if writer.summary.archived:
                raise ProtocolError(
                    ErrorKind.THREAD_ARCHIVED, "unarchive the thread first", threadId=thread_id
                )
            loaded = _Loaded.read(writer, snapshot, snapshot_problem)
            state = loaded.state
            previous = writer.summary.latestSessionId
            clean = snapshot is not None and snapshot.closed_session_id == previous
            continue_reason = "user" if clean else "process_recovery"
            recorded = state.states["worktree"]
            current = probe(cwd or recorded.get("cwd") or ".", trusted_folders)
            verdict = judge(state, current, available_models, self._subagent_costs(state))
            ready = (not verdict.blocked or accept_drift) and not self.read_only
            session_id: str | None = None
            if ready:
                session_id = _new_id()
                meta = self._session_meta(
                    source="resume",
                    reason="acceptDrift" if verdict.blocked else continue_reason,
                    environment=current,
                    workspace_folder=writer.summary.workspaceFolder,
                    model=(state.states["model_override"] or {}).get("model"),
                    permissions=verdict.outcome("permissions").state or None,
                    resumed_from=previous,
                    thread_id=thread_id,
                )
                new_items = [meta]
                if verdict.blocked:
                    new_items.append(
                        {"type": "drift_accepted", "id": _new_id(), "drift": verdict.drift}
                    )
                session = OpenSession(
                    session_id, writer, owner, state, loaded.skipped, loaded.bom, state.seq
                )
                self._append(session, new_items, session_id, minted=True)
                self._open[thread_id] = session
                opened = True
            return _report(
                ready,
                writer.summary,
                {"sessionId": session_id, "resumedFrom": previous},
                verdict,
                current,
                writer.last_seq,
                loaded.recovery(),
                continue_reason,
                self._newest_messages(writer.thread_id, state, message_limit, max_bytes),
                self._read_only_home(),
            )
        finally:
            if not opened:
                writer.close()

    def _resume_mirror(
        self,
        thread_id: str,
        origin: dict[str, Any],
        cwd: str | None,
        accept_drift: bool,
        message_limit: int,
        available_models: list[str] | None,
        max_bytes: int,
    ) -> dict[str, Any]:
        """An imported thread mirrors a session its agent keeps writing, so its resume
        opens no sessiond session: restored and judged like any thread, it answers with
        the agent's own resume (`handoff`) once the workspace matches or the drift is
        accepted. Nothing is written and no lock is taken: the importer appends to this
        file as the agent goes on, and must never find it held by a reader.
        """
        contents, archived = self.store.read(thread_id)
        if archived:
            raise ProtocolError(
                ErrorKind.THREAD_ARCHIVED, "unarchive the thread first", threadId=thread_id
            )
        state = ThreadState().apply_all(contents.items)
        summary = summarize(thread_id, contents.items)
        recorded = state.states["worktree"]
        current = probe(cwd or recorded.get("cwd") or ".")
        verdict = judge(state, current, available_models, self._subagent_costs(state))
        ready = not verdict.blocked or accept_drift
        source_skipped = [
            {**line, "source": item.get("source")}
            for item in contents.items
            if item.get("type") == "import_checkpoint"
            for line in item.get("skipped") or []
        ]
        recovery = {
            "skippedLines": [line.to_wire() for line in contents.skipped],
            "snapshotUsed": False,
            "snapshotProblem": "imported threads are replayed in full",
            "replayedItems": len(contents.items),
            "bomStripped": contents.bom,
            "tornTailRecovered": contents.torn_tail_offset is not None,
            "sourceSkippedLines": source_skipped,
        }
        report = _report(
            ready,
            summary,
            {"sessionId": None, "resumedFrom": summary.latestSessionId},
            verdict,
            current,
            summary.lastSeq,
            recovery,
            "handoff",
            self._newest_messages(thread_id, state, message_limit, max_bytes),
            self._read_only_home(),
        )
        session = str(origin.get("sessionId"))
        # A sub-agent is driven through its parent (Claude Code resumes no sidechain alone).
        command = handoff_command(origin["agent"], str(origin.get("parentSessionId") or session))
        # The agent resumes its session as it is now: an older revision (the transcript
        # was rewritten since) has nothing to hand over to.
        revision = origin.get("revision") if isinstance(origin.get("revision"), int) else 1
        newer = self.store.exists(thread_id_for(origin["agent"], session, revision + 1))
        where = recorded.get("cwd")
        placed = isinstance(where, str) and os.path.isabs(where) and "\0" not in where
        report["handoff"] = (  # never in a relative or NUL cwd an older import stored
            {"agent": origin["agent"], "command": command, "cwd": where}
            if ready and command and not newer and placed
            else None
        )
        return report

    def _subagent_costs(
        self, state: ThreadState, seen: set[str] | None = None
    ) -> list[dict[str, Any]]:
        """The cost of each sub-agent thread the state's operations started, each with its
        own sub-agents' (read by id: no index), for the parent's cost line. At most
        MAX_SUBAGENTS threads are read in all; a missing one is named as missing."""
        seen = set() if seen is None else seen
        found = []
        for child_id in state.states["cost"].get("subagentThreads") or []:
            if child_id in seen or len(seen) >= MAX_SUBAGENTS:
                continue
            seen.add(child_id)
            try:
                contents, _ = self.store.read(child_id)
            except ProtocolError as exc:
                if exc.kind not in (ErrorKind.THREAD_NOT_FOUND, ErrorKind.INVALID_ID):
                    raise
                found.append({"threadId": child_id, "title": None, "cost": None})
                continue
            child = ThreadState().apply_all(contents.items)
            grandchildren = self._subagent_costs(child, seen)
            found.append({
                "threadId": child_id,
                "title": summarize(child_id, contents.items).title,
                "cost": cost_subsystem.with_subagents(child.states["cost"], grandchildren),
            })  # fmt: skip
        return found

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
        cut = self._fork_cut(contents.items, at_turn_id, at_seq)
        prefix = [item for item in contents.items if item["seq"] <= cut]
        source = ThreadState().apply_all(prefix)
        title = next(
            (i.get("title") for i in reversed(prefix) if i.get("type") == "thread_title"), None
        )
        latest_meta = next((i for i in reversed(prefix) if i.get("type") == "session_meta"), None)
        if latest_meta is None:  # an empty file (a thread/start cut short) or a damaged one
            raise ProtocolError(
                ErrorKind.INVALID_PARAMS,
                "nothing to fork: no session_meta record before the cut",
                threadId=validate_thread_id(thread_id),
            )
        meta = self._session_meta(
            source="startup",
            reason="fork",
            environment=probe(source.states["worktree"].get("cwd") or ".", trusted_folders),
            workspace_folder=latest_meta.get("workspaceFolder"),
            title=title or latest_meta.get("title"),
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
        if copied:
            self._append(self._open[started.summary.threadId], copied, started.session_id)
        return StartedThread(
            self._open[started.summary.threadId].writer.summary, started.session_id
        )

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
        session = self._session(thread_id, session_id, owner)
        boundary = {"type": "clear_boundary", "id": _new_id(), "endedSessionId": session_id}
        self._append(session, [boundary], session_id)
        new_session = _new_id()
        meta = self._session_meta(
            source="clear",
            reason="user",
            environment=probe(session.state.states["worktree"].get("cwd") or ".", trusted_folders),
            workspace_folder=session.writer.summary.workspaceFolder,
            model=(session.state.states["model_override"] or {}).get("model"),
            permissions=session.state.states["permissions"] or None,
            resumed_from=session_id,
            thread_id=session.writer.thread_id,
        )
        meta["parentSessionId"] = session_id
        session.session_id = new_session
        self._append(session, [meta], new_session)
        return {"sessionId": new_session, "previousSessionId": session_id}

    def compact(
        self, thread_id: str, session_id: str, summary: str, owner: str = LOCAL_OWNER
    ) -> dict[str, Any]:
        """Replace the history before this point with `summary`; everything else stays."""
        session = self._session(thread_id, session_id, owner)
        boundary = {"type": "compact_boundary", "id": _new_id(), "summary": summary}
        result = self._append(session, [boundary], session_id)
        return {"boundarySeq": result.last_seq}

    def close(self, thread_id: str, session_id: str, owner: str = LOCAL_OWNER) -> None:
        """End the session: snapshot its state (a clean close), release the writer."""
        session = self._session(thread_id, session_id, owner)
        # The session's end, as its start has meta. Minted id: no need to load the id set.
        self._append(session, [_end_item(session_id, "close")], session_id, minted=True)
        del self._open[session.writer.thread_id]
        self._close_session(session)

    def release_owner(self, owner: str, end_reason: str | None = None) -> list[str]:
        """Close every session a client holds (it disconnected); returns their thread ids.

        With `end_reason` each session's end is recorded first, as a close's is; without
        one (the client ended them already, e.g. by `shutdown`) they are only closed."""
        released = [tid for tid, session in self._open.items() if session.owner == owner]
        for thread_id in released:
            session = self._open.pop(thread_id)
            if end_reason is not None:
                # Unrecorded (disk full, say), the file shows a session that never ended
                # cleanly, which is what the next resume reports: true enough to go on.
                with contextlib.suppress(ProtocolError):
                    end = _end_item(session.session_id, end_reason)
                    self._append(session, [end], session.session_id, minted=True)
            self._close_session(session)  # the client is gone: its lease ends regardless
        return released

    def close_all(self) -> None:
        """Server shutdown: every open session ends cleanly, with its snapshot."""
        for session in self._open.values():
            self._close_session(session)
        self._open.clear()
        self.flush_index()
        self.store.close()

    # --- writing -----------------------------------------------------------------------

    def record(
        self,
        thread_id: str,
        session_id: str,
        items: list[dict[str, Any]],
        owner: str = LOCAL_OWNER,
        *,
        defer_sync: bool = False,
    ) -> tuple[AppendResult, ThreadSummary]:
        """Append client items. With `defer_sync` (group commit) the items are written but
        not yet durable: acknowledge them only after the next `begin_commit`'s syncs."""
        session = self._session(thread_id, session_id, owner)
        items, no_ops = self._check_ledger(session, items)
        result = self._append(session, items, session_id, defer_sync=defer_sync)
        if no_ops:
            result = AppendResult(
                result.first_seq, result.last_seq, result.duplicates + no_ops, result.stored
            )
        return result, session.writer.summary

    def set_title(self, thread_id: str, title: str) -> ThreadSummary:
        """Titles are items too, so a rename survives a lost index."""
        return self.append_bookkeeping(
            thread_id, [{"type": "thread_title", "id": _new_id(), "title": title}]
        )

    def append_if_open(self, thread_id: str, items: list[dict[str, Any]]) -> bool:
        """Server-written items (hook records) through a session this process has open.

        Never takes the thread's lock: once closed, the thread may already be another
        process's, and a late record must not make it busy for them. False: not written.
        """
        session = self._open.get(validate_thread_id(thread_id))
        if session is None:
            return False
        self._append(session, items, session.session_id)
        return True

    def append_bookkeeping(self, thread_id: str, items: list[dict[str, Any]]) -> ThreadSummary:
        """Server-written items (titles, lifecycle records) for a thread, open or not.

        Uses the open session when this process has one, else takes the lock just for
        this append (ThreadBusy if another process writes the thread).
        """
        thread_id = validate_thread_id(thread_id)
        self._writable()
        if (session := self._open.get(thread_id)) is not None:
            self._append(session, items, session.session_id)
            return session.writer.summary
        writer = self.store.open_writer(thread_id)
        try:
            writer.append(items, writer.summary.latestSessionId or _new_id())
        finally:
            writer.close()
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
        return self._session(thread_id, session_id, owner)

    def append(self, session: OpenSession, items: list[dict[str, Any]]) -> AppendResult:
        """Append server-decided items (edits, rewinds) to an open session."""
        return self._append(session, items, session.session_id)

    # --- reading (pages of a thread: `self.pages`, safe on any thread) -----------------

    def _newest_messages(
        self, thread_id: str, state: ThreadState, limit: int, max_bytes: int
    ) -> dict[str, Any]:
        """Resume's `messages`: the newest `limit` after the boundary, read by seq."""
        reduced = state.states["messages"]
        seqs = messages_subsystem.newest(reduced, limit)
        items, cut = self.pages.pick(thread_id, seqs, max_bytes)
        if items:
            older = cut or reduced["count"] > len(items)
            next_before = items[0]["seq"] if older else None
        else:  # none, or the newest alone is too large: thread/read names it
            next_before = seqs[-1] + 1 if seqs else None
        return {
            "items": items,
            "total": reduced["count"],
            "boundarySeq": reduced["boundarySeq"],
            "nextBeforeSeq": next_before,
        }

    def list(
        self,
        *,
        cwd: str | None,
        workspace_folder: str | None,
        archived: bool,
        search: str | None,
        cursor: str | None,
        limit: int,
        progress: Progress | None = None,
        parent_thread_id: str | None = None,
    ) -> tuple[list[ThreadSummary], str | None]:
        """A page of top-level threads, or of `parent_thread_id`'s children (sub-agents)."""
        if parent_thread_id is not None:
            parent_thread_id = validate_thread_id(parent_thread_id)
        filters = (("cwd", cwd), ("workspaceFolder", workspace_folder), ("search", search))
        for name, value in filters:
            if value is not None and "\0" in value:  # PostgreSQL text cannot hold one
                raise ProtocolError(
                    ErrorKind.INVALID_PARAMS, f"{name} must not contain NUL", field=name
                )
        self.index.ensure_ready(progress)
        self.store.flush()
        return self.index.list(
            cwd=canonical(cwd) if cwd is not None else None,  # cwds are stored canonical
            workspace_folder=workspace_folder,
            archived=archived,
            search=search,
            cursor=cursor,
            limit=limit,
            parent_thread_id=parent_thread_id,
        )

    # --- archive and delete ------------------------------------------------------------

    def archive(self, thread_id: str, archived: bool, owner: str = LOCAL_OWNER) -> ThreadSummary:
        thread_id = validate_thread_id(thread_id)
        self._writable()
        self._release(thread_id, owner)
        return self.store.set_archived(thread_id, archived)

    def delete(self, thread_id: str, owner: str = LOCAL_OWNER) -> None:
        thread_id = validate_thread_id(thread_id)
        self._writable()
        self._release(thread_id, owner)
        self.store.delete(thread_id)  # with its snapshot, offset map and listing row

    # --- helpers -----------------------------------------------------------------------

    def _append(
        self,
        session: OpenSession,
        items: list[dict[str, Any]],
        session_id: str,
        *,
        minted: bool = False,
        defer_sync: bool = False,
    ) -> AppendResult:
        """The one write path of an open session: file, live state, index, snapshot."""
        result = session.writer.append(items, session_id, minted=minted, defer_sync=defer_sync)
        for line in result.stored:
            session.state.apply(line)
        if result.stored and session.state.seq - session.snapshot_seq >= EVERY_ITEMS:
            self._snapshot(session, closed=False)
        return result

    def _check_ledger(
        self, session: OpenSession, items: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], int]:
        """Drop operation items that repeat a state already recorded (a no-op); refuse
        ones that move an operation backwards (ConflictingOperation), writing nothing."""
        if not any(item.get("type") == "operation" for item in items):
            return items, 0
        simulated = copy.deepcopy(session.state.states["operations"])
        kept: list[dict[str, Any]] = []
        no_ops = 0
        for item in items:
            if item.get("type") != "operation" or session.writer.seq_of(item["id"]) is not None:
                kept.append(item)
                continue
            verdict = ledger.transition(simulated, item)
            if verdict == "conflict":
                previous = simulated["open"].get(item["operationId"], {}).get("state") or (
                    simulated["closed"].get(item["operationId"])
                )
                raise ProtocolError(
                    ErrorKind.CONFLICTING_OPERATION,
                    f"operation {item['operationId']} is {previous}; it cannot become "
                    f"{item['state']}",
                    operationId=item["operationId"],
                    recordedState=previous,
                    requestedState=item["state"],
                )
            if verdict == "duplicate":
                no_ops += 1
                continue
            ledger.reduce(simulated, item)
            kept.append(item)
        return kept, no_ops

    def _snapshot(self, session: OpenSession, *, closed: bool) -> None:
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
        if self._derived("snapshot", self.store.save_snapshot, thread_id, snapshot):
            session.snapshot_seq = session.state.seq
        else:  # the next attempt comes SNAPSHOT_RETRY_ITEMS items from now
            session.snapshot_seq = session.state.seq - EVERY_ITEMS + SNAPSHOT_RETRY_ITEMS

    @staticmethod
    def _derived(what: str, work: Callable[..., Any], *args: Any) -> bool:
        return derived(what, work, *args)

    def _close_session(self, session: OpenSession) -> None:
        try:
            self._snapshot(session, closed=True)
        finally:
            session.writer.close()
        self.store.flush()  # its last row, so other processes list the session's end

    def _read_only_home(self) -> dict[str, Any] | None:
        """Why a resume opened no session though nothing drifted, for the report."""
        if not self.read_only:
            return None
        return {"path": str(self.home.path), "reason": self.home.read_only}

    def _writable(self) -> None:
        if self.read_only:
            raise self.home.refuse_write()

    def _create(self, meta: dict[str, Any], owner: str) -> StartedThread:
        self._writable()
        thread_id, session_id = meta["threadId"], _new_id()
        writer = self.store.create(thread_id, session_id, meta)
        state = ThreadState()
        for line in writer.loaded.items if writer.loaded else []:
            state.apply(line)
        writer.loaded = None
        self._open[thread_id] = OpenSession(session_id, writer, owner, state)
        return StartedThread(writer.summary, session_id)

    def _session_meta(
        self,
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
    ) -> dict[str, Any]:
        return _without_none(
            {
                "type": "session_meta",
                "id": _new_id(),
                "threadId": thread_id or _new_id(),
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
        )

    def _session(self, thread_id: str, session_id: str, owner: str) -> OpenSession:
        self._writable()  # every write through a session (record, clear, edits) starts here
        session = self._open.get(thread_id)  # an open thread's id is valid already
        if session is None:
            thread_id = validate_thread_id(thread_id)
            session = self._open.get(thread_id)
        if session is not None and session.session_id == session_id and session.owner != owner:
            raise _busy(thread_id, session.owner)
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
                self._open.pop(session.writer.thread_id, None)
            raise
        if reloaded:
            contents, _ = self.store.read(session.writer.thread_id)
            session.state = ThreadState().apply_all(contents.items)
            session.snapshot_seq = session.state.seq

    def _release(self, thread_id: str, owner: str) -> None:
        """Close this owner's session on the thread; another owner's lease means ThreadBusy."""
        session = self._open.get(thread_id)
        if session is None:
            return
        if session.owner != owner:
            raise _busy(thread_id, session.owner)
        del self._open[thread_id]
        self._close_session(session)

    def listed_parent(self, thread_id: str) -> str | None:
        """The parent a listing files this thread under (None: a top-level thread, or no
        listing open yet, which no client can be showing)."""
        if not self.index.is_open:
            return None
        row = self.index.get(validate_thread_id(thread_id))
        return row.parentThreadId if row is not None else None

    def with_child_counts(
        self, infos: list[dict[str, Any]], parents: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """ThreadInfos for notifications: `infos` with their `childCount` filled in place
        where the listing knows it, then the rows of `parents` (threads whose children just
        changed), with theirs. Only an index that is open (a shared store's always is) is asked:
        opening one reconciles every file, which a notification must not cost; before
        any listing no client holds a count to keep current. Pending rows are written
        first, so a child started a moment ago is counted."""
        if not self.index.is_open:
            return []
        try:
            if parents:
                self.store.flush()
            rows = [row for p in dict.fromkeys(parents) if (row := self.index.get(p))]
            wanted = [i["threadId"] for i in infos if i.get("childCount") is None]
            counts = self.index.child_counts([*wanted, *(row.threadId for row in rows)])
        except Exception as exc:  # sqlite3.Error, psycopg.Error: the counts are derived
            logger.warning("child counts not read: %s", exc)
            return []
        for info in infos:
            if info.get("childCount") is None and info["threadId"] in counts:
                info["childCount"] = counts[info["threadId"]]
        return [{**row.thread_info(), "childCount": counts[row.threadId]} for row in rows]

    def external_changes(self, thread_ids: Sequence[str]) -> list[ExternalChange]:
        """What other processes on this machine did to these threads (their files changed),
        with the listing rows brought up to date, so this process's listings agree at once.
        Nothing for a store whose other writers announce themselves (`Store.watch`)."""
        local = self.store.local
        return local.changed(thread_ids) if local is not None else []

    def threads_changed_since(self, seconds: float) -> list[str]:
        """Threads written at or after `seconds` (epoch): what a watcher that was still
        starting may have missed."""
        local = self.store.local
        return local.changed_since(seconds) if local is not None else []

    def flush_index(self) -> None:
        """Write the listing rows the store held back (`FLUSH_SECONDS` after the last
        write, from the host's timer). Never raises: the rows are derived."""
        self.store.flush()

    @staticmethod
    def _fork_cut(items: list[dict[str, Any]], at_turn_id: str | None, at_seq: int | None) -> int:
        last = items[-1]["seq"] if items else 0
        if at_turn_id is not None:
            seqs = [item["seq"] for item in items if item.get("turnId") == at_turn_id]
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


def _report(
    ready: bool,
    summary: ThreadSummary,
    session: dict[str, Any],
    verdict: Judgement,
    current: dict[str, Any],
    last_seq: int,
    recovery: dict[str, Any],
    continue_reason: str,
    messages: dict[str, Any],
    read_only: dict[str, Any] | None,
) -> dict[str, Any]:
    """The RestoreReport (DESIGN.md §4) of a judged thread."""
    recorded = verdict.outcome("worktree").state or {}  # the worktree subsystem's state
    return {
        "status": "ready" if ready else "needs_review",
        "thread": summary.thread_info(),
        "session": session,
        "environment": {
            "recorded": {key: recorded.get(key) for key in ENVIRONMENT_FIELDS},
            "current": current,
            "drift": verdict.drift,
        },
        "subsystems": verdict.subsystem_reports(),
        "pendingOperations": verdict.outcome("operations").state["open"],
        "lastDurableSeq": last_seq,
        "recovery": recovery,
        "continueReason": continue_reason,
        "messages": messages,
        "readOnly": read_only,
    }


def _end_item(session_id: str, reason: str) -> dict[str, Any]:
    """The record of a session's end (close, disconnect), written before its lock goes."""
    return {
        "type": "lifecycle",
        "id": _new_id(),
        "event": "SessionEnd",
        "status": "ended",
        "reason": reason,
        "targetSessionId": session_id,
    }
