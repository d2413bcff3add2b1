"""`sessiond acp -- AGENT [ARGS...]`: the ACP front door, a proxy that makes any ACP
agent's sessions durable in any ACP editor.

The editor launches this in place of AGENT and speaks ACP v1 to it on stdio (one JSON
message per line). It spawns AGENT and forwards every message both ways, untouched but for
the session id (the editor's `sessionId` IS the sessiond thread id; AGENT keeps its own)
and the JSON-RPC ids of requests (renumbered, so its own requests never collide with the
editor's or a restarted AGENT's). Recording is a side effect of forwarding: each
`session/update` is appended to the thread (written, not yet synced) before it is
forwarded; the items it implies come from `restore.sources.acp`, a pure module.

What this process answers itself is listed once, in `OWN_METHODS`: `session/list`,
`session/load`, `session/resume`, `session/close`, `session/delete` (and `session/fork`
when AGENT offers it). It also finishes the answers to `initialize` (capabilities),
`session/new` (the thread) and `session/prompt` (the turn's end, synced first: `group`
durability) before they go on.

Order: messages from each side are handled strictly in arrival order (`Lane`); a handler
that must wait (a load calling AGENT, a turn's end waiting for its sync) holds back later
messages from the same side only. The editor's answers to AGENT's requests never wait, so
a load cannot deadlock on a permission request.

Store access runs on the event loop thread (one process, one editor, small appends); only
the turn-end fdatasync runs on a thread. AGENT runs in its own process group with
PR_SET_PDEATHSIG, so it dies with this process even after a kill -9, and its whole group
is killed when this process exits any other way; what AGENT started (in its group or
not) is killed by the watchdog spawned at start when this process is gone, however it
ended (server/watchdog.py).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import itertools
import logging
import os
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import orjson

from protocol.errors import ErrorKind, ProtocolError
from restore.child_env import child_environment
from restore.sources import acp as source
from server.framing import Frame, FrameDecoder, FrameTooLarge
from server.watchdog import Watchdog

if TYPE_CHECKING:
    from restore.service import ThreadService
    from server.hooks import HookRun, LifecycleHooks

logger = logging.getLogger("sessiond.acp")

VERSION = "0.1.0"
LIST_PAGE = 50
HISTORY_LIMIT = 200
"""Messages a restored thread primes a new AGENT session with."""
STOP_GRACE = 2.0
"""Seconds AGENT gets to exit after its input closes before its process group is killed."""
EXIT_SETTLE = 0.2
"""After AGENT's process exits, how long its last output may still be arriving."""
MAX_BEFORE_BYTES = 16 * 1024 * 1024
"""A file larger than this is not read for its `file_edit` before-blob."""
PR_SET_PDEATHSIG = 1


class AgentGone(Exception):
    """AGENT exited before it answered a request of the proxy's own."""


class AgentRefused(Exception):
    """AGENT answered a request of the proxy's own with an error."""

    def __init__(self, error: Any) -> None:
        super().__init__(str(error))
        self.error = error


# --- ordering ------------------------------------------------------------------------------


class Lane:
    """Messages of one direction, handled strictly in arrival order.

    A handler returns None when done, or an awaitable: later messages then wait for it.
    Messages are handled at once while nothing waits, so the common path costs no task."""

    def __init__(self, handle: Callable[[Any], Awaitable[None] | None]) -> None:
        self._handle = handle
        self._backlog: collections.deque[Any] = collections.deque()
        self._waiting = False

    def push(self, message: Any) -> None:
        if self._waiting:
            self._backlog.append(message)
            return
        pending = self._run(message)
        if pending is not None:
            self._waiting = True
            asyncio.get_running_loop().create_task(self._drain(pending))

    def _run(self, message: Any) -> Awaitable[None] | None:
        try:
            return self._handle(message)
        except Exception:
            logger.exception("handling an ACP message failed")
            return None

    async def _drain(self, pending: Awaitable[None]) -> None:
        while True:
            try:
                await pending
            except Exception:
                logger.exception("handling an ACP message failed")
            while self._backlog:
                next_pending = self._run(self._backlog.popleft())
                if next_pending is not None:
                    pending = next_pending
                    break
            else:
                self._waiting = False
                return


# --- AGENT ---------------------------------------------------------------------------------


