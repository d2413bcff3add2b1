"""Thread operations as one facade: start, record, read, list, resume, fork, archive, ...

The server calls these from one worker thread and turns results into wire answers; this
module decides what is written where. Open writers are kept per thread: a session id is
the key a client writes with, and a thread has at most one open session in a process (a
second process is kept out by the file lock).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.errors import ErrorKind, ProtocolError
from restore.environment import ENVIRONMENT_FIELDS, detect_drift, probe
from restore.index import ThreadIndex
from restore.jsonl import ThreadFile
from restore.paths import Layout, validate_thread_id
from restore.store import AppendResult, Durability, ThreadStore, ThreadWriter
from restore.summary import BOOKKEEPING_TYPES, ThreadSummary

ProgressCallback = Callable[[int, int], None]
BOUNDARY_TYPES = frozenset({"clear_boundary", "compact_boundary"})
# Stamped by the store on every line; a fork re-stamps copied items in the new thread.
STAMP_FIELDS = ("v", "seq", "ts", "sessionId")


LOCAL_OWNER = "local"


@dataclass
class OpenSession:
    """A writable session: its id, the thread's writer, and the client holding the lease."""

    session_id: str
    writer: ThreadWriter
    owner: str = LOCAL_OWNER


@dataclass(frozen=True)
class StartedThread:
    summary: ThreadSummary
    session_id: str


def _new_id() -> str:
    return str(uuid.uuid4())


def _latest_meta(items: list[dict[str, Any]]) -> dict[str, Any]:
    for item in reversed(items):
        if item.get("type") == "session_meta":
            return item
    return {}


def _busy(thread_id: str, holder: str) -> ProtocolError:
    return ProtocolError(
        ErrorKind.THREAD_BUSY,
        f"thread is being written by {holder}",
        threadId=thread_id,
        holder=holder,
    )


