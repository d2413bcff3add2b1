"""The proxy's part that sends a prompt on: the person's words recorded before AGENT sees
them (a turn's, or steering into a running one), a loaded session's context handed to an
agent that lost it, and, for a session recorded elsewhere, the person asked in the
prompt's turn whether it continues here (nothing reaches AGENT before they say so).
`AcpProxy` is one (server/acp/proxy.py)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorKind, ProtocolError
from restore.sources import acp as source
from server.acp.agent import AgentProcess, EditorGone
from server.acp.checks import (
    params_of,
    session_id_of,
)
from server.acp.sessions import busy_notice
from server.acp.state import (
    MAX_QUEUED,
    Live,
    accept_drift,
)

if TYPE_CHECKING:
    pass


logger = logging.getLogger("sessiond.acp")

DRIFT_CONTINUE = "continue-here"
DRIFT_CANCEL = "cancel"
DRIFT_OPTIONS = [
    {"optionId": DRIFT_CONTINUE, "name": "Continue here", "kind": "allow_once"},
    {"optionId": DRIFT_CANCEL, "name": "Cancel: send nothing", "kind": "reject_once"},
]
"""Two kinds every editor renders (allow_once, reject_once). No "fork here": the editor's
session id is the thread id, and a fork is another thread the editor never asked for."""


class Prompts:
    """Prompts on their way to AGENT, and the drift question before the first."""

    if TYPE_CHECKING:  # what this part uses of the rest of the proxy
        agent: AgentProcess | None
        live: dict[str, Live]
        closed: set[str]
        stopping: bool
        _asked: dict[int, asyncio.Future[Any]]
        _ids: Iterator[int]

        async def _agent_session_ready(self, live: Live) -> None: ...
        def _answer_error(self, request_id: Any, exc: ProtocolError) -> None: ...
        async def _answering(
            self, message: dict[str, Any], work: Coroutine[Any, Any, dict[str, Any] | None]
        ) -> None: ...
        def _forward(self, message: dict[str, Any], **upstream: Any) -> None: ...
        def _open_thread(
            self, thread_id: str, cwd: str | None, params: dict[str, Any], *, accept: bool | None
        ) -> tuple[Live, dict[str, Any], list[dict[str, Any]]]: ...
        async def _open_waiting(
            self, thread_id: str, cwd: str | None, params: dict[str, Any], *, accept: bool | None
        ) -> tuple[Live, dict[str, Any] | None, list[dict[str, Any]]]: ...
        def _record(self, live: Live, recorded: source.Recorded) -> None: ...
        def _release_held(self, live: Live) -> None: ...
        def _send_editor(self, message: dict[str, Any]) -> None: ...
        def _write_thread(self, live: Live) -> None: ...

    # --- prompts --------------------------------------------------------------------------

    def _steered(self, live: Live, params: dict[str, Any]) -> None:
        """The person's words sent into a running turn (`_session/steering`): recorded
        before AGENT sees them, as a prompt's are. Not when the editor asked AGENT to hand
        them back while no turn runs (`idleBehavior: promptRequired`): its `session/prompt`
        with them follows."""
        prompt = params.get("prompt")
        if not isinstance(prompt, list) or not prompt or live.held is not None:
            return
        meta = params.get("_meta")
        steering = meta.get("steering") if isinstance(meta, dict) else None
        handed_back = isinstance(steering, dict) and steering.get("idleBehavior") == (
            "promptRequired"
        )
        if handed_back and live.recorder.turn_id is None:
            return
        self._release_held(live)  # the agent's message open until now ends here
        self._record(live, live.recorder.steer(prompt))

    def _prompt(self, message: dict[str, Any]) -> Awaitable[None] | None:
        try:
            params = params_of(message)
            thread_id = session_id_of(params)
            if not isinstance(params.get("prompt"), list):
                raise ProtocolError(
                    ErrorKind.INVALID_PARAMS,
                    "prompt must be an array of content blocks",
                    field="prompt",
                )
        except ProtocolError as exc:
            self._answer_error(message["id"], exc)
            return None
        live = self.live.get(thread_id)
        if live is not None and live.recorder.turn_id is not None:
            if len(live.queued) >= MAX_QUEUED:
                refused = ProtocolError(
                    ErrorKind.OVERLOADED,
                    f"{MAX_QUEUED} prompts already wait for the running turn to end; "
                    "send this one after an answer arrives",
                    limit=MAX_QUEUED,
                )
                self._answer_error(message["id"], refused)
                return None
            live.queued.append(message)  # a turn runs: this one is sent when it ends
            return None
        ready = (
            live is not None
            and live.pending is None
            and live.ready_for_agent()
            and self.agent is not None
            and (live.starting is None or live.starting.done())
        )
        if ready and live is not None:
            self._send_prompt(live, message)  # the common path: no task, no wait
            return None
        return self._answering(message, self._prompt_when_ready(message, thread_id))

    async def _prompt_when_ready(
        self, message: dict[str, Any], thread_id: str
    ) -> dict[str, Any] | None:
        """A prompt that has to wait: its thread opened (sessiond restarted under the
        editor), confirmed (recorded elsewhere), written (the first prompt of a new
        session), AGENT started or its session reached, or SessionStart hooks done."""
        params = message["params"]
        live = self.live.get(thread_id)
        if live is None:
            if thread_id in self.closed:
                raise ProtocolError(
                    ErrorKind.STALE_SESSION,
                    f"session {thread_id} was closed: load or resume it to continue",
                    threadId=thread_id,
                )
            accept = accept_drift(params)
            live, _, _ = await self._open_waiting(thread_id, None, params, accept=accept)
        if live.held is not None and live.held.busy is not None:
            del self.live[thread_id]  # let go now? then it opens; else still held
            live, _, _ = await self._open_waiting(
                thread_id, live.held.cwd, params, accept=accept_drift(params)
            )
            if live.held is not None and live.held.busy is not None:
                self._notice(thread_id, f"Not sent: {busy_notice(live.held.busy)}", "busy")
                return {"stopReason": "refusal", "_meta": {"sessiond": {"notSent": "busy"}}}
        if live.held is not None:
            if not await self._confirm_drift(live):
                return {"stopReason": "refusal", "_meta": {"sessiond": {"notSent": "drift"}}}
            live = self.live[thread_id]
        if live.pending is not None:
            self._write_thread(live)
        await self._agent_session_ready(live)
        if live.starting is not None and not live.starting.done():
            # Its SessionStart hooks' context belongs in this prompt (each hook is bounded
            # by its own timeout; a failed or timed-out hook adds nothing). Later editor
            # messages wait too: order.
            await asyncio.wait({live.starting})
        self._send_prompt(live, message)
        return None

    def _send_prompt(self, live: Live, message: dict[str, Any]) -> None:
        params = message.get("params") or {}
        prompt: list[Any] = params["prompt"] if isinstance(params.get("prompt"), list) else []
        turn_id = str(uuid.uuid4())
        context = self._take_context(live)
        live.unrecorded = None
        self._release_held(live)  # AGENT's words between turns come before the prompt
        message_id = params.get("messageId")
        message_id = message_id if isinstance(message_id, str) else None
        self._record(live, live.recorder.begin_turn(turn_id, prompt, context, message_id))
        leading = [live.prime] if live.prime is not None else []
        if context is not None:
            leading.append(context["block"])
        if leading:
            message = {**message, "params": {**params, "prompt": [*leading, *prompt]}}
        sections = context["sections"] if context is not None else None
        reached = None
        if live.reached_via is not None:
            reached = {"upstream": live.reached_via, "primed": live.prime is not None}
            live.reached_via = None
        self._forward(message, turn_id=turn_id, context_sections=sections, reached=reached)

    def _take_context(self, live: Live) -> dict[str, Any] | None:
        """The hook context AGENT has not been sent yet, taken: exactly once per hook run
        (a later run's context replaces one never sent)."""
        run, live.starting = live.starting, None
        if run is not None and not run.done():
            live.starting = run  # (a prompt waits for the run first) left for the next one
        elif run is not None and not run.cancelled() and run.result():
            added = [(a.section, a.content) for a in run.result() or []]
            live.context = source.context_block(added) or live.context
        context, live.context = live.context, None
        if context is not None:
            live.context_sent = context
        return context

    # --- the person decides where a drifted session continues ------------------------------

    async def _confirm_drift(self, live: Live) -> bool:
        """Ask, in the prompt's turn (where every editor shows permission requests), as a
        tool call of its own: continue here, or send nothing. Continuing opens the thread
        with the drift accepted (a `drift_accepted` item); until then nothing was written
        and AGENT was not reached."""
        assert live.held is not None
        held = live.held
        summary = source.drift_summary(held.environment)
        call_id = f"sessiond-drift-{next(self._ids)}"
        text = (
            f"{summary}. Continue this session here, or send nothing? Nothing has been sent "
            "to the agent yet."
        )
        question = {  # no `kind`: editors then show it as a permission ("Permission: ...")
            "toolCallId": call_id,
            "title": f"Continue this session here? {summary}",
            "status": "pending",
            "content": [{"type": "content", "content": {"type": "text", "text": text}}],
        }
        mark = {"_meta": {"sessiond": {"notice": "drift"}}}
        self._notify(live.thread_id, {"sessionUpdate": "tool_call", **question, **mark})
        try:
            answer = await self._ask_editor(
                "session/request_permission",
                {"sessionId": live.thread_id, "toolCall": question, "options": DRIFT_OPTIONS},
            )
        except EditorGone:
            return False
        outcome = answer.get("outcome") if isinstance(answer, dict) else None
        outcome = outcome if isinstance(outcome, dict) else {}
        allowed = outcome.get("outcome") == "selected" and outcome.get("optionId") == DRIFT_CONTINUE
        status = "completed" if allowed else "failed"
        done = {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status}
        self._notify(live.thread_id, {**done, **mark})
        if not allowed:
            self._notice(
                live.thread_id,
                f"Not sent: {summary}. The session stays as it was recorded; send another "
                "message to be asked again, or start a new session here.",
                "drift",
            )
            return False
        self._open_thread(live.thread_id, held.cwd, {"mcpServers": live.mcp_servers}, accept=True)
        return True

    async def _ask_editor(self, method: str, params: dict[str, Any]) -> Any:
        """A request of the proxy's own to the editor; its answer, or EditorGone."""
        if self.stopping:
            raise EditorGone(method)
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._asked[request_id] = future
        self._send_editor({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return await future

    def _notify(self, thread_id: str, update: dict[str, Any]) -> None:
        self._send_editor(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": thread_id, "update": update},
            }
        )

    def _notice(self, thread_id: str, text: str, kind: str) -> None:
        """A message from sessiond itself, shown as an agent message (what every editor
        renders), marked `_meta.sessiond.notice`; never recorded, never replayed."""
        self._notify(
            thread_id,
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": f"\n\n[sessiond] {text}\n\n"},
                "_meta": {"sessiond": {"notice": kind}},
            },
        )
