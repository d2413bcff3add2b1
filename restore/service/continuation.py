"""`thread/continue`: a message arrived for a session key; does it continue the key's
current thread, or start the one that replaces it?

Under the key's lock (`Store.hold_key`: a file's flock, PostgreSQL's advisory lock), so
however many processes and machines ask at once, one decides at a time and the next one
finds what it decided: the key's current thread is looked up in the index, judged by the
key's freshness policy (restore/engine/freshness.py, restore/session_policy.py) against
its last activity, and then

- continued: the session this client holds on it goes on (nothing written), or a session
  is opened on it as `thread/resume` opens one (its RestoreReport);
- reset: a new thread starts, born with the key and `previousThreadId` (source `reset`,
  reason `daily|idle`), carrying what the policy's `carry` says (model, permissions,
  todos: never the conversation); the replaced thread gets a `thread_successor` item
  naming it. That item is bookkeeping a writer elsewhere may hold up: the new thread's
  `previousThreadId` alone already keeps the replaced one from being current, and the
  next `thread/continue` of the key writes a successor item still missing;
- or, for a key with no current thread, its first thread starts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from protocol.errors import ErrorKind, ProtocolError
from restore import clock
from restore.engine.freshness import CONTINUE, Decision, Policy, evaluate
from restore.engine.subsystems import ThreadState
from restore.engine.subsystems.permissions import downgrade
from restore.keys import validate_key
from restore.service.sessions import LOCAL_OWNER, new_id
from restore.session_policy import local_zone
from restore.summary import ThreadSummary

if TYPE_CHECKING:
    from restore.service.resume import Report
    from restore.service.sessions import Sessions, StartedThread
    from restore.session_policy import SettingsFile
    from restore.stores.api import Store
    from restore.stores.records import Item


class Service(Protocol):
    """What `thread/continue` asks of the thread service (restore/service/threads.py, which
    calls `continue_key` with itself): by this interface, so this module does not import
    the service that imports it."""

    sessions: Sessions
    store: Store

    @property
    def session_settings(self) -> SettingsFile: ...

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
    ) -> Report: ...

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
        trusted_folders: Sequence[str] = (),
        session_key: str | None = None,
        replaces: tuple[str, str] | None = None,
    ) -> StartedThread: ...

    def close(
        self, thread_id: str, session_id: str, owner: str = LOCAL_OWNER, *, reason: str = "close"
    ) -> None: ...

    def append_bookkeeping(
        self, thread_id: str, items: list[Item], *, flush: bool = True, derived: bool = False
    ) -> ThreadSummary: ...


logger = logging.getLogger("sessiond.threads")


@dataclass(frozen=True)
class ContinueAsk:
    """What `thread/continue` asks, whoever asks."""

    key: str
    cwd: str
    workspace_folder: str | None
    policy: dict[str, Any] | None = None
    title: str | None = None
    model: str | None = None
    permissions: dict[str, Any] | None = None
    accept_drift: bool = False
    message_limit: int = 200
    available_models: list[str] | None = None
    client: dict[str, Any] | None = None
    owner: str = LOCAL_OWNER
    trusted_folders: Sequence[str] = ()
    max_bytes: int = 8 * 1024 * 1024


@dataclass
class Continued:
    """What happened, and what the server tells whom (hooks, notifications)."""

    reason: str
    """startup | resume | reset"""
    thread: ThreadSummary
    session_id: str | None
    session_opened: bool
    policy: dict[str, Any]
    reset_reason: str | None = None
    previous_thread_id: str | None = None
    last_activity: str | None = None
    report: Report | None = None
    carried: list[str] = field(default_factory=list)
    ended_session_id: str | None = None
    """A reset ended this client's session on the replaced thread (its SessionEnd hooks)."""
    changed: list[ThreadSummary] = field(default_factory=list)
    """Rows a successor item changed (announced as `thread/updated`)."""
    unlinked: str | None = None
    """The replaced thread whose successor item is left to `link_replaced`, after the
    answer (`continue_key(link_after=True)`)."""

    def answer(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "resetReason": self.reset_reason,
            "thread": self.thread.thread_info(),
            "sessionId": self.session_id,
            "sessionOpened": self.session_opened,
            "previousThreadId": self.previous_thread_id,
            "lastActivity": self.last_activity,
            "policy": self.policy,
            "restore": self.report,
            "carried": self.carried,
        }