def _die_with_parent() -> Callable[[], None] | None:
    """A pre-exec function that makes the child get SIGKILL when this process dies (Linux).

    prctl is looked up before the fork: the child only calls it. If this process died
    before the call, the child would miss the signal: it checks its parent and exits."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def setup() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)

    return setup


class AgentProcess(asyncio.SubprocessProtocol):
    """AGENT: its stdout decoded into messages, its exit reported once."""

    def __init__(
        self, on_message: Callable[[AgentProcess, bytes], None], on_gone: Callable[..., None]
    ) -> None:
        self.decoder = FrameDecoder()
        self.transport: asyncio.SubprocessTransport | None = None
        self._on_message = on_message
        self._on_gone = on_gone
        self._stdout_closed = False
        self._exited = False
        self._reported = False

    @classmethod
    async def spawn(
        cls,
        argv: list[str],
        on_message: Callable[[AgentProcess, bytes], None],
        on_gone: Callable[..., None],
        watchdog: Watchdog | None = None,
    ) -> AgentProcess:
        loop = asyncio.get_running_loop()
        transport, agent = await loop.subprocess_exec(
            lambda: cls(on_message, on_gone),
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=None,  # AGENT's diagnostics go where ours go: the editor's log
            start_new_session=True,  # its own group: killpg reaches its children too
            preexec_fn=_die_with_parent(),
            env=watchdog.environment() if watchdog is not None else child_environment(),
        )
        agent.transport = transport
        pid = transport.get_pid()
        if watchdog is not None and pid is not None:
            watchdog.guard(pid)
        return agent

    @property
    def pid(self) -> int | None:
        return self.transport.get_pid() if self.transport else None

    @property
    def returncode(self) -> int | None:
        return self.transport.get_returncode() if self.transport else None

    def send(self, message: dict[str, Any]) -> None:
        if self.transport is None or self._reported:
            return
        pipe = self.transport.get_pipe_transport(0)
        if pipe is not None and not pipe.is_closing():
            pipe.write(orjson.dumps(message) + b"\n")

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd != 1:
            return
        for event in self.decoder.feed(data):
            if isinstance(event, Frame):
                self._on_message(self, event.body)
            elif isinstance(event, FrameTooLarge):
                logger.warning("AGENT sent a %d-byte message; dropped", event.size)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self._stdout_closed = True
            self._report()

    def process_exited(self) -> None:
        self._exited = True
        # Its output may still be in the pipe; a child it left behind may hold the pipe
        # open for ever: report once the pipe closes, or shortly after the exit.
        asyncio.get_running_loop().call_later(EXIT_SETTLE, self._report, True)
        self._report()

    def _report(self, settled: bool = False) -> None:
        if self._reported or not self._exited or not (self._stdout_closed or settled):
            return
        self._reported = True
        self._on_gone(self)

    def close_input(self) -> None:
        if self.transport is not None:
            pipe = self.transport.get_pipe_transport(0)
            if pipe is not None:
                pipe.close()

    def kill_group(self) -> None:
        """Kill AGENT and everything in its process group (safe to call any time)."""
        pid = self.pid  # its process group's id: even after AGENT exits, children it left
        if pid is not None:  # in the group keep the group alive, and are killed here
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    async def wait(self, timeout: float) -> bool:
        deadline = asyncio.get_running_loop().time() + timeout
        while self.returncode is None:
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True


# --- the proxy -----------------------------------------------------------------------------


@dataclass
class Live:
    """A thread this process has open: sessiond's session on it, and AGENT's."""

    thread_id: str
    session_id: str
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


@dataclass
class Downstream:
    """A request AGENT made of the editor, until the editor answers it."""

    method: str
    agent: AgentProcess
    agent_id: Any
    params: Any
    thread_id: str | None
    before: bytes | None = None


def _new_scope() -> str:
    return str(uuid.uuid4())


def _error(kind: ErrorKind, message: str, **details: Any) -> dict[str, Any]:
    return ProtocolError(kind, message, **details).to_error_object()


def _sessiond_meta(params: Any) -> dict[str, Any]:
    meta = params.get("_meta") if isinstance(params, dict) else None
    found = meta.get("sessiond") if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else {}


class AcpProxy:
    """Both directions of one editor ↔ AGENT connection, and the threads it records."""

    def __init__(
        self,
        home: Path,
        argv: list[str],
        write_editor: Callable[[bytes], None],
        store: str | None = None,
        watchdog: Watchdog | None = None,
    ):
        self.home = home
        self.watchdog = watchdog
        self.store_url = store
        """A `postgresql://` URL (`--store`, SESSIOND_STORE): record into the shared store."""
        self.argv = argv
        self.owner = f"acp:{os.getpid()}"
        self._write_editor = write_editor
        self._service: ThreadService | None = None
        self._hooks: LifecycleHooks | None = None
        self.agent: AgentProcess | None = None
        self.agent_capabilities: dict[str, Any] = {}
        self.initialize_params: dict[str, Any] | None = None
        self.client_info: dict[str, Any] | None = None
        self.live: dict[str, Live] = {}
        self.by_agent: dict[str, str] = {}  # AGENT session id -> thread id
        self.held_back: set[str] = set()  # AGENT sessions whose own load replay is dropped
        self._opening = 0  # AGENT sessions being created: their early updates wait
        self._early: list[dict[str, Any]] = []
        self.upstream: dict[int, Upstream] = {}
        self.downstream: dict[int, Downstream] = {}
        self._ids = itertools.count(1)
        self.editor_lane = Lane(self._from_editor)
        self.agent_lane = Lane(self._from_agent)
        self.stopping = False
        self._index_flush: asyncio.TimerHandle | None = None

    # --- lazily created parts (no warmup) -------------------------------------------------

    @property
    def service(self) -> ThreadService:
        """The store (embedded, or the shared one `--store` names), created by the first
        session method that needs it; a shared store connects with its first request."""
        if self._service is None:
            from restore.service import open_service
            from restore.stores import Settings
            from restore.stores.api import Durability

            settings = Settings(self.home, self.store_url, Durability.GROUP)
            self._service = open_service(settings)
        return self._service

    @property
    def hooks(self) -> LifecycleHooks:
        if self._hooks is None:
            from server.hooks import LifecycleHooks

            self._hooks = LifecycleHooks(_HookHost(self))
        return self._hooks

    # --- AGENT's lifetime -----------------------------------------------------------------

    async def start_agent(self) -> AgentProcess:
        """Spawn AGENT; when the editor initialized an earlier one, initialize it alike."""
        agent = await AgentProcess.spawn(
            self.argv, self._agent_bytes, self._agent_gone, self.watchdog
        )
        self.agent = agent
        if self.initialize_params is not None:
            result = await self._call("initialize", self.initialize_params)
            self.agent_capabilities = dict(result.get("agentCapabilities") or {})
        return agent

    async def _ensure_agent(self) -> AgentProcess:
        if self.agent is not None:
            return self.agent
        try:
            return await self.start_agent()
        except (OSError, AgentGone, AgentRefused) as exc:
            raise ProtocolError(
                ErrorKind.AGENT_EXITED, f"could not start the agent: {exc}", agentCommand=self.argv
            ) from exc

    def _agent_gone(self, agent: AgentProcess) -> None:
        self.agent_lane.push(("gone", agent))

    async def _after_agent_gone(self, agent: AgentProcess) -> None:
        """AGENT exited: every turn in flight ends (interrupted, synced) with an error the
        editor sees; the next prompt starts AGENT again and reopens its sessions."""
        current = self.agent is agent
        if current:
            self.agent = None
        code = agent.returncode
        for request_id, request in list(self.upstream.items()):
            if request.agent is not agent:
                continue
            del self.upstream[request_id]
            if request.future is not None:
                if not request.future.done():
                    request.future.set_exception(AgentGone(f"exit code {code}"))
                continue
            if request.method == "session/new":
                self._opening -= 1
            live = self.live.get(request.thread_id or "")
            if request.method == "session/prompt" and live is not None:
                ended = live.recorder.end_turn(
                    _new_scope(),
                    error=f"the agent exited (code {code})",
                    continue_reason="agent_exited",
                )
                self._record(live, ended)
            error = _error(
                ErrorKind.AGENT_EXITED,
                f"the agent exited (code {code}) before it answered; "
                "the next prompt starts it again",
                exitCode=code,
            )
            self._send_editor({"jsonrpc": "2.0", "id": request.editor_id, "error": error})
        for request_id, request in list(self.downstream.items()):
            if request.agent is agent:
                del self.downstream[request_id]
        if self._service is not None:
            await self._sync()
        if current:
            for live in self.live.values():
                if live.agent_session is not None:
                    live.previous_agent_session = live.agent_session
                live.agent_session = None
            self.by_agent.clear()
            self.held_back.clear()
        agent.kill_group()  # children it left behind
        if self.watchdog is not None and agent.pid is not None:
            self.watchdog.release(agent.pid)

    # --- bytes in -------------------------------------------------------------------------

    def editor_bytes(self, body: bytes) -> None:
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            error = _error(ErrorKind.PARSE_ERROR, f"not JSON: {exc}")
            self._send_editor({"jsonrpc": "2.0", "id": None, "error": error})
            return
        if not isinstance(message, dict):
            error = _error(ErrorKind.INVALID_REQUEST, "a message is a JSON object")
            self._send_editor({"jsonrpc": "2.0", "id": None, "error": error})
            return
        if "method" not in message:
            self._editor_answered(message)  # never waits behind a load: see the module doc
            return
        self.editor_lane.push(message)

    def _agent_bytes(self, agent: AgentProcess, body: bytes) -> None:
        if agent is not self.agent:
            return  # an AGENT that was replaced
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            logger.warning("AGENT wrote a line that is not JSON; dropped")
            return
        if isinstance(message, dict):
            self.agent_lane.push(message)

    # --- editor → AGENT -------------------------------------------------------------------

    def _from_editor(self, message: dict[str, Any]) -> Awaitable[None] | None:
        method = message["method"]
        if "id" in message:
            own = OWN_METHODS.get(method)
            if own is not None and (method != "session/fork" or self._agent_offers("fork")):
                return self._answering(message, own(self, message))
            if method == "session/prompt":
                return self._prompt(message)
            if self.agent is None:
                return self._answering(message, self._forward_after_restart(message))
        self._forward(message)
        return None

    async def _answering(
        self, message: dict[str, Any], work: Coroutine[Any, Any, dict[str, Any] | None]
    ) -> None:
        """Run an own method; its result (or typed error) is the editor's answer."""
        try:
            result = await work
        except ProtocolError as exc:
            self._send_editor(
                {"jsonrpc": "2.0", "id": message["id"], "error": exc.to_error_object()}
            )
            return
        if result is not None:
            self._send_editor({"jsonrpc": "2.0", "id": message["id"], "result": result})

    def _forward(self, message: dict[str, Any], **upstream: Any) -> None:
        """Send an editor message on to AGENT, with AGENT's session id in place of the
        thread id; a request is renumbered and remembered until AGENT answers it."""
        agent = self.agent
        params = message.get("params")
        thread_id = None
        if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
            live = self.live.get(params["sessionId"])
            if live is not None:
                thread_id = live.thread_id
                if live.agent_session is not None:
                    params = {**params, "sessionId": live.agent_session}
        if agent is None:
            return  # a notification to a dead AGENT (a request restarts it first)
        out = {**message, "params": params} if "params" in message else dict(message)
        if "id" in message:
            request_id = next(self._ids)
            self.upstream[request_id] = Upstream(
                message["method"],
                agent,
                params=message.get("params"),
                editor_id=message["id"],
                thread_id=thread_id,
                **upstream,
            )
            out["id"] = request_id
            if message["method"] == "initialize" and isinstance(params, dict):
                self.initialize_params = params
                info = params.get("clientInfo")
                self.client_info = info if isinstance(info, dict) else None
            elif message["method"] == "session/new":
                self._opening += 1
        agent.send(out)

    async def _forward_after_restart(self, message: dict[str, Any]) -> None:
        await self._ensure_agent()
        live = self._live_of(message.get("params"))
        if live is not None and live.agent_session is None:
            await self._reach_agent_session(live)
        self._forward(message)
        return None

    def _live_of(self, params: Any) -> Live | None:
        if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
            return self.live.get(params["sessionId"])
        return None

    def _prompt(self, message: dict[str, Any]) -> Awaitable[None] | None:
        live = self._live_of(message.get("params"))
        if live is None or self.agent is None or live.agent_session is None:
            return self._answering(message, self._prompt_after_reopen(message))
        if live.starting is not None and not live.starting.done():
            return self._answering(message, self._prompt_after_hooks(live, message))
        self._send_prompt(live, message)
        return None

    async def _prompt_after_hooks(self, live: Live, message: dict[str, Any]) -> None:
        """The session's SessionStart hooks are still running: their context belongs in
        this prompt, so it waits for them (each hook is bounded by its own timeout; a
        failed or timed-out hook adds nothing). Later editor messages wait too: order."""
        if live.starting is not None:
            await asyncio.wait({live.starting})
        self._send_prompt(live, message)

    async def _prompt_after_reopen(self, message: dict[str, Any]) -> None:
        """A prompt for a thread not open here (sessiond restarted under the editor) or
        whose AGENT exited: open the thread (drift-checked), start AGENT, reach its
        session again, then send the prompt."""
        params = message.get("params") or {}
        thread_id = params.get("sessionId")
        live = self.live.get(thread_id) if isinstance(thread_id, str) else None
        if live is None:
            live, _, _ = self._open_thread(
                str(thread_id),
                None,
                params,
                accept_drift=_sessiond_meta(params).get("acceptDrift") is True,
            )
        await self._ensure_agent()
        if live.agent_session is None:
            await self._reach_agent_session(live)
        await self._prompt_after_hooks(live, message)

    def _send_prompt(self, live: Live, message: dict[str, Any]) -> None:
        params = message.get("params") or {}
        prompt = params.get("prompt") if isinstance(params.get("prompt"), list) else []
        turn_id = str(uuid.uuid4())
        context = self._take_context(live)
        self._record(live, live.recorder.begin_turn(turn_id, prompt, context))
        leading = [live.prime] if live.prime is not None else []
        if context is not None:
            leading.append(context["block"])
        if leading:
            message = {**message, "params": {**params, "prompt": [*leading, *prompt]}}
        sections = context["sections"] if context is not None else None
        self._forward(message, turn_id=turn_id, context_sections=sections)

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

    def _editor_answered(self, message: dict[str, Any]) -> None:
        """The editor's answer to AGENT's request: recorded (permission outcomes, file
        writes), then sent on to the AGENT that asked, under its own id."""
        request = self.downstream.pop(message.get("id"), None)  # type: ignore[arg-type]
        if request is None:
            return
        live = self.live.get(request.thread_id or "")
        params = request.params if isinstance(request.params, dict) else {}
        if live is not None and request.method == "session/request_permission":
            self._record(
                live, live.recorder.permission(params, message.get("result"), message.get("error"))
            )
        elif live is not None and request.method == "fs/write_text_file" and "error" not in message:
            path, content = params.get("path"), params.get("content")
            if isinstance(path, str) and isinstance(content, str):
                self._record(live, live.recorder.file_write(path, request.before, content))
        if request.agent is self.agent:
            request.agent.send({**message, "id": request.agent_id})

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
        request = self.upstream.pop(message.get("id"), None)  # type: ignore[arg-type]
        if request is None:
            return None
        if request.release_hold is not None:
            self.held_back.discard(request.release_hold)  # its replay is over: later updates count
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
        params = message.get("params")
        agent_session = params.get("sessionId") if isinstance(params, dict) else None
        if agent_session in self.held_back:
            return  # AGENT replaying its own history for a load: the editor has sessiond's
        mapped, live = self._to_editor_session(message)
        if live is None:
            if self._opening > 0 and agent_session not in self.by_agent:
                self._early.append(message)  # its session/new answer is still on its way
                return
            self._send_editor(message)
            return
        self._record(live, live.recorder.update(mapped["params"]))
        self._send_editor(mapped)

    def _agent_request(self, message: dict[str, Any]) -> None:
        mapped, live = self._to_editor_session(message)
        params = mapped.get("params")
        before = None
        if (
            live is not None
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
        early, self._early = self._early, []
        for message in early:
            session = (message.get("params") or {}).get("sessionId")
            if session == agent_session or (self._opening == 0 and session not in self.by_agent):
                self._agent_update(message)
            else:
                self._early.append(message)

    # --- answers finished on their way back -----------------------------------------------

    def _initialized(self, request: Upstream, message: dict[str, Any]) -> None:
        result = message.get("result")
        if isinstance(result, dict):
            self.agent_capabilities = dict(result.get("agentCapabilities") or {})
            message = {**message, "result": source.advertise(result, VERSION)}
        self._answer_editor(request, message)

    def _session_created(self, request: Upstream, message: dict[str, Any]) -> None:
        """AGENT made a session: a thread for it, durable before the editor hears of it."""
        self._opening -= 1
        result = message.get("result")
        agent_session = result.get("sessionId") if isinstance(result, dict) else None
        params = request.params if isinstance(request.params, dict) else {}
        if not isinstance(agent_session, str) or not isinstance(params.get("cwd"), str):
            self._answer_editor(request, message)
            self._adopt_none()
            return
        try:
            started = self.service.start(
                cwd=params["cwd"],
                workspace_folder=None,
                client=self.client_info,
                owner=self.owner,
                origin={"agent": "acp", "sessionId": agent_session, "agentCommand": self.argv},
            )
        except ProtocolError as exc:
            self._send_editor(
                {"jsonrpc": "2.0", "id": request.editor_id, "error": exc.to_error_object()}
            )
            self._adopt_none()
            return
        thread_id = started.summary.threadId
        live = Live(
            thread_id,
            started.session_id,
            source.ThreadRecorder(_new_scope()),
            params["cwd"],
            params.get("mcpServers") or [],
            agent_session,
        )
        self.live[thread_id] = live
        recorded = live.recorder.agent_session(agent_session, "new", self.argv)
        self._record(live, recorded.add(live.recorder.session_state(result)))
        self._flush_index_soon()
        self.service.store.name_holder(thread_id, self.owner)
        self._answer_editor(request, {**message, "result": {**result, "sessionId": thread_id}})
        self._adopt(agent_session, thread_id)
        live.starting = self.hooks.session_started(
            _hook_client(self),
            thread_id=thread_id,
            session_id=live.session_id,
            source="startup",
            cwd=live.cwd,
            after_answer=False,
        )

    def _adopt_none(self) -> None:
        if self._opening == 0:
            early, self._early = self._early, []
            for message in early:
                self._send_editor(message)

    async def _turn_ended(self, request: Upstream, message: dict[str, Any]) -> None:
        """The prompt's answer: the turn's end is recorded and synced (group durability:
        one fdatasync for everything the turn wrote) before the editor hears it."""
        live = self.live.get(request.thread_id or "")
        if live is not None and live.recorder.turn_id == request.turn_id:
            result = message.get("result") if isinstance(message.get("result"), dict) else {}
            error = message.get("error")
            ended = live.recorder.end_turn(
                _new_scope(),
                stop_reason=result.get("stopReason"),
                usage=result.get("usage"),
                error=str(error.get("message")) if isinstance(error, dict) else None,
            )
            if error is None:
                live.prime = None  # AGENT has the history now
            self._record(live, ended)
            await self._sync()
            self._flush_index_soon()
        result = message.get("result")
        if request.context_sections and isinstance(result, dict):
            meta = dict(result.get("_meta") or {})
            meta["sessiond"] = {**(meta.get("sessiond") or {}), "context": request.context_sections}
            message = {**message, "result": {**result, "_meta": meta}}
        self._answer_editor(request, message)

    # --- the session methods sessiond answers itself --------------------------------------

    async def session_list(self, message: dict[str, Any]) -> dict[str, Any]:
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        cwd, cursor = params.get("cwd"), params.get("cursor")
        summaries, next_cursor = self.service.list(
            cwd=cwd if isinstance(cwd, str) else None,
            workspace_folder=None,
            archived=False,
            search=None,
            cursor=cursor if isinstance(cursor, str) else None,
            limit=LIST_PAGE,
        )
        result: dict[str, Any] = {
            "sessions": [source.session_info(s.thread_info()) for s in summaries]
        }
        if next_cursor:
            result["nextCursor"] = next_cursor
        return result

    async def session_load(self, message: dict[str, Any]) -> dict[str, Any]:
        return await self._reopen(message, replay=True)

    async def session_resume(self, message: dict[str, Any]) -> dict[str, Any]:
        return await self._reopen(message, replay=False)

    async def _reopen(self, message: dict[str, Any], *, replay: bool) -> dict[str, Any]:
        """load / resume: open the thread (drift-checked), replay it for a load, then reach
        AGENT's session by the best path AGENT offers; `_meta.sessiond` says which."""
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        thread_id = params.get("sessionId")
        if not isinstance(thread_id, str):
            raise ProtocolError(ErrorKind.INVALID_PARAMS, "sessionId is required")
        accept = _sessiond_meta(params).get("acceptDrift") is True
        live = self.live.get(thread_id)
        report: dict[str, Any] | None = None
        items: list[dict[str, Any]] = []
        if live is None:
            live, report, items = self._open_thread(
                thread_id, params.get("cwd"), params, accept_drift=accept
            )
        elif replay:
            items = self.service.store.read(thread_id)[0].items
        if isinstance(params.get("mcpServers"), list):
            live.mcp_servers = params["mcpServers"]
        if replay:
            for update in source.replay(items):
                self._send_editor(
                    {
                        "jsonrpc": "2.0",
                        "method": "session/update",
                        "params": {"sessionId": thread_id, **update},
                    }
                )
        await self._ensure_agent()
        if live.agent_session is None:
            via, result = await self._reach_agent_session(live)
        else:
            via, result = "live", {}
        result = {k: v for k, v in (result or {}).items() if k != "sessionId"}
        meta = dict(result.get("_meta") or {})
        meta["sessiond"] = {
            "upstream": via,
            "primed": live.prime is not None,
            "status": report["status"] if report else "ready",
            "drift": report["environment"]["drift"] if report else [],
            "continueReason": report.get("continueReason") if report else None,
        }
        return {**result, "_meta": meta}

    def _open_thread(
        self, thread_id: str, cwd: Any, params: dict[str, Any], *, accept_drift: bool
    ) -> tuple[Live, dict[str, Any], list[dict[str, Any]]]:
        """Resume the thread in the store (a new session; drift refused unless accepted),
        finish a turn a crash cut short, and remember how to reach AGENT's session."""
        report = self.service.resume(
            thread_id,
            cwd=cwd if isinstance(cwd, str) else None,
            accept_drift=accept_drift,
            message_limit=HISTORY_LIMIT,
            owner=self.owner,
        )
        if report.get("readOnly"):  # no session on a read-only data directory: not drift
            raise self.service.home.refuse_write()
        if report["status"] != "ready":
            drift = report["environment"]["drift"]
            fields = ", ".join(d["field"] for d in drift if d.get("severity") == "block")
            raise ProtocolError(
                ErrorKind.WORKSPACE_DRIFT,
                f"the session was recorded elsewhere ({fields}); load it with "
                "_meta.sessiond.acceptDrift to continue here anyway",
                threadId=thread_id,
                drift=drift,
            )
        if report.get("handoff") is not None or report["session"]["sessionId"] is None:
            # An imported Claude Code / Codex session: its own agent keeps it (and the
            # importer keeps appending to it), so sessiond opens no session to write into.
            raise ProtocolError(
                ErrorKind.INVALID_PARAMS,
                "this session was imported from another agent: continue it there",
                threadId=thread_id,
                handoff=report.get("handoff"),
            )
        thread_id = report["thread"]["threadId"]
        session_id = report["session"]["sessionId"]
        self.service.store.name_holder(thread_id, self.owner)
        items = self.service.store.read(thread_id)[0].items
        scope = _new_scope()
        recovered = source.recover(items, scope)
        recorder = source.ThreadRecorder.continuing(items, scope)
        cwd = report["environment"]["current"].get("cwd") or "/"
        live = Live(thread_id, session_id, recorder, cwd, params.get("mcpServers") or [])
        live.previous_agent_session = _agent_session_of(items)
        self.live[thread_id] = live
        if recovered.items:
            self._record(live, recovered)
            items = self.service.store.read(thread_id)[0].items
        live.starting = self.hooks.session_started(
            _hook_client(self),
            thread_id=thread_id,
            session_id=session_id,
            source="resume",
            cwd=cwd,
            previous_session_id=report["session"]["resumedFrom"],
            after_answer=False,
        )
        return live, report, items

    async def _reach_agent_session(self, live: Live) -> tuple[str, dict[str, Any]]:
        """AGENT's session for the thread again: its session/resume, else its session/load
        with its replay held back, else a new session primed with the history."""
        previous = live.previous_agent_session
        paths = source.upstream_paths(self.agent_capabilities) if previous else ["new"]
        base = {"cwd": live.cwd, "mcpServers": live.mcp_servers}
        result: Any = None
        via = "new"
        for via in paths:
            try:
                if via == "resume":
                    result = await self._call("session/resume", {**base, "sessionId": previous})
                elif via == "load":
                    self.held_back.add(str(previous))
                    result = await self._call(
                        "session/load", {**base, "sessionId": previous}, release_hold=str(previous)
                    )
                else:
                    self._opening += 1
                    try:
                        result = await self._call("session/new", base)
                    finally:
                        self._opening -= 1
                break
            except AgentRefused as exc:
                logger.info("AGENT refused session/%s: %s; trying the next way", via, exc.error)
                if via == "new":
                    raise ProtocolError(
                        ErrorKind.AGENT_EXITED, f"the agent refused a new session: {exc.error}"
                    ) from exc
            except AgentGone as exc:
                raise ProtocolError(
                    ErrorKind.AGENT_EXITED, f"the agent exited while reopening the session ({exc})"
                ) from exc
        result = result if isinstance(result, dict) else {}
        agent_session = result.get("sessionId") if via == "new" else previous
        if not isinstance(agent_session, str):
            raise ProtocolError(ErrorKind.AGENT_EXITED, "the agent answered without a session id")
        if via == "new":
            live.prime = source.priming_block(self._history(live))
            if live.context is None:
                live.context = live.context_sent  # the lost AGENT session had it
        recorded = live.recorder.agent_session(agent_session, via, self.argv)
        self._record(live, recorded.add(live.recorder.session_state(result)))
        live.agent_session = agent_session
        self._adopt(agent_session, live.thread_id)
        return via, result

    def _history(self, live: Live) -> list[dict[str, Any]]:
        """The thread's newest messages since its boundary, as recorded so far (a thread
        started here has them too, when AGENT died and cannot resume)."""
        from restore.engine.subsystems import messages as messages_subsystem

        session = self.service.session_for(live.thread_id, live.session_id, self.owner)
        # The state keeps the messages' seqs, not their bodies.
        newest = set(messages_subsystem.newest(session.state.states["messages"], HISTORY_LIMIT))
        items = self.service.store.read(live.thread_id)[0].items
        return [item for item in items if item.get("seq") in newest]

    async def session_close(self, message: dict[str, Any]) -> dict[str, Any]:
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        live = self.live.get(str(params.get("sessionId")))
        if live is not None:
            await self._close_live(live)
            self.hooks.session_ended(
                _hook_client(self),
                thread_id=live.thread_id,
                session_id=live.session_id,
                reason="close",
                after_answer=False,
            )
        return {}

    async def _close_live(self, live: Live) -> None:
        """End sessiond's session on the thread, and AGENT's if AGENT can close one."""
        del self.live[live.thread_id]
        if live.agent_session is not None:
            self.by_agent.pop(live.agent_session, None)
            if self._agent_offers("close"):
                with contextlib.suppress(AgentRefused, AgentGone):
                    await self._call("session/close", {"sessionId": live.agent_session})
        self.service.close(live.thread_id, live.session_id, self.owner)

    async def session_delete(self, message: dict[str, Any]) -> dict[str, Any]:
        """The thread is archived, not deleted: it leaves `session/list`, but `sessiond
        list --archived` still shows it and `thread/unarchive` brings it back."""
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        thread_id = params.get("sessionId")
        if not isinstance(thread_id, str):
            raise ProtocolError(ErrorKind.INVALID_PARAMS, "sessionId is required")
        live = self.live.get(thread_id)
        agent_session = live.agent_session if live else None
        if live is not None:
            await self._close_live(live)
        elif (located := self._locate(thread_id)) is not None:
            agent_session = _agent_session_of(self.service.store.read(located)[0].items)
        try:
            self.service.archive(thread_id, True, self.owner)
        except ProtocolError as exc:
            if exc.kind not in (ErrorKind.THREAD_NOT_FOUND, ErrorKind.INVALID_ID):
                raise
            return {}  # deleting what is not there succeeds (ACP: SHOULD)
        if agent_session is not None and self._agent_offers("delete"):
            with contextlib.suppress(AgentRefused, AgentGone, ProtocolError):
                await self._ensure_agent()
                await self._call("session/delete", {"sessionId": agent_session})
        return {}

    async def session_fork(self, message: dict[str, Any]) -> dict[str, Any]:
        """(Unstable, only when AGENT offers it.) A new thread with the history so far, and
        AGENT's own fork of its session."""
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        live = self.live.get(str(params.get("sessionId")))
        if live is None:
            raise ProtocolError(ErrorKind.STALE_SESSION, "load or resume the session first")
        await self._ensure_agent()
        if live.agent_session is None:
            await self._reach_agent_session(live)
        upstream = {**params, "sessionId": live.agent_session}
        try:
            result = await self._call("session/fork", upstream)
        except (AgentRefused, AgentGone) as exc:
            raise ProtocolError(ErrorKind.AGENT_EXITED, f"the agent could not fork: {exc}") from exc
        agent_session = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(agent_session, str):
            raise ProtocolError(ErrorKind.AGENT_EXITED, "the agent's fork has no session id")
        started = self.service.fork(live.thread_id, at_turn_id=None, at_seq=None, owner=self.owner)
        thread_id = started.summary.threadId
        fork = Live(
            thread_id,
            started.session_id,
            source.ThreadRecorder(_new_scope()),
            str(params.get("cwd") or live.cwd),
            params.get("mcpServers") or [],
            agent_session,
        )
        self.live[thread_id] = fork
        self._record(fork, fork.recorder.agent_session(agent_session, "new", self.argv))
        self._flush_index_soon()
        self._adopt(agent_session, thread_id)
        return {**result, "sessionId": thread_id}

    # --- helpers --------------------------------------------------------------------------

    def _agent_offers(self, capability: str) -> bool:
        sessions = self.agent_capabilities.get("sessionCapabilities")
        return isinstance(sessions, dict) and sessions.get(capability) is not None

    def _locate(self, thread_id: str) -> str | None:
        try:
            from restore.ids import validate_thread_id

            thread_id = validate_thread_id(thread_id)
        except ProtocolError:
            return None
        return thread_id if self.service.store.exists(thread_id) else None

    async def _call(self, method: str, params: Any, *, release_hold: str | None = None) -> Any:
        """A request of the proxy's own to AGENT; AgentRefused / AgentGone on failure."""
        agent = self.agent
        if agent is None:
            raise AgentGone("not running")
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.upstream[request_id] = Upstream(
            method, agent, params=params, future=future, release_hold=release_hold
        )
        agent.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return await future

    def _record(self, live: Live, recorded: source.Recorded) -> None:
        """Blobs first, then the items, written but not synced (the turn's end syncs).
        A failure is logged and forwarding goes on: the editor must keep working."""
        if not recorded.items:
            return
        try:
            for data in recorded.blobs.values():
                self.service.store.put_blob(data)
            self.service.record(
                live.thread_id, live.session_id, recorded.items, self.owner, defer_sync=True
            )
        except (ProtocolError, OSError) as exc:
            logger.error("could not record in thread %s: %s", live.thread_id, exc)

    def _flush_index_soon(self) -> None:
        """Other processes (`sessiond serve`, `sessiond list`) see the thread's new row
        within about a second; never on the critical path of an answer."""
        if self._index_flush is None:
            from restore.stores.api import FLUSH_SECONDS as INDEX_FLUSH_SECONDS

            loop = asyncio.get_running_loop()
            self._index_flush = loop.call_later(INDEX_FLUSH_SECONDS, self._flush_index)

    def _flush_index(self) -> None:
        self._index_flush = None
        if self._service is not None:
            try:
                self._service.flush_index()
            except Exception as exc:  # the index is derived: a failure costs a stale row
                logger.warning("could not update the thread index: %s", exc)

    async def _sync(self) -> None:
        try:
            sync = self.service.begin_commit()  # a shared store commits here
            if sync is not None:
                await asyncio.to_thread(sync)
        except ProtocolError as exc:
            logger.error("could not make the records durable: %s", exc)

    def _send_editor(self, message: dict[str, Any]) -> None:
        if not self.stopping:
            self._write_editor(orjson.dumps(message) + b"\n")

    # --- the end --------------------------------------------------------------------------

    async def stop(self) -> None:
        """The editor went away (or a signal came): AGENT gets its input closed and a short
        grace, then its whole process group is killed; every session ends, recorded."""
        self.stopping = True
        agent = self.agent
        if agent is not None:
            agent.close_input()
            if not await agent.wait(STOP_GRACE):
                agent.kill_group()
                await agent.wait(STOP_GRACE)
            agent.kill_group()
            await self._after_agent_gone(agent)
        if self._service is not None:
            released = self.service.release_owner(self.owner, "disconnect")
            for thread_id in released:
                live = self.live.pop(thread_id, None)
                if live is not None and self._hooks is not None:
                    self._hooks.session_ended(
                        _hook_client(self),
                        thread_id=thread_id,
                        session_id=live.session_id,
                        reason="disconnect",
                        after_answer=False,
                    )
        if self._hooks is not None:
            await self._hooks.stop()

    def close(self) -> None:
        if self.agent is not None:
            self.agent.kill_group()
        if self._hooks is not None:
            self._hooks.kill_all()
        if self._service is not None:
            service, self._service = self._service, None
            service.close_all()


OWN_METHODS: dict[str, Callable[[AcpProxy, dict[str, Any]], Coroutine[Any, Any, Any]]] = {
    "session/list": AcpProxy.session_list,
    "session/load": AcpProxy.session_load,
    "session/resume": AcpProxy.session_resume,
    "session/close": AcpProxy.session_close,
    "session/delete": AcpProxy.session_delete,
    "session/fork": AcpProxy.session_fork,  # unstable: only when AGENT offers it
}
"""The ACP methods sessiond answers itself; everything else goes to AGENT."""

ANSWER_FINISHERS: dict[str, Callable[[AcpProxy, Upstream, dict[str, Any]], Any]] = {
    "initialize": AcpProxy._initialized,
    "session/new": AcpProxy._session_created,
    "session/prompt": AcpProxy._turn_ended,
}
"""AGENT's answers sessiond completes before the editor gets them."""


def _agent_session_of(items: list[dict[str, Any]]) -> str | None:
    """AGENT's session the thread talked to last."""
    for item in reversed(items):
        if item.get("type") == "acp_session" and isinstance(item.get("agentSessionId"), str):
            return str(item["agentSessionId"])
    for item in items:
        origin = item.get("origin") if item.get("type") == "session_meta" else None
        if isinstance(origin, dict) and origin.get("agent") == "acp":
            session = origin.get("sessionId")
            return session if isinstance(session, str) else None
    return None


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


# --- hooks ---------------------------------------------------------------------------------


class _HookHost:
    """What lifecycle hooks need of a server, for the proxy: the store (used in place, on
    the loop thread) and nobody to broadcast `lifecycle/hook` to (ACP has no such
    notification; the runs are recorded in the thread)."""

    def __init__(self, proxy: AcpProxy) -> None:
        self._proxy = proxy

    @property
    def service(self) -> ThreadService:
        return self._proxy.service

    async def run_in_worker(self, work: Callable[..., Any], *args: Any) -> Any:
        return work(*args)

    def broadcast(self, method: str, params: Any) -> None:
        return None


def _hook_client(proxy: AcpProxy) -> Any:
    """The hook's view of the client: ACP has no trusted workspace folders, so only
    user-level hooks (and entry points) run for ACP sessions."""
    return SimpleNamespace(
        connection=SimpleNamespace(owner=proxy.owner, workspace_folders=[]),
        service=proxy.service,
        workspace_folder_of=lambda cwd: None,
    )


# --- the process ---------------------------------------------------------------------------


async def serve(
    home: Path, argv: list[str], store: str | None = None, watchdog: Watchdog | None = None
) -> int:
    """Proxy the editor on stdin/stdout to AGENT until either side ends."""
    from server.pipes import BatchedOutput, read_input

    loop = asyncio.get_running_loop()
    ended = asyncio.Event()
    output = BatchedOutput(sys.stdout.buffer, ended.set)
    proxy = AcpProxy(home, argv, output.write, store, watchdog)
    try:
        await proxy.start_agent()
    except OSError as exc:
        print(f"sessiond acp: cannot start {argv[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, ended.set)
    decoder = FrameDecoder()

    def feed(chunk: bytes) -> None:
        for event in decoder.feed(chunk):
            if isinstance(event, Frame):
                proxy.editor_bytes(event.body)
            elif isinstance(event, FrameTooLarge):
                error = _error(ErrorKind.PAYLOAD_TOO_LARGE, f"message of {event.size} bytes")
                proxy._send_editor({"jsonrpc": "2.0", "id": None, "error": error})

    try:
        await read_input(sys.stdin.buffer, feed, ended)
        await ended.wait()
        output.flush()
        await proxy.stop()
    finally:
        proxy.close()
    return 0


def main(home: Path, argv: list[str], store: str | None = None) -> int:
    if not argv:
        print(
            "sessiond acp: name the agent to run: sessiond acp -- AGENT [ARGS...]", file=sys.stderr
        )
        return 2
    watchdog = Watchdog.start() if os.name == "posix" else None  # server/watchdog.py
    return asyncio.run(serve(home, argv, store, watchdog))
