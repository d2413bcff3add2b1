"""What the proxy keeps while it works: per thread (`Live`, `Held`) and per request in
flight each way (`Upstream`: to AGENT, its id renumbered; `Downstream`: AGENT's, to the
editor)."""

from __future__ import annotations

import asyncio
import os
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorKind, ProtocolError
from restore.sources import acp as source
from restore.sources.acp_chunks import ChunkHold

if TYPE_CHECKING:
    from server.acp.agent import AgentProcess
    from server.hooks.lifecycle import HookRun


@dataclass
class Held:
    """A session loaded but not continued: recorded elsewhere (nothing reaches AGENT, and
    nothing is written, until the person says at its first prompt to continue here), or
    open in another process (`busy`: shown, and continued once that one lets go)."""

    environment: dict[str, Any]
    """The RestoreReport's `environment`: recorded, current, drift (empty when busy)."""
    cwd: str | None
    busy: str | None = None
    """The other holder (`acp:<pid>`, `local:<pid>`, ...)."""


@dataclass
class Live:
    """A thread this process has open: sessiond's session on it, and AGENT's."""

    thread_id: str
    session_id: str | None
    """sessiond's session on the thread; None while the thread is not written yet
    (`pending`) or not continued (`held`)."""
    recorder: source.ThreadRecorder
    cwd: str
    mcp_servers: list[Any]
    agent_session: str | None = None
    previous_agent_session: str | None = None
    prime: dict[str, Any] | None = None
    starting: HookRun | None = None
    """The SessionStart hooks of the session, until a prompt took their context."""
    context: dict[str, Any] | None = None
    """Hook context for AGENT's next prompt (`source.context_block`), sent once."""
    context_sent: dict[str, Any] | None = None
    """The hook context AGENT's session has: a new AGENT session gets it again."""
    pending: source.Recorded | None = None
    """A new session's items until its first prompt writes its thread."""
    pending_size: int = 0
    held: Held | None = None
    reaching: asyncio.Task[None] | None = None
    """AGENT's session being reached after a load or resume (a prompt waits for it)."""
    shown_state: dict[str, Any] = field(default_factory=dict)
    """The modes, models and config options a load answered with (`source.session_state`)."""
    reached_via: str | None = None
    """How AGENT's session was reached, until a prompt's answer says so."""
    unrecorded: ProtocolError | None = None
    """The first record of the current turn that failed: the turn's answer is an error."""
    chunks: ChunkHold = field(default_factory=ChunkHold)
    """The end of AGENT's message text not yet recorded nor shown: a secret may be in
    progress there (restore/sources/acp_chunks.py)."""
    parent: str | None = None
    """A native sub-agent session's: its parent's thread id (server/acp/subagents.py)."""
    queued: list[dict[str, Any]] = field(default_factory=list)
    """Prompts the editor sent while a turn ran (claude-agent-acp offers `promptQueueing`):
    sent on one at a time, each when the turn before it has ended, so that each is
    recorded as its own turn (AGENT runs them one after another all the same). At most
    `MAX_QUEUED`; a cancel or close of the session answers them `cancelled`."""

    def ready_for_agent(self) -> bool:
        return self.held is None and self.agent_session is not None and self.reaching is None

    def drop_queued(self) -> list[dict[str, Any]]:
        """The answers for every held prompt, never sent: `cancelled`, as claude-agent-acp
        ends the prompts it queued when a cancel or a close comes first."""
        dropped, self.queued = self.queued, []
        return [
            {"jsonrpc": "2.0", "id": held["id"], "result": {"stopReason": "cancelled"}}
            for held in dropped
        ]


MAX_QUEUED = 16
"""Prompts held behind a running turn, per session: past it a prompt is `Overloaded` (an
editor sending in a loop during a long turn must not grow the proxy without bound)."""


@dataclass
class Upstream:
    """A request on its way to AGENT: the editor's (answered with `editor_id`) or the
    proxy's own (answered through `future`)."""

    method: str
    agent: AgentProcess
    params: Any = None
    editor_id: Any = None
    thread_id: str | None = None
    turn_id: str | None = None
    future: asyncio.Future[Any] | None = None
    release_hold: str | None = None
    context_sections: list[str] | None = None
    reached: dict[str, Any] | None = None
    """For the first prompt after AGENT's session was reached: how (its answer says so)."""


@dataclass
class Downstream:
    """A request AGENT made of the editor, until the editor answers it."""

    method: str
    agent: AgentProcess
    agent_id: Any
    params: Any
    thread_id: str | None
    before: bytes | None = None


def new_scope() -> str:
    return str(uuid.uuid4())


def error_object(kind: ErrorKind, message: str, **details: Any) -> dict[str, Any]:
    return ProtocolError(kind, message, **details).to_error_object()


def accept_drift(params: Any) -> bool | None:
    """`_meta.sessiond.acceptDrift`: True continues anywhere, False asks for the typed
    `WorkspaceDrift` error (an editor that knows sessiond), absent asks the person."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    found = meta.get("sessiond") if isinstance(meta, dict) else None
    value = found.get("acceptDrift") if isinstance(found, dict) else None
    return value if isinstance(value, bool) else None


def same_directory(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)
