"""A resume and its RestoreReport (docs/restore-contract.md): every subsystem restored in order and
judged against the current workspace; a new session opens only when the thread would not
continue in the wrong place.

A thread is read from its newest valid snapshot plus what follows it (a full replay
otherwise). An imported thread mirrors a session its agent keeps writing: it is judged
like any thread, and answered with the agent's own resume (`handoff`) instead of a
session, writing nothing and taking no lock.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from protocol.errors import ErrorKind, ProtocolError
from restore.agents.identity import thread_id_for
from restore.agents.registry import handoff_command, imported
from restore.engine.environment import ENVIRONMENT_FIELDS, probe
from restore.engine.judge import Judgement, judge
from restore.engine.subsystems import ThreadState
from restore.engine.subsystems import cost as cost_subsystem
from restore.engine.subsystems import messages as messages_subsystem
from restore.ids import validate_thread_id
from restore.service.sessions import OpenSession, Sessions, new_id, session_meta
from restore.stores.api import Pages, Store, ThreadFile, Writer
from restore.stores.snapshots import Snapshot
from restore.summary import ThreadSummary, summarize

MAX_SUBAGENTS = 500  # sub-agent threads one resume reads for the cost line, at most
Report = dict[str, Any]


@dataclass(frozen=True)
class Ask:
    """What a resume asks for, whoever asks (a client, `sessiond acp`)."""

    cwd: str | None
    accept_drift: bool
    message_limit: int
    available_models: list[str] | None
    owner: str
    trusted_folders: Sequence[str]
    max_bytes: int


@dataclass
class Loaded:
    """A thread's state as a resume read it: snapshot + tail, or a full replay."""

    state: ThreadState
    skipped: list[dict[str, Any]]
    bom: bool
    replayed: int
    torn_tail: bool
    snapshot_used: bool
    snapshot_problem: str | None

    @classmethod
    def read(cls, writer: Writer, snapshot: Snapshot | None, problem: str | None) -> Loaded:
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
        return cls(
            state,
            skipped,
            bom,
            len(tail.items),
            tail.torn_tail_offset is not None,
            writer.base is not None,
            problem,
        )

    def recovery(self) -> dict[str, Any]:
        return {
            "skippedLines": self.skipped,
            "snapshotUsed": self.snapshot_used,
            "snapshotProblem": self.snapshot_problem,
            "replayedItems": self.replayed,
            "bomStripped": self.bom,
            "tornTailRecovered": self.torn_tail,
        }


