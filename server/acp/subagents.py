"""Native sub-agent sessions (the draft ACP subagents RFD, agentclientprotocol/
agent-client-protocol#1992; JetBrains AIR's `nativeSubagentSessions`), recorded: each child
session AGENT announces is a thread of its own under its parent's (`parentThreadId`).

An editor that declares `clientCapabilities.subagents` (or AIR's capability) gets from
claude-agent-acp 0.71+ and codex-acp 1.7+ each sub-agent as a session of its own: a
`subagent_update` on the parent session announces it (its first one for an unknown
`sessionId`, before any of the child's traffic), then the child's updates and requests
come under that id — an id no `session/new` named. The proxy makes the child's thread at
the announcement, names the child to the editor by that thread's id (as every session is
named), and records the child's updates there as it records any session's. The offer is
passed on to AGENT as the editor made it (until sessiond recorded children it withheld
it, and AGENT sent the sub-agent's calls in the parent session).

Which messages name sessions besides `sessionId`: the announcement's own `sessionId`
(the child), and an inter-session message's `senderSessionId` / `recipientSessionId`
(`session_message`); each is rewritten both ways like `sessionId` is.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from protocol.errors import ProtocolError
from restore.sources import acp as source
from server.acp.state import Live, new_scope

if TYPE_CHECKING:
    from restore.service import ThreadService

logger = logging.getLogger("sessiond.acp")

ANNOUNCES = ("subagent_update", "subagent_spawned", "subagent_state_update")
"""The updates on a parent that name a child: the RFD's (`subagent_update`, the child in
`sessionId`, its state `{state}`), and JetBrains AIR's draft's that claude-agent-acp sends
an AIR editor (`subagent_spawned`, then `subagent_state_update` with the state a string;
the child in `subagentSessionId`). The first for an unknown child announces it."""
WORKING = ("running", "requires_action")
"""A child's states while it works (`subagent_update`'s `state.state`); any other (idle,
completed, failed, cancelled, ...) ends the message it was saying."""
SESSION_FIELDS = ("senderSessionId", "recipientSessionId")
"""Fields of a `session_message` that name a session."""


def child_of(update: dict[str, Any]) -> str | None:
    """The child session id an announcing update names (None for any other update)."""
    if update.get("sessionUpdate") not in ANNOUNCES:
        return None
    child = update.get("sessionId") or update.get("subagentSessionId")
    return child if isinstance(child, str) and child else None


class Subagents:
    """The proxy's part that records native sub-agent sessions (`AcpProxy` is one)."""

    if TYPE_CHECKING:  # what this part uses of the rest of the proxy
        owner: str
        argv: list[str]
        live: dict[str, Live]
        by_agent: dict[str, str]
        client_info: dict[str, Any] | None

        @property
        def service(self) -> ThreadService: ...
        def _record(self, live: Live, recorded: source.Recorded) -> None: ...
        def _write_thread(self, live: Live) -> None: ...
        def _flush_index_soon(self) -> None: ...
        def _release_held(self, live: Live) -> None: ...

    def _subagent_announced(self, parent: Live, params: dict[str, Any]) -> dict[str, Any]:
        """A `subagent_update` on `parent` (params with the thread id already): a child
        AGENT announces for the first time gets its thread, under the parent's, and the
        update names the child by that thread's id; a later one may retitle it."""
        update = params.get("update")
        child = child_of(update) if isinstance(update, dict) else None
        if child is None or not isinstance(update, dict):
            return params
        thread_id = self.by_agent.get(child)
        if thread_id is None:
            thread_id = self._child_thread(parent, child, update)
            if thread_id is None:
                return params  # not recorded: the editor still gets it, under AGENT's id
        elif isinstance(update.get("title"), str) and update["title"].strip():  # (the RFD's)
            try:
                self.service.set_title(thread_id, update["title"].strip()[:500])
            except ProtocolError as exc:
                logger.warning("could not retitle sub-agent thread %s: %s", thread_id, exc)
        state = update.get("state")
        state = state.get("state") if isinstance(state, dict) else state
        settled = isinstance(state, str) and state not in WORKING
        if settled and thread_id in self.live:
            self._child_settled(self.live[thread_id])
        field = "sessionId" if "sessionId" in update else "subagentSessionId"
        return {**params, "update": {**update, field: thread_id}}

    def _child_thread(self, parent: Live, child: str, update: dict[str, Any]) -> str | None:
        if parent.pending is not None:
            self._write_thread(parent)  # a child's parent is kept from then on
        cwd = update.get("cwd")
        title = update.get("title") or update.get("name")
        try:
            started = self.service.start(
                cwd=cwd if isinstance(cwd, str) and cwd.startswith("/") else parent.cwd,
                workspace_folder=None,
                title=title.strip()[:500] if isinstance(title, str) and title.strip() else None,
                client=self.client_info,
                owner=self.owner,
                origin={"agent": "acp", "sessionId": child, "agentCommand": self.argv},
                parent_thread_id=parent.thread_id,
            )
        except ProtocolError as exc:
            logger.error("could not record sub-agent session %s: %s", child, exc)
            return None
        thread_id = started.summary.threadId
        live = Live(
            thread_id,
            started.session_id,
            source.ThreadRecorder(new_scope()),
            started.summary.cwd or parent.cwd,
            parent.mcp_servers,
            child,
            parent=parent.thread_id,
        )
        self.live[thread_id] = live
        self._record(live, live.recorder.agent_session(child, "subagent", self.argv))
        self.by_agent[child] = thread_id
        self._flush_index_soon()
        return thread_id

    def _sessions_named(self, update: Any, to_editor: bool) -> Any:
        """A `session_message`'s sender and recipient named as the other side knows them:
        thread ids for the editor, AGENT's session ids for AGENT."""
        if not isinstance(update, dict) or not any(f in update for f in SESSION_FIELDS):
            return update
        named = dict(update)
        for name in SESSION_FIELDS:
            value = named.get(name)
            if not isinstance(value, str):
                continue
            if to_editor:
                named[name] = self.by_agent.get(value, value)
            else:
                live = self.live.get(value)
                if live is not None and live.agent_session is not None:
                    named[name] = live.agent_session
        return named

    def _children_of(self, thread_id: str) -> list[Live]:
        return [live for live in self.live.values() if live.parent == thread_id]

    def _child_settled(self, child: Live) -> None:
        """The child stopped working (its state, or its parent's turn ended): its last
        message ends, recorded (a child has no prompt answer to end its message)."""
        self._release_held(child)
        self._record(child, child.recorder.end_turn(new_scope()))