def continue_key(service: Service, ask: ContinueAsk, *, link_after: bool = False) -> Continued:
    """The key's thread goes on, or a new one replaces it. `link_after`: a reset leaves the
    replaced thread's successor item to the caller (`Continued.unlinked`, then
    `link_replaced`) unless this process holds that thread open: the item is derived (the
    new thread names the one it replaces), so the answer need not wait for it (~0.6 ms:
    the replaced thread's file opened, read and its writer marked)."""
    key = validate_key(ask.key)
    service.sessions.writable()
    settings = service.session_settings.current()
    client_name = (ask.client or {}).get("name")
    policy = settings.policy(key, client_name if isinstance(client_name, str) else None, ask.policy)
    if settings.zone is not None:
        zone, zone_name = settings.zone, settings.zone_name or "UTC"
    else:
        zone, zone_name = local_zone()
    wire = policy.wire(zone_name)
    with service.store.hold_key(key):
        now = clock.now()  # under the lock: the holder before may have taken a while
        index = service.store.index
        index.ensure_ready()
        service.store.flush()
        current, unlinked = index.key_threads(key)
        changed = [row for old, new in unlinked if (row := _link(service, old, new)) is not None]
        if current is None:
            started = _start(service, ask, key, None, None, ThreadState(), policy)
            done = Continued("startup", started[0], started[1], True, wire, changed=changed)
        else:
            last = current.updatedAt or current.createdAt
            decision = evaluate(policy, clock.parse_ts(last), now, zone) if last else CONTINUE
            if decision.reset is None:
                return _resume(service, ask, current, wire, last, changed)
            done = _reset(
                service, ask, key, current, decision, policy, wire, last, changed, link_after
            )
        # The new thread's row (and the links') before the key goes: the next holder's
        # index must show what was decided (rows a store holds back: the embedded one's).
        service.store.flush()
        return done


def _resume(
    service: Service,
    ask: ContinueAsk,
    current: ThreadSummary,
    wire: dict[str, Any],
    last: str | None,
    changed: list[ThreadSummary],
) -> Continued:
    """The key's thread goes on: this client's session on it if it holds one (nothing
    written, no hook), else a session opened as `thread/resume` opens one."""
    held = service.sessions.open.get(current.threadId)
    if held is not None and held.owner == ask.owner:
        return Continued(
            "resume",
            held.writer.summary,
            held.session_id,
            False,
            wire,
            last_activity=last,
            changed=changed,
        )
    report = service.resume(
        current.threadId,
        cwd=ask.cwd,
        accept_drift=ask.accept_drift,
        message_limit=ask.message_limit,
        available_models=ask.available_models,
        owner=ask.owner,
        trusted_folders=ask.trusted_folders,
        max_bytes=ask.max_bytes,
    )
    opened = report["session"]["sessionId"]
    summary = service.sessions.open[current.threadId].writer.summary if opened else current
    return Continued(
        "resume",
        summary,
        opened,
        opened is not None,
        wire,
        last_activity=last,
        report=report,
        changed=changed,
    )


def _reset(
    service: Service,
    ask: ContinueAsk,
    key: str,
    current: ThreadSummary,
    decision: Decision,
    policy: Policy,
    wire: dict[str, Any],
    last: str | None,
    changed: list[ThreadSummary],
    link_after: bool,
) -> Continued:
    """A new thread in place of `current`, linked both ways (the link maybe after the
    answer: `continue_key`); this client's session on the replaced one (if it holds one)
    ends, reason `reset`."""
    old_id = current.threadId
    held = service.sessions.open.get(old_id)
    state = held.state if held is not None else _state_of(service, old_id)
    reason = decision.reset
    assert reason is not None
    summary, session_id, carried = _start(service, ask, key, old_id, reason, state, policy)
    later = link_after and held is None
    # continue_key flushes next: the replaced thread's row with the new one's
    linked = None if later else _link(service, old_id, summary, flush=False)
    ended = None
    if held is not None and held.owner == ask.owner:  # its conversation moved on
        service.close(old_id, held.session_id, ask.owner, reason="reset")
        ended = held.session_id
    return Continued(
        "reset",
        summary,
        session_id,
        True,
        wire,
        reset_reason=reason,
        previous_thread_id=old_id,
        last_activity=last,
        carried=carried,
        ended_session_id=ended,
        changed=[*changed, *([linked] if linked else [])],
        unlinked=old_id if later else None,
    )