def resume(sessions: Sessions, pages: Pages, thread_id: str, ask: Ask) -> Report:
    """Restore every subsystem in order; a new session, or `needs_review` and none.

    Reads the newest valid snapshot plus the tail after it (full replay otherwise),
    judges the state against the current environment, and opens a writable session only
    when the thread would not continue in the wrong place. The newest `message_limit`
    messages come along, within `max_bytes`.
    """
    store = sessions.store
    thread_id = validate_thread_id(thread_id)
    origin = store.read_origin(thread_id)
    if origin is not None and imported(origin.get("agent")):
        return _resume_mirror(sessions, pages, thread_id, origin, ask)
    sessions.release(thread_id, ask.owner)  # a resume supersedes the same client's session
    snapshot, snapshot_problem = store.load_snapshot(thread_id)
    writer = store.open_writer(thread_id, snapshot.checkpoint if snapshot else None)
    opened = False
    try:
        if writer.summary.archived:
            raise ProtocolError(
                ErrorKind.THREAD_ARCHIVED, "unarchive the thread first", threadId=thread_id
            )
        loaded = Loaded.read(writer, snapshot, snapshot_problem)
        state = loaded.state
        previous = writer.summary.latestSessionId
        clean = snapshot is not None and snapshot.closed_session_id == previous
        continue_reason = "user" if clean else "process_recovery"
        recorded = state.states["worktree"]
        current = probe(cwd_of(ask.cwd, recorded), ask.trusted_folders)
        verdict = judge(state, current, ask.available_models, subagent_costs(store, state))
        ready = (not verdict.blocked or ask.accept_drift) and not store.read_only
        session_id: str | None = None
        if ready:
            session_id = new_id()
            meta = session_meta(
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
                new_items.append({"type": "drift_accepted", "id": new_id(), "drift": verdict.drift})
            session = OpenSession(
                session_id, writer, ask.owner, state, loaded.skipped, loaded.bom, state.seq
            )
            sessions.append(session, new_items, session_id, minted=True)
            sessions.register(thread_id, session)
            opened = True
        return report(
            ready,
            writer.summary,
            {"sessionId": session_id, "resumedFrom": previous},
            verdict,
            current,
            writer.last_seq,
            loaded.recovery(),
            continue_reason,
            newest_messages(pages, writer.thread_id, state, ask.message_limit, ask.max_bytes),
            read_only_home(sessions),
        )
    finally:
        if not opened:
            writer.close()


def preview(sessions: Sessions, pages: Pages, thread_id: str, ask: Ask) -> Report:
    """What a resume would restore and say, writing nothing and taking no lock
    (`sessiond resume`: a person's look before continuing, while an editor may hold the
    thread): read in full, judged against the current workspace; no session (`sessionId`
    null) whatever the status. An imported thread's is its resume, which writes nothing."""
    store = sessions.store
    thread_id = validate_thread_id(thread_id)
    origin = store.read_origin(thread_id)
    if origin is not None and imported(origin.get("agent")):
        return _resume_mirror(sessions, pages, thread_id, origin, ask)
    read = _read_whole(store, thread_id)
    _, state, summary = read
    snapshot, _ = store.load_snapshot(thread_id)
    clean = snapshot is not None and snapshot.closed_session_id == summary.latestSessionId
    current = probe(cwd_of(ask.cwd, state.states["worktree"]), ask.trusted_folders)
    verdict = judge(state, current, ask.available_models, subagent_costs(store, state))
    reason = "user" if clean else "process_recovery"
    return _without_session(pages, thread_id, read, verdict, current, ask, reason, None, None)


Whole = tuple[ThreadFile, ThreadState, ThreadSummary]


def _without_session(
    pages: Pages,
    thread_id: str,
    read: Whole,
    verdict: Judgement,
    current: dict[str, Any],
    ask: Ask,
    reason: str,
    problem: str | None,
    read_only: dict[str, Any] | None,
    **recovered: Any,
) -> Report:
    """The report of a resume that opened no session (a preview, an imported thread's):
    the thread read whole (`_read_whole`), no snapshot used (`problem`: why not)."""
    contents, state, summary = read
    recovery = {
        "skippedLines": [line.to_wire() for line in contents.skipped],
        "snapshotUsed": False,
        "snapshotProblem": problem,
        "replayedItems": len(contents.items),
        "bomStripped": contents.bom,
        "tornTailRecovered": contents.torn_tail_offset is not None,
        **recovered,
    }
    return report(
        not verdict.blocked or ask.accept_drift,
        summary,
        {"sessionId": None, "resumedFrom": summary.latestSessionId},
        verdict,
        current,
        summary.lastSeq,
        recovery,
        reason,
        newest_messages(pages, thread_id, state, ask.message_limit, ask.max_bytes),
        read_only,
    )


def _read_whole(store: Store, thread_id: str) -> Whole:
    """An unarchived thread read in full, its state replayed and its row summarized, for a
    resume that takes no lock (a preview, an imported thread's)."""
    contents, archived = store.read(thread_id)
    if archived:
        raise ProtocolError(
            ErrorKind.THREAD_ARCHIVED, "unarchive the thread first", threadId=thread_id
        )
    return contents, ThreadState().apply_all(contents.items), summarize(thread_id, contents.items)


def _resume_mirror(
    sessions: Sessions, pages: Pages, thread_id: str, origin: dict[str, Any], ask: Ask
) -> Report:
    """An imported thread mirrors a session its agent keeps writing, so its resume opens no
    sessiond session: restored and judged like any thread, it answers with the agent's own
    resume (`handoff`) once the workspace matches or the drift is accepted. Nothing is
    written and no lock is taken: the importer appends to this thread as the agent goes
    on, and must never find it held by a reader.
    """
    store = sessions.store
    read = _read_whole(store, thread_id)
    contents, state, _ = read
    recorded = state.states["worktree"]
    current = probe(cwd_of(ask.cwd, recorded))
    verdict = judge(state, current, ask.available_models, subagent_costs(store, state))
    ready = not verdict.blocked or ask.accept_drift
    source_skipped = [
        {**line, "source": item.get("source")}
        for item in contents.items
        if item.get("type") == "import_checkpoint"
        for line in item.get("skipped") or []
    ]
    answer = _without_session(
        pages,
        thread_id,
        read,
        verdict,
        current,
        ask,
        "handoff",
        "imported threads are replayed in full",
        read_only_home(sessions),
        sourceSkippedLines=source_skipped,
    )
    session = str(origin.get("sessionId"))
    # A sub-agent is driven through its parent (Claude Code resumes no sidechain alone).
    command = handoff_command(origin["agent"], str(origin.get("parentSessionId") or session))
    # The agent resumes its session as it is now: an older revision (the transcript was
    # rewritten since) has nothing to hand over to.
    recorded_revision = origin.get("revision")
    revision = recorded_revision if isinstance(recorded_revision, int) else 1
    newer = store.exists(thread_id_for(origin["agent"], session, revision + 1))
    where = recorded.get("cwd")
    placed = isinstance(where, str) and os.path.isabs(where) and "\0" not in where
    answer["handoff"] = (  # never in a relative or NUL cwd an older import stored
        {"agent": origin["agent"], "command": command, "cwd": where}
        if ready and command and not newer and placed
        else None
    )
    return answer


def cwd_of(asked: str | None, recorded: dict[str, Any]) -> str:
    """Where a resume judges the thread: the cwd asked for, else the recorded one."""
    return asked or recorded.get("cwd") or "."


def subagent_costs(
    store: Store, state: ThreadState, seen: set[str] | None = None
) -> list[dict[str, Any]]:
    """The cost of each sub-agent thread the state's operations started, each with its own
    sub-agents' (read by id: no index), for the parent's cost line. At most MAX_SUBAGENTS
    threads are read in all; a missing one is named as missing."""
    seen = set() if seen is None else seen
    found = []
    for child_id in state.states["cost"].get("subagentThreads") or []:
        if child_id in seen or len(seen) >= MAX_SUBAGENTS:
            continue
        seen.add(child_id)
        try:
            contents, _ = store.read(child_id)
        except ProtocolError as exc:
            if exc.kind not in (ErrorKind.THREAD_NOT_FOUND, ErrorKind.INVALID_ID):
                raise
            found.append({"threadId": child_id, "title": None, "cost": None})
            continue
        child = ThreadState().apply_all(contents.items)
        grandchildren = subagent_costs(store, child, seen)
        found.append(
            {
                "threadId": child_id,
                "title": summarize(child_id, contents.items).title,
                "cost": cost_subsystem.with_subagents(child.states["cost"], grandchildren),
            }
        )
    return found


def newest_messages(
    pages: Pages, thread_id: str, state: ThreadState, limit: int, max_bytes: int
) -> dict[str, Any]:
    """Resume's `messages`: the newest `limit` after the boundary, read by seq."""
    reduced = state.states["messages"]
    seqs = messages_subsystem.newest(reduced, limit)
    items, cut = pages.pick(thread_id, seqs, max_bytes)
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


def read_only_home(sessions: Sessions) -> dict[str, Any] | None:
    """Why a resume opened no session though nothing drifted, for the report."""
    if not sessions.store.read_only:
        return None
    return {"path": str(sessions.home.path), "reason": sessions.home.read_only}


def report(
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
) -> Report:
    """The RestoreReport (docs/restore-contract.md) of a judged thread."""
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