def _without_none(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


class ThreadService:
    """Everything a thread request does to the files and the index."""

    def __init__(self, layout: Layout, durability: Durability = Durability.FSYNC) -> None:
        self.layout = layout
        self.store = ThreadStore(layout, durability)
        self.index = ThreadIndex(layout, self.store.read_summary)
        self._open: dict[str, OpenSession] = {}  # by thread id

    # --- writing -----------------------------------------------------------------------

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
    ) -> StartedThread:
        """A new thread, durable at once: its file holds the first `session_meta`."""
        environment = probe(cwd)
        meta = self._session_meta(
            source="startup",
            reason="user",
            environment=environment,
            workspace_folder=workspace_folder,
            title=title,
            model=model,
            permissions=permissions,
            client=client,
        )
        return self._create(meta, owner)

    def record(
        self,
        thread_id: str,
        session_id: str,
        items: list[dict[str, Any]],
        owner: str = LOCAL_OWNER,
    ) -> tuple[AppendResult, ThreadSummary]:
        session = self._session(thread_id, session_id, owner)
        result = session.writer.append(items, session_id)
        self._reindex(session.writer)
        return result, session.writer.summary

    def set_title(self, thread_id: str, title: str) -> ThreadSummary:
        """Titles are items too, so a rename survives a lost index."""
        return self.append_bookkeeping(
            thread_id, [{"type": "thread_title", "id": _new_id(), "title": title}]
        )

    def append_bookkeeping(self, thread_id: str, items: list[dict[str, Any]]) -> ThreadSummary:
        """Server-written items (titles, lifecycle records) for a thread, open or not.

        Uses the open session's writer when this process has one, else takes the lock
        just for this append (ThreadBusy if another process writes the thread).
        """
        writer, temporary = self._writer_for_bookkeeping(thread_id)
        try:
            session_id = writer.summary.latestSessionId or _new_id()
            writer.append(items, session_id)
            self._reindex(writer)
            return writer.summary
        finally:
            if temporary:
                writer.close()

    def close(self, thread_id: str, session_id: str, owner: str = LOCAL_OWNER) -> None:
        session = self._session(thread_id, session_id, owner)
        session.writer.close()
        del self._open[session.writer.thread_id]

    def release_owner(self, owner: str) -> list[str]:
        """Close every session a client holds (it disconnected); returns their thread ids."""
        released = [tid for tid, session in self._open.items() if session.owner == owner]
        for thread_id in released:
            self._open.pop(thread_id).writer.close()
        return released

    def close_all(self) -> None:
        for session in self._open.values():
            session.writer.close()
        self._open.clear()
        self.index.close()

    # --- reading -----------------------------------------------------------------------

    def read(
        self, thread_id: str, after_seq: int, limit: int
    ) -> tuple[list[dict[str, Any]], int | None, ThreadFile]:
        """Items after `after_seq`, at most `limit`; the next cursor only if more remain."""
        contents, _ = self.store.read(thread_id)
        later = [item for item in contents.items if item["seq"] > after_seq]
        page = later[:limit]
        next_after = page[-1]["seq"] if len(later) > limit else None
        return page, next_after, contents

    def list(
        self,
        *,
        cwd: str | None,
        workspace_folder: str | None,
        archived: bool,
        search: str | None,
        cursor: str | None,
        limit: int,
        progress: ProgressCallback | None = None,
    ) -> tuple[list[ThreadSummary], str | None]:
        self.index.ensure_ready(progress)
        return self.index.list(
            cwd=cwd,
            workspace_folder=workspace_folder,
            archived=archived,
            search=search,
            cursor=cursor,
            limit=limit,
        )

    # --- resume and fork ---------------------------------------------------------------

    def resume(
        self,
        thread_id: str,
        *,
        cwd: str | None,
        accept_drift: bool,
        message_limit: int,
        owner: str = LOCAL_OWNER,
    ) -> dict[str, Any]:
        """A new session on the thread, or `needs_review` (and no session) on drift.

        Restores the worktree binding and the messages after the last boundary; the other
        subsystems arrive with the restore engine.
        """
        thread_id = validate_thread_id(thread_id)
        self._release(thread_id, owner)  # a resume supersedes the same client's session
        writer = self.store.open_writer(thread_id)
        try:
            if writer.summary.archived:
                raise ProtocolError(
                    ErrorKind.THREAD_ARCHIVED, "unarchive the thread first", threadId=thread_id
                )
            contents = writer.loaded or self.store.read(thread_id)[0]
            writer.loaded = None
            recorded_meta = _latest_meta(contents.items)
            recorded = {key: recorded_meta.get(key) for key in ENVIRONMENT_FIELDS}
            current = probe(cwd or recorded.get("cwd") or ".")
            drift = detect_drift(recorded, current)
            blocked = any(entry["severity"] == "block" for entry in drift)
            status = "needs_review" if blocked and not accept_drift else "ready"
            previous = writer.summary.latestSessionId
            session_id: str | None = None
            if status == "ready":
                session_id = _new_id()
                meta = self._session_meta(
                    source="resume",
                    reason="acceptDrift" if blocked else "user",
                    environment=current,
                    workspace_folder=recorded_meta.get("workspaceFolder"),
                    model=recorded_meta.get("model"),
                    permissions=recorded_meta.get("permissions"),
                    client=recorded_meta.get("client"),
                    resumed_from=previous,
                )
                writer.append([meta], session_id)
                self._reindex(writer)
                self._open[thread_id] = OpenSession(session_id, writer, owner)
            messages, boundary = self._messages_after_boundary(contents.items, message_limit)
            return {
                "status": status,
                "thread": writer.summary.thread_info(),
                "session": {"sessionId": session_id, "resumedFrom": previous},
                "environment": {"recorded": recorded, "current": current, "drift": drift},
                "subsystems": [
                    {"name": "worktree", "status": "restored", "reason": None, "state": recorded},
                    {
                        "name": "messages",
                        "status": "restored" if messages["items"] else "empty",
                        "reason": None,
                        "state": {"boundarySeq": boundary},
                    },
                ],
                "pendingOperations": [],
                "lastDurableSeq": writer.last_seq,
                "recovery": {
                    "skippedLines": [line.to_wire() for line in contents.skipped],
                    "snapshotUsed": False,
                    "bomStripped": contents.bom,
                    "tornTailRecovered": contents.torn_tail_offset is not None,
                },
                "continueReason": None,
                "messages": messages,
            }
        finally:
            if thread_id not in self._open or self._open[thread_id].writer is not writer:
                writer.close()

    def fork(
        self,
        thread_id: str,
        *,
        at_turn_id: str | None,
        at_seq: int | None,
        owner: str = LOCAL_OWNER,
    ) -> StartedThread:
        """A new thread holding exactly the items up to the cut (a turn or a seq)."""
        contents, _ = self.store.read(thread_id)
        cut = self._fork_cut(contents.items, at_turn_id, at_seq)
        source_meta = _latest_meta(contents.items)
        title = None
        copied: list[dict[str, Any]] = []
        for item in contents.items:
            if item["seq"] > cut:
                break
            if item.get("type") == "thread_title":
                title = item.get("title")
            if item.get("type") in BOOKKEEPING_TYPES:
                continue
            copied.append({k: v for k, v in item.items() if k not in STAMP_FIELDS})
        cwd = source_meta.get("cwd") or "."
        meta = self._session_meta(
            source="startup",
            reason="fork",
            environment=probe(cwd),
            workspace_folder=source_meta.get("workspaceFolder"),
            title=title or source_meta.get("title"),
            model=source_meta.get("model"),
            permissions=source_meta.get("permissions"),
            client=source_meta.get("client"),
            forked_from={"threadId": validate_thread_id(thread_id), "seq": cut},
        )
        started = self._create(meta, owner)
        if copied:
            session = self._open[started.summary.threadId]
            session.writer.append(copied, started.session_id)
            self._reindex(session.writer)
        return StartedThread(
            self._open[started.summary.threadId].writer.summary, started.session_id
        )

    # --- archive and delete ------------------------------------------------------------

    def archive(self, thread_id: str, archived: bool, owner: str = LOCAL_OWNER) -> ThreadSummary:
        thread_id = validate_thread_id(thread_id)
        self._release(thread_id, owner)
        path = self.store.move(thread_id, to_archived=archived)
        summary = self.store.read_summary(path, archived)
        if summary is None:
            raise ProtocolError(
                ErrorKind.THREAD_NOT_FOUND, "thread vanished while moving", threadId=thread_id
            )
        self._index_upsert(summary, path)
        return summary

    def delete(self, thread_id: str, owner: str = LOCAL_OWNER) -> None:
        thread_id = validate_thread_id(thread_id)
        self._release(thread_id, owner)
        self.store.delete(thread_id)
        self.index.remove(thread_id)

    # --- helpers -----------------------------------------------------------------------

    def _create(self, meta: dict[str, Any], owner: str) -> StartedThread:
        thread_id, session_id = meta["threadId"], _new_id()
        writer = self.store.create(thread_id, session_id, meta)
        self._open[thread_id] = OpenSession(session_id, writer, owner)
        self._reindex(writer)
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
                "cwd": environment["cwd"],
                "workspaceFolder": workspace_folder,
                "repoRoot": environment.get("repoRoot"),
                "branch": environment.get("branch"),
                "headSha": environment.get("headSha"),
                "title": title,
                "model": model,
                "permissions": permissions,
                "client": client,
            }
        )

    def _session(self, thread_id: str, session_id: str, owner: str) -> OpenSession:
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
        return session

    def _writer_for_bookkeeping(self, thread_id: str) -> tuple[ThreadWriter, bool]:
        thread_id = validate_thread_id(thread_id)
        if (session := self._open.get(thread_id)) is not None:
            return session.writer, False
        return self.store.open_writer(thread_id), True

    def _release(self, thread_id: str, owner: str) -> None:
        """Close this owner's session on the thread; another owner's lease means ThreadBusy."""
        session = self._open.get(thread_id)
        if session is None:
            return
        if session.owner != owner:
            raise _busy(thread_id, session.owner)
        del self._open[thread_id]
        session.writer.close()

    def _reindex(self, writer: ThreadWriter) -> None:
        self._index_upsert(writer.summary, writer.path)

    def _index_upsert(self, summary: ThreadSummary, path: Any) -> None:
        """Every writer keeps the shared index current, so other processes list its threads."""
        self.index.upsert(summary, path)

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

    @staticmethod
    def _messages_after_boundary(
        items: list[dict[str, Any]], limit: int
    ) -> tuple[dict[str, Any], int]:
        boundary = 0
        for item in items:
            if item.get("type") in BOUNDARY_TYPES:
                boundary = item["seq"]
        messages = [i for i in items if i["seq"] > boundary and i.get("type") == "message"]
        page = messages[:limit]
        next_after = page[-1]["seq"] if len(messages) > limit else None
        return {"items": page, "nextAfterSeq": next_after, "boundarySeq": boundary}, boundary
