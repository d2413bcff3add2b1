"""The proxy's part that takes what AGENT sends: its updates recorded, then forwarded to the
editor's session (early ones kept until AGENT's `session/new` answer names the session),
its requests passed on, and its answers finished on their way back (a new session adopted,
a loaded one compared with the record). `AcpProxy` is one (server/acp/proxy.py)."""

from __future__ import annotations

import collections
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import orjson

from protocol.errors import ErrorKind, ProtocolError
from restore.sources import acp as source
from server.acp.agent import AgentProcess, AgentRefused
from server.acp.ordering import Lane
from server.acp.state import (
    Downstream,
    Live,
    Upstream,
    new_scope,
)
from server.acp.subagents import ANNOUNCES

if TYPE_CHECKING:
    from restore.service import ThreadService


logger = logging.getLogger("sessiond.acp")

VERSION = "0.1.0"
MAX_BEFORE_BYTES = 16 * 1024 * 1024
"""A file larger than this is not read for its `file_edit` before-blob."""
REPLAY_LIMIT = 100_000
REPLAY_TEXT = 4096
"""Chunks (and characters of each) kept of AGENT's own replay to compare with the record."""
EARLY_LIMIT = (256, 4 * 1024 * 1024)
"""Updates (count, bytes) kept while AGENT's answer to a `session/new` is on its way; the
oldest go first beyond that (an agent streaming for a session nobody opened)."""


