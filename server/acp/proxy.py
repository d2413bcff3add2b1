"""`sessiond acp -- AGENT [ARGS...]`: the ACP front door, a proxy that makes any ACP
agent's sessions durable in any ACP editor.

The editor launches this in place of AGENT and speaks ACP v1 to it on stdio (one JSON
message per line). It spawns AGENT and forwards every message both ways, untouched but for
the session id (the editor's `sessionId` IS the sessiond thread id; AGENT keeps its own),
the JSON-RPC ids of requests (renumbered, so its own requests never collide with the
editor's or a restarted AGENT's); a native sub-agent session AGENT announces is a child
thread of its own, named to the editor by its thread id (server/acp/subagents.py).
Recording is a side effect of forwarding (server/acp/recording.py): each `session/update`
is appended to the thread (written, not yet synced) before it is forwarded; the items it
implies come from `restore.sources.acp`, a pure package. What either side sends is checked
as it arrives (server/acp/checks.py): a line that is not a JSON object, nests too deep or
has params of the wrong shape is answered or refused there.

What this process answers itself (server/acp/sessions.py) is listed once, in
`OWN_METHODS`: `session/list`, `session/load`, `session/resume`, `session/close`,
`session/delete` (and `session/fork` when AGENT offers it). It also finishes the answers
to `initialize` (capabilities), `session/new` (the session id) and `session/prompt` (the
turn's end, synced first: `group` durability) before they go on.

Editors that know nothing of sessiond get everything through what every ACP editor
renders already:
- a session's thread is written at its first prompt, so a chat opened only to pick
  another session leaves nothing behind (`session/new` only names the thread);
- `session/load` answers from sessiond's own record (the replay, the modes and models last
  shown) and reaches AGENT's session in the background: the first prompt waits for it;
- a session recorded elsewhere (another branch, worktree, directory) loads, replayed, with
  a notice; its first prompt asks the person, as a `session/request_permission`, whether
  to continue here, and nothing reaches AGENT before they say so (`_meta.sessiond.
  acceptDrift` true skips the question, false asks for the typed `WorkspaceDrift` error);
- a record that fails (a full disk) is said so at once, and the turn's answer is an error:
  nothing is shown as recorded that is not.

Order: messages from each side are handled strictly in arrival order (`Lane`); a handler
that must wait (a prompt waiting for AGENT's session, a turn's end waiting for its sync)
holds back later messages from the same side only. The editor's answers to AGENT's
requests (and to the proxy's own) never wait, so nothing can deadlock on a permission
request.

Store access runs on the event loop thread (one process, one editor, small appends); only
the turn-end fdatasync runs on a thread. AGENT runs in its own process group with
PR_SET_PDEATHSIG, so it dies with this process even after a kill -9, and its whole group
is killed when this process exits any other way; what AGENT started (in its group or
not) is killed by the watchdog spawned at start when this process is gone, however it
ended (server/processes/watchdog.py).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from protocol import json_text
from protocol.errors import ErrorKind, ProtocolError
from server import compose
from server.acp.agent import AgentGone, AgentProcess, AgentRefused, EditorGone
from server.acp.checks import (
    MAX_DEPTH,
    canonical_session_id,
    cut_deep,
    cwd_of,
    depth_over,
    mcp_servers_of,
    params_of,
    preview,
    too_deep,
)
from server.acp.from_agent import FromAgent
from server.acp.ordering import Lane
from server.acp.prompts import Prompts
from server.acp.recording import Recording
from server.acp.sessions import LocalSessions
from server.acp.state import (
    Downstream,
    Live,
    Upstream,
    error_object,
    new_scope,
)
from server.acp.subagents import Subagents
from server.index_flush import IndexFlush
from server.processes.watchdog import Watchdog

if TYPE_CHECKING:
    from restore.service import ThreadService
    from restore.stores.api import Pages
    from server.hooks.lifecycle import LifecycleHooks
    from server.host import Client, Host, Notice

T = TypeVar("T")

logger = logging.getLogger("sessiond.acp")

STOP_GRACE = 2.0
"""Seconds AGENT gets to exit after its input closes before its process group is killed."""


# --- the proxy -----------------------------------------------------------------------------


class AcpProxy(LocalSessions, Prompts, FromAgent, Recording, Subagents):
    """Both directions of one editor ↔ AGENT connection, and the threads it records."""

    def __init__(
        self,
        home: Path,
        argv: list[str],
        write_editor: Callable[[bytes], None],
        store: str | None = None,
        watchdog: Watchdog | None = None,
        redaction: str | None = None,
    ):
        self.home = home
        self.redaction = redaction
        """off | default | strict (`--redaction`); None: SESSIOND_REDACT, else the home's
        redaction.toml."""
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
        self.closed: set[str] = set()
        """Threads the editor closed here: a prompt does not silently reopen them."""
        self.by_agent: dict[str, str] = {}  # AGENT session id -> thread id
        self.replaying: dict[str, list[tuple[str, str]]] = {}
        """AGENT sessions replaying their history for a load of the proxy's: held back
        from the editor (it has sessiond's), their texts kept for `source.lost_turns`."""
        self.replayed: dict[str, list[tuple[str, str]]] = {}
        self.loading: collections.Counter[str] = collections.Counter()
        """AGENT's loads in flight per AGENT session: its replays are held back until the
        last one ends (a session closed and loaded again while AGENT still loads it for
        the first: the first load's end must not let the second's replay through)."""
        self._opening = 0  # AGENT sessions being created: their early updates wait
        self._early: collections.deque[tuple[dict[str, Any], int]] = collections.deque()
        self._early_bytes = 0
        self._early_dropped = 0
        self.upstream: dict[int, Upstream] = {}
        self.downstream: dict[int, Downstream] = {}
        self._asked: dict[int, asyncio.Future[Any]] = {}  # the proxy's own editor requests
        self._ids = itertools.count(1)
        self.editor_lane = Lane(self._from_editor)
        self.agent_lane = Lane(self._from_agent)
        self.stopping = False
        self._index_flush = IndexFlush(self._flush_index)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.workspace_folders: list[dict[str, Any]] = []
        """Empty: an ACP editor names no workspace folders, so only user-level hooks (and
        entry points) run for its sessions."""
        self._batches: dict[str, tuple[Live, list[dict[str, Any]]]] = {}
        self._batch_scheduled = False

    # --- lazily created parts (no warmup) -------------------------------------------------

    @property
    def service(self) -> ThreadService:
        """The store (embedded, or the shared one `--store` names), created by the first
        session method that needs it; a shared store connects with its first request."""
        if self._service is None:
            self._service = compose.thread_service(
                compose.settings(self.home, self.store_url, "group", self.redaction)
            )
        return self._service

    # --- the host interface (server/host.py): what the lifecycle hooks use --------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    @property
    def pages(self) -> Pages:
        return self.service.store.pages

    async def run_in_worker(self, work: Callable[..., T], *args: Any) -> T:
        """In place: the proxy's store work runs on the loop thread (one editor, small
        appends); only the turn-end sync runs on a thread."""
        return work(*args)

    async def run_between_requests(self, work: Callable[..., T], *args: Any) -> T:
        return work(*args)

    async def run_reader(self, work: Callable[[], T]) -> T:
        return work()

    def broadcast(self, method: str, params: Any) -> None:
        """ACP has no notification for other clients (`lifecycle/hook` runs are recorded
        in the thread instead)."""

    def announce_threads(
        self,
        notices: list[Notice],
        parents: Iterable[str | None] = (),
        then: Callable[[], None] | None = None,
    ) -> asyncio.Future[None]:
        """Nobody to tell: an ACP editor learns of sessions by asking (`session/list`)."""
        if then is not None:
            then()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    @property
    def hooks(self) -> LifecycleHooks:
        if self._hooks is None:
            self._hooks = compose.lifecycle_hooks(self)
        return self._hooks

    # --- AGENT's lifetime -----------------------------------------------------------------

    async def start_agent(self) -> AgentProcess:
        """Spawn AGENT; when the editor initialized an earlier one, initialize it alike."""
        self._loop = asyncio.get_running_loop()
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
        """AGENT exited: every turn in flight ends (interrupted, synced; its open tool
        calls closed) with an error the editor sees; the next prompt starts AGENT again and
        reopens its sessions."""
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
                self._release_held(live)
                ended = live.recorder.end_turn(
                    new_scope(),
                    error=f"the agent exited (code {code})",
                    continue_reason="agent_exited",
                )
                self._record(live, ended)
                self._show(live, ended)
                self._send_queued(live)  # it starts AGENT again, as any next prompt does
            error = error_object(
                ErrorKind.AGENT_EXITED,
                f"the agent exited (code {code}) before it answered; "
                "the next prompt starts it again",
                exitCode=code,
            )
            self._send_editor({"jsonrpc": "2.0", "id": request.editor_id, "error": error})
        for request_id, asked in list(self.downstream.items()):
            if asked.agent is agent:
                del self.downstream[request_id]
        if self._service is not None:
            await self._sync()
        if current:
            for live in self.live.values():
                self._release_held(live)  # between turns: its message ended with it
                if live.agent_session is not None:
                    live.previous_agent_session = live.agent_session
                live.agent_session = None
            self.by_agent.clear()
            self.replaying.clear()
            self.loading.clear()
        agent.kill_group()  # children it left behind
        if self.watchdog is not None and agent.pid is not None:
            self.watchdog.release(agent.pid)

    # --- bytes in -------------------------------------------------------------------------

    def editor_bytes(self, body: bytes) -> None:
        """One line from the editor: a request or notification goes into the editor's
        lane; anything else is answered here (JSON-RPC: a parse error has id null)."""
        try:  # a lone surrogate escape (Node's JSON.stringify) is U+FFFD, not an error
            message, _ = json_text.loads(body)
        except orjson.JSONDecodeError as exc:
            logger.warning(
                "the editor sent a line that is not JSON (%s): %s", exc, self._preview(body)
            )
            self._answer_error(None, ProtocolError(ErrorKind.PARSE_ERROR, f"not JSON: {exc}"))
            return
        if not isinstance(message, dict):
            logger.warning("the editor sent JSON that is not a message: %s", self._preview(body))
            error = ProtocolError(ErrorKind.INVALID_REQUEST, "a message is one JSON object")
            self._answer_error(None, error)
            return
        depth = depth_over(body, message)
        if depth is not None:
            logger.warning("the editor sent a message %d levels deep; refused", depth)
            if "method" in message:
                if "id" in message:
                    self._answer_error(message.get("id"), too_deep(depth))
            else:  # its answer to AGENT's request: AGENT gets the error instead
                self._refuse_editor_answer(message, too_deep(depth))
            return
        if "method" not in message:
            self._editor_answered(message)  # never waits behind a load: see the module doc
            return
        if not isinstance(message["method"], str):
            if "id" in message:
                error = ProtocolError(ErrorKind.INVALID_REQUEST, "method must be a string")
                self._answer_error(message.get("id"), error)
            return
        self.editor_lane.push(message)

    def _preview(self, body: bytes) -> str:
        """A refused line as the log shows it: redacted with the store's redactor (made
        now if no session made it yet), or only its length if there is none."""
        try:
            redactor = self.service.store.redactor
        except (ProtocolError, OSError):  # no store to be had: say nothing of the line
            redactor = None
        return preview(body, redactor)

    def _agent_bytes(self, agent: AgentProcess, body: bytes) -> None:
        if agent is not self.agent:
            return  # an AGENT that was replaced
        try:  # a lone surrogate (a Node agent's cut emoji) is U+FFFD: the update is shown
            message, _ = json_text.loads(body)
        except orjson.JSONDecodeError:
            logger.warning("AGENT wrote a line that is not JSON; dropped: %s", self._preview(body))
            return
        if not isinstance(message, dict):
            shown = self._preview(body)
            logger.warning("AGENT wrote JSON that is not a message; dropped: %s", shown)
            return
        depth = depth_over(body, message)
        if depth is not None:
            logger.warning(
                "AGENT sent a message %d levels deep; what lies below %d levels is cut",
                depth,
                MAX_DEPTH,
            )
            message = cut_deep(message)
        self.agent_lane.push(message)

    # --- editor → AGENT -------------------------------------------------------------------

    def _from_editor(self, message: dict[str, Any]) -> Awaitable[None] | None:
        method = message["method"]
        if "id" not in message:
            return self._editor_notification(message)
        own = OWN_METHODS.get(method)
        if own is not None:
            return self._answering(message, own(self, message))
        if method == "session/prompt":
            return self._prompt(message)
        try:
            params = params_of(message)
            if method == "session/new":
                self._check_new_session(params)
        except ProtocolError as exc:
            self._answer_error(message["id"], exc)
            return None
        live = self._live_of(params)
        if method == STEER_METHOD and live is not None:
            self._steered(live, params)
        if self.agent is None or (live is not None and not live.ready_for_agent()):
            return self._answering(message, self._forward_when_ready(message, live))
        self._forward(message)
        return None

    def _editor_notification(self, message: dict[str, Any]) -> Awaitable[None] | None:
        """`session/cancel` and the like: to AGENT's session, once there is one (a held
        session has none: there is nothing to cancel)."""
        live = self._live_of(message.get("params"))
        if live is not None and message["method"] == "session/cancel":
            for answer in live.drop_queued():  # the cancel is for them too
                self._send_editor(answer)
        if live is not None and live.held is not None:
            return None
        if live is not None and live.reaching is not None:
            return self._forward_after(live.reaching, message)
        self._forward(message)
        return None

    async def _forward_after(self, reaching: asyncio.Task[None], message: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):
            await asyncio.shield(reaching)
        self._forward(message)

    def _check_new_session(self, params: dict[str, Any]) -> None:
        """`session/new` is checked before AGENT sees it: an absolute, existing cwd (ACP:
        MUST be absolute; a relative one would be AGENT's working directory's)."""
        cwd_of(params, required=True)
        mcp_servers_of(params)

    async def _answering(
        self, message: dict[str, Any], work: Coroutine[Any, Any, dict[str, Any] | None]
    ) -> None:
        """Run an own method; its result (or typed error) is the editor's answer."""
        try:
            result = await work
        except ProtocolError as exc:
            self._answer_error(message["id"], exc)
            return
        if result is not None:
            self._send_editor({"jsonrpc": "2.0", "id": message["id"], "result": result})

    def _answer_error(self, request_id: Any, exc: ProtocolError) -> None:
        self._send_editor({"jsonrpc": "2.0", "id": request_id, "error": exc.to_error_object()})

    def _forward(self, message: dict[str, Any], **upstream: Any) -> None:
        """Send an editor message on to AGENT, with AGENT's session id in place of the
        thread id; a request is renumbered and remembered until AGENT answers it."""
        agent = self.agent
        params: Any = message.get("params")
        thread_id = None
        live = self._live_of(params)
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

    async def _forward_when_ready(self, message: dict[str, Any], live: Live | None) -> None:
        """A request that needs AGENT (restarted) or AGENT's session (being reached)."""
        if live is not None and live.held is not None:
            raise ProtocolError(
                ErrorKind.WORKSPACE_DRIFT,
                "this session was recorded elsewhere: send a prompt to decide where it continues",
                threadId=live.thread_id,
                drift=live.held.environment.get("drift"),
            )
        await self._ensure_agent()
        if live is not None:
            await self._agent_session_ready(live)
        self._forward(message)
        return None

    def _live_of(self, params: Any) -> Live | None:
        if isinstance(params, dict):
            thread_id = canonical_session_id(params.get("sessionId"))
            if thread_id is not None:
                return self.live.get(thread_id)
        return None

    # --- the editor answers ---------------------------------------------------------------

    def _editor_answered(self, message: dict[str, Any]) -> None:
        """The editor's answer to AGENT's request: recorded (permission outcomes, file
        writes), then sent on to the AGENT that asked, under its own id. An answer to the
        proxy's own request completes it."""
        asked = self._asked.pop(message.get("id"), None)  # type: ignore[arg-type]
        if asked is not None:
            if not asked.done():
                asked.set_result(message.get("result") if "error" not in message else None)
            return
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

    def _refuse_editor_answer(self, message: dict[str, Any], exc: ProtocolError) -> None:
        request = self.downstream.pop(message.get("id"), None)  # type: ignore[arg-type]
        if request is not None and request.agent is self.agent:
            error = {"jsonrpc": "2.0", "id": request.agent_id, "error": exc.to_error_object()}
            request.agent.send(error)

    # --- helpers --------------------------------------------------------------------------

    def _agent_offers(self, capability: str) -> bool:
        sessions = self.agent_capabilities.get("sessionCapabilities")
        return isinstance(sessions, dict) and sessions.get(capability) is not None

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

    def _send_editor(self, message: dict[str, Any]) -> None:
        if not self.stopping:
            self._write_editor(orjson.dumps(message) + b"\n")

    # --- the end --------------------------------------------------------------------------

    async def stop(self) -> None:
        """The editor went away (or a signal came): AGENT gets its input closed and a short
        grace, then its whole process group is killed; every session ends, recorded."""
        self.stopping = True
        for asked in self._asked.values():
            if not asked.done():
                asked.set_exception(EditorGone("the editor went away"))
        self._asked.clear()
        for opened in self.live.values():
            if opened.reaching is not None:
                opened.reaching.cancel()
        # The threads first: released at once, another `sessiond acp` (the editor started
        # again) can open them while AGENT takes its time to exit. A turn in flight ends.
        for request in list(self.upstream.values()):
            live = self.live.get(request.thread_id or "")
            if request.method != "session/prompt" or live is None:
                continue
            if live.recorder.turn_id == request.turn_id:
                self._release_held(live)  # recorded: nothing AGENT said is lost
                ended = live.recorder.end_turn(
                    new_scope(), error="the editor went away", continue_reason="editor_gone"
                )
                self._record(live, ended)
        if self._service is not None:
            self._release()
        agent = self.agent
        if agent is not None:
            agent.close_input()
            if not await agent.wait(STOP_GRACE):
                agent.kill_group()
                await agent.wait(STOP_GRACE)
            agent.kill_group()
            await self._after_agent_gone(agent)
        if self._hooks is not None:
            await self._hooks.stop()

    def _release(self) -> None:
        """Every session of this process ends, recorded (SessionEnd hooks run)."""
        self._write_batches()
        with contextlib.suppress(ProtocolError, OSError):
            sync = self.service.begin_commit()
            if sync is not None:
                sync()
        released = self.service.release_owner(self.owner, "disconnect")
        for thread_id in released:
            live = self.live.pop(thread_id, None)
            if live is not None and self._hooks is not None:
                self._hooks.session_ended(
                    self,
                    thread_id=thread_id,
                    session_id=live.session_id or "",
                    reason="disconnect",
                    after_answer=False,
                )

    def close(self) -> None:
        if self.agent is not None:
            self.agent.kill_group()
        if self._hooks is not None:
            self._hooks.kill_all()
        if self._service is not None:
            service, self._service = self._service, None
            service.close_all()


RENAME_METHOD = "_sessiond/session/rename"
"""sessiond's rename extension (advertised in `initialize`'s `_meta.sessiond`)."""
STEER_METHOD = "_session/steering"
"""The ACP steering extension: words sent into the turn that is running (advertised in
`initialize`'s `_meta.steering`), recorded as the person's (`AcpProxy._steered`)."""

OWN_METHODS: dict[str, Callable[[AcpProxy, dict[str, Any]], Coroutine[Any, Any, Any]]] = {
    "session/list": AcpProxy.session_list,
    "session/load": AcpProxy.session_load,
    "session/resume": AcpProxy.session_resume,
    "session/close": AcpProxy.session_close,
    "session/delete": AcpProxy.session_delete,
    "session/fork": AcpProxy.session_fork,  # unstable: AGENT's own, else emulated
    RENAME_METHOD: AcpProxy.session_rename,
}
"""The ACP methods sessiond answers itself; everything else goes to AGENT."""


def _conforms(proxy: AcpProxy) -> tuple[Host, Client]:
    """mypy proves here that the proxy is a host and a client for the lifecycle hooks."""
    return proxy, proxy