def _start(
    service: Service,
    ask: ContinueAsk,
    key: str,
    previous: str | None,
    reason: str | None,
    state: ThreadState,
    policy: Policy,
) -> tuple[ThreadSummary, str, list[str]]:
    """The key's new thread (its first, or a reset's), with what the policy carries from
    `state` (the replaced thread's) under what the call asks."""
    carry = policy.carry if previous is not None else None
    carried: list[str] = []
    model = ask.model
    if carry is not None and carry.model and model is None:
        model = (state.states["model_override"] or {}).get("model")
        carried += ["model"] if model else []
    permissions = ask.permissions
    if carry is not None and carry.permissions and permissions is None:
        recorded = {k: v for k, v in (state.states["permissions"] or {}).items() if v is not None}
        permissions = downgrade(recorded)[0] if recorded else None
        carried += ["permissions"] if permissions else []
    started = service.start(
        cwd=ask.cwd,
        workspace_folder=ask.workspace_folder,
        title=ask.title,
        model=model,
        permissions=permissions,
        client=ask.client,
        owner=ask.owner,
        trusted_folders=ask.trusted_folders,
        session_key=key,
        replaces=(previous, reason) if previous is not None and reason is not None else None,
    )
    todos = state.states["todos"].get("items") or []
    if carry is not None and carry.todos and todos:
        session = service.sessions.open[started.summary.threadId]
        item = {"type": "todos", "id": new_id(), "items": todos}
        service.sessions.append(session, [item], started.session_id, minted=True)
        carried.append("todos")
    return (
        service.sessions.open[started.summary.threadId].writer.summary,
        started.session_id,
        [name for name in ("model", "permissions", "todos") if name in carried],
    )


def link_replaced(service: Service, old_id: str, new: ThreadSummary) -> ThreadSummary | None:
    """A reset's link left for after its answer (`Continued.unlinked`): the replaced
    thread's successor item, its row written at once; None when it cannot be written now
    (the key's next `thread/continue` writes it)."""
    return _link(service, old_id, new)


def _state_of(service: Service, thread_id: str) -> ThreadState:
    """The replaced thread's state, read (it is not open here)."""
    contents, _ = service.store.read(thread_id)
    return ThreadState().apply_all(contents.items)


def _link(
    service: Service, old_id: str, new: ThreadSummary, *, flush: bool = True
) -> ThreadSummary | None:
    """The replaced thread's `thread_successor` item (its row's `nextThreadId`); its new row,
    or None when it cannot be written now (another process writes that thread: the next
    `thread/continue` of the key tries again). Its id is the successor's, so it is
    written once. Derived (the new thread names the one it replaces): not synced on its
    own in the embedded store; lost to a power cut, it is written again the same way."""
    item = {
        "type": "thread_successor",
        "id": f"successor:{new.threadId}",
        "nextThreadId": new.threadId,
        "resetReason": new.resetReason or "idle",
    }
    try:
        return service.append_bookkeeping(old_id, [item], flush=flush, derived=True)
    except ProtocolError as exc:
        if exc.kind not in (
            ErrorKind.THREAD_BUSY,
            ErrorKind.THREAD_NOT_FOUND,
            ErrorKind.UNAUTHORIZED,
        ):
            raise
        logger.info(
            "thread %s: its successor %s is not recorded yet: %s", old_id, new.threadId, exc.message
        )
        return None