class FromAgent:
    """AGENT's messages, on their way to the editor."""

    if TYPE_CHECKING:  # what this part uses of the rest of the proxy
        agent: AgentProcess | None
        argv: list[str]
        owner: str
        stopping: bool
        live: dict[str, Live]
        by_agent: dict[str, str]
        replaying: dict[str, list[tuple[str, str]]]
        replayed: dict[str, list[tuple[str, str]]]
        loading: collections.Counter[str]
        upstream: dict[int, Upstream]
        downstream: dict[int, Downstream]
        editor_lane: Lane
        _ids: Iterator[int]
        _opening: int
        _early: collections.deque[tuple[dict[str, Any], int]]
        _early_dropped: int

        @property
        def service(self) -> ThreadService: ...
        async def _after_agent_gone(self, agent: AgentProcess) -> None: ...
        def _answer_error(self, request_id: Any, exc: ProtocolError) -> None: ...
        def _child_settled(self, child: Live) -> None: ...
        def _children_of(self, thread_id: str) -> list[Live]: ...
        def _flush_index_soon(self) -> None: ...
        def _pass_update(self, live: Live, message: dict[str, Any]) -> None: ...
        def _record(self, live: Live, recorded: source.Recorded) -> None: ...
        def _release_held(self, live: Live) -> None: ...
        def _send_editor(self, message: dict[str, Any]) -> None: ...
        def _sessions_named(self, update: Any, to_editor: bool) -> Any: ...
        def _show(self, live: Live, recorded: source.Recorded) -> None: ...
        def _subagent_announced(self, parent: Live, params: dict[str, Any]) -> dict[str, Any]: ...
        async def _sync(self) -> ProtocolError | None: ...
        def _unrecorded(self, live: Live, failure: ProtocolError) -> None: ...

    # --- AGENT → editor -------------------------------------------------------------------

    def _from_agent(self, message: Any) -> Awaitable[None] | None:
        if isinstance(message, tuple):
            return self._after_agent_gone(message[1])
        if "method" in message:
            if message["method"] == "session/update" and "id" not in message:
                self._agent_update(message)
            elif "id" in message:
                self._agent_request(message)
            else:
                self._send_editor(self._to_editor_session(message)[0])
            return None
        request = self.upstream.pop(message.get("id"), None)
        if request is None:
            return None
        held = request.release_hold
        if held is not None:  # its replay is over: later updates count, once no load is left
            self.loading[held] -= 1
            if self.loading[held] <= 0:
                del self.loading[held]
                self.replayed[held] = self.replaying.pop(held, [])
        if request.future is not None:
            if request.future.done():
                return None
            if "error" in message:
                request.future.set_exception(AgentRefused(message["error"]))
            else:
                request.future.set_result(message.get("result"))
            return None
        finish = ANSWER_FINISHERS.get(request.method)
        if finish is not None:
            return finish(self, request, message)
        self._answer_editor(request, message)
        return None

    def _answer_editor(self, request: Upstream, message: dict[str, Any]) -> None:
        self._send_editor({**message, "id": request.editor_id})

    def _to_editor_session(self, message: dict[str, Any]) -> tuple[dict[str, Any], Live | None]:
        """The message with the thread id in place of AGENT's session id."""
        params = message.get("params")
        if not isinstance(params, dict) or not isinstance(params.get("sessionId"), str):
            return message, None
        thread_id = self.by_agent.get(params["sessionId"])
        if thread_id is None:
            return message, None
        live = self.live.get(thread_id)
        return {**message, "params": {**params, "sessionId": thread_id}}, live

    def _agent_update(self, message: dict[str, Any]) -> None:
        """Written (not yet synced) before it is forwarded: once the editor shows it, a
        crash of this process cannot lose it."""
        params: Any = message.get("params")
        agent_session = params.get("sessionId") if isinstance(params, dict) else None
        replay = self.replaying.get(agent_session)  # type: ignore[arg-type]
        if replay is not None:  # AGENT replaying its own history: the editor has sessiond's
            said = source.replay_texts(params.get("update") or {})
            if said is not None and len(replay) < REPLAY_LIMIT:
                replay.append((said[0], said[1][:REPLAY_TEXT]))
            return
        mapped, live = self._to_editor_session(message)
        if live is None:
            if self._opening > 0 and agent_session not in self.by_agent:
                self._keep_early(message)  # its session/new answer is still on its way
                return
            self._send_editor(message)
            return
        update = mapped["params"].get("update")
        if isinstance(update, dict) and update.get("sessionUpdate") in ANNOUNCES:
            mapped = {**mapped, "params": self._subagent_announced(live, mapped["params"])}
        elif isinstance(update, dict) and update.get("sessionUpdate") == "session_message":
            named = self._sessions_named(update, to_editor=True)
            mapped = {**mapped, "params": {**mapped["params"], "update": named}}
        self._pass_update(live, mapped)

    def _keep_early(self, message: dict[str, Any]) -> None:
        size = len(orjson.dumps(message))
        self._early.append((message, size))
        self._early_bytes += size
        count, limit = EARLY_LIMIT
        while len(self._early) > count or self._early_bytes > limit:
            _, dropped = self._early.popleft()
            self._early_bytes -= dropped
            self._early_dropped += 1
            if self._early_dropped & (self._early_dropped - 1) == 0:  # 1, 2, 4, 8, ...
                logger.warning(
                    "AGENT sent %d updates for no session it has answered yet; the oldest "
                    "are dropped (at most %d updates or %d bytes wait)",
                    self._early_dropped,
                    count,
                    limit,
                )

    def _agent_request(self, message: dict[str, Any]) -> None:
        mapped, live = self._to_editor_session(message)
        params = mapped.get("params")
        before = None
        if (
            live is not None
            and live.session_id is not None
            and message["method"] == "fs/write_text_file"
            and isinstance(params, dict)
        ):
            session = self.service.session_for(live.thread_id, live.session_id, self.owner)
            before = _read_before(session.state.states["worktree"], params.get("path"))
        request_id = next(self._ids)
        assert self.agent is not None
        self.downstream[request_id] = Downstream(
            message["method"],
            self.agent,
            message["id"],
            params,
            live.thread_id if live else None,
            before,
        )
        self._send_editor({**mapped, "id": request_id})

    def _adopt(self, agent_session: str, thread_id: str) -> None:
        """AGENT's session is now the thread's: updates that came early go out now."""
        self.by_agent[agent_session] = thread_id
        early, self._early = self._early, collections.deque()
        self._early_bytes = 0
        for message, size in early:
            session = (message.get("params") or {}).get("sessionId")
            if session == agent_session or (self._opening == 0 and session not in self.by_agent):
                self._agent_update(message)
            else:
                self._early.append((message, size))
                self._early_bytes += size

    # --- answers finished on their way back -----------------------------------------------

    def _initialized(self, request: Upstream, message: dict[str, Any]) -> None:
        result = message.get("result")
        if isinstance(result, dict):
            self.agent_capabilities = dict(result.get("agentCapabilities") or {})
            message = {**message, "result": source.advertise(result, VERSION)}
        self._answer_editor(request, message)

    def _session_created(self, request: Upstream, message: dict[str, Any]) -> None:
        """AGENT made a session: the editor gets a thread id for it. The thread is written
        at the session's first prompt (`_write_thread`): a chat opened and left without a
        prompt leaves no thread behind. Until then its items wait (bounded)."""
        self._opening -= 1
        result = message.get("result")
        agent_session = result.get("sessionId") if isinstance(result, dict) else None
        params = request.params if isinstance(request.params, dict) else {}
        if not isinstance(agent_session, str) or not isinstance(params.get("cwd"), str):
            self._answer_editor(request, message)
            self._adopt_none()
            return
        if agent_session in self.by_agent:
            taken = self.by_agent[agent_session]
            logger.error("AGENT answered session/new with its session %s again", agent_session)
            error = ProtocolError(
                ErrorKind.INTERNAL_ERROR,
                f"the agent answered session/new with its session {agent_session}, which is "
                f"session {taken} here already: not recorded twice",
                agentSessionId=agent_session,
            )
            self._answer_error(request.editor_id, error)
            self._adopt_none()
            return
        assert isinstance(result, dict)
        thread_id = str(uuid.uuid4())
        live = Live(
            thread_id,
            None,
            source.ThreadRecorder(new_scope()),
            params["cwd"],
            params.get("mcpServers") or [],
            agent_session,
            pending=source.Recorded(),
        )
        self.live[thread_id] = live
        recorded = live.recorder.agent_session(agent_session, "new", self.argv, result)
        self._record(live, recorded.add(live.recorder.session_state(result)))
        self._answer_editor(request, {**message, "result": {**result, "sessionId": thread_id}})
        self._adopt(agent_session, thread_id)

    def _adopt_none(self) -> None:
        if self._opening == 0:
            early, self._early = self._early, collections.deque()
            self._early_bytes = 0
            for message, _ in early:
                self._send_editor(message)

    async def _turn_ended(self, request: Upstream, message: dict[str, Any]) -> None:
        """The prompt's answer: the turn's end is recorded and synced (group durability:
        one fdatasync for everything the turn wrote) before the editor hears it. A turn
        part of which could not be recorded ends in an error saying so, not as if it were
        (durable before shown)."""
        live = self.live.get(request.thread_id or "")
        result = message.get("result")
        if live is not None:
            self._release_held(live)  # the turn's last words, before its answer
            for child in self._children_of(live.thread_id):
                self._child_settled(child)  # and its sub-agents'
        if live is not None and live.recorder.turn_id == request.turn_id:
            ended_ok = result if isinstance(result, dict) else {}
            error = message.get("error")
            ended = live.recorder.end_turn(
                new_scope(),
                stop_reason=ended_ok.get("stopReason"),
                usage=ended_ok.get("usage"),
                error=str(error.get("message")) if isinstance(error, dict) else None,
            )
            if error is None:
                live.prime = None  # AGENT has the history now
            self._record(live, ended)
            self._show(live, ended)
            failed = await self._sync()
            if failed is not None:
                self._unrecorded(live, failed)
            self._flush_index_soon()
            if live.unrecorded is not None and isinstance(result, dict):
                lost, live.unrecorded = live.unrecorded, None
                refusal = ProtocolError(
                    lost.kind,
                    f"sessiond could not record this turn ({lost}): the agent finished it, "
                    "but a later load will not show all of it",
                    agentResult=result,
                )
                self._answer_error(request.editor_id, refusal)
                return
        if isinstance(result, dict) and (request.context_sections or request.reached):
            meta = dict(result.get("_meta") or {})
            added = dict(meta.get("sessiond") or {})
            if request.context_sections:
                added["context"] = request.context_sections
            if request.reached:
                added.update(request.reached)
            meta["sessiond"] = added
            message = {**message, "result": {**result, "_meta": meta}}
        self._answer_editor(request, message)
        if live is not None:
            self._send_queued(live)

    def _send_queued(self, live: Live) -> None:
        """The prompt the editor queued behind the turn that just ended, on its way (not
        once the editor is gone: it would start AGENT again for nobody)."""
        if live.queued and live.recorder.turn_id is None and not self.stopping:
            self.editor_lane.push(live.queued.pop(0))


ANSWER_FINISHERS: dict[
    str, Callable[[FromAgent, Upstream, dict[str, Any]], Awaitable[None] | None]
] = {
    "initialize": FromAgent._initialized,
    "session/new": FromAgent._session_created,
    "session/prompt": FromAgent._turn_ended,
}
"""AGENT's answers sessiond completes before the editor gets them."""


def _read_before(worktree: dict[str, Any], path: Any) -> bytes | None:
    """A file's content before the editor writes it, for its `file_edit` before-blob.

    Only read, never written: a regular file of bounded size inside the thread's workspace,
    as restore/access.py decides for every client-named path. Anything else has no
    before-blob (the write itself is the editor's to allow or refuse)."""
    from restore.access import Scope, read_regular

    try:
        return read_regular(Scope.of_thread(worktree).resolve(path), MAX_BEFORE_BYTES)
    except (ProtocolError, OSError):
        return None
