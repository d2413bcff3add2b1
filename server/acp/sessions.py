"""The ACP session methods sessiond answers itself, from its own record: `session/list`,
`session/load`, `session/resume`, `session/close`, `session/delete`, `session/fork` (AGENT's
own fork when it offers one, else emulated) and the `_sessiond/session/rename` extension;
AGENT's own session is reached in the background."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorKind, ProtocolError
from restore.sources import acp as source
from server.acp.agent import AgentGone, AgentRefused
from server.acp.checks import (
    cursor_of,
    cwd_of,
    mcp_servers_of,
    params_of,
    replay_from_of,
    session_id_of,
)
from server.acp.state import Held, Live, accept_drift, new_scope, same_directory

if TYPE_CHECKING:
    from restore.service import ThreadService
    from server.acp.agent import AgentProcess
    from server.hooks.lifecycle import LifecycleHooks

logger = logging.getLogger("sessiond.acp")

LIST_PAGE = 50
HISTORY_LIMIT = 200
"""Messages a restored thread primes a new AGENT session with (with their tool calls)."""
BUSY_WAIT = 5.0
"""Seconds a load waits for another process holding the thread to let go of it."""


class LocalSessions:
    """The proxy's part that answers `session/*` (`AcpProxy` is one: server/acp/proxy.py)."""

    if TYPE_CHECKING:  # what this part uses of the rest of the proxy
        owner: str
        workspace_folders: list[dict[str, Any]]
        argv: list[str]
        live: dict[str, Live]
        closed: set[str]
        by_agent: dict[str, str]
        replaying: dict[str, list[tuple[str, str]]]
        loading: collections.Counter[str]
        replayed: dict[str, list[tuple[str, str]]]
        client_info: dict[str, Any] | None
        agent_capabilities: dict[str, Any]
        _opening: int

        @property
        def service(self) -> ThreadService: ...
        @property
        def hooks(self) -> LifecycleHooks: ...
        def _record(self, live: Live, recorded: source.Recorded) -> None: ...
        def _release_held(self, live: Live) -> None: ...
        async def _call(
            self, method: str, params: Any, *, release_hold: str | None = None
        ) -> Any: ...
        def _write_batches(self) -> None: ...
        async def _ensure_agent(self) -> AgentProcess: ...
        def _send_editor(self, message: dict[str, Any]) -> None: ...
        def _notice(self, thread_id: str, text: str, kind: str) -> None: ...
        def _flush_index_soon(self) -> None: ...
        def _agent_offers(self, capability: str) -> bool: ...
        def _adopt(self, agent_session: str, thread_id: str) -> None: ...

    async def session_list(self, message: dict[str, Any]) -> dict[str, Any]:
        params = params_of(message)
        cwd = params.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not os.path.isabs(cwd)):
            raise ProtocolError(
                ErrorKind.INVALID_PARAMS, f"cwd must be an absolute path, not {cwd!r}", field="cwd"
            )
        from restore.stores.api import ListFilters  # the store's, here: not before a listing

        summaries, next_cursor = self.service.list(
            ListFilters(cwd=cwd, cursor=cursor_of(params), limit=LIST_PAGE)
        )
        infos = [s.thread_info() for s in summaries]
        result: dict[str, Any] = {
            "sessions": [source.session_info(info) for info in infos if not _empty_acp(info)]
        }
        if next_cursor:
            result["nextCursor"] = next_cursor
        return result

    async def session_load(self, message: dict[str, Any]) -> dict[str, Any]:
        return await self._reopen(message, replay="")

    async def session_resume(self, message: dict[str, Any]) -> dict[str, Any]:
        """v1's resume (no replay), and the v2 draft's, which folds load into it:
        `replayFrom` `{type: "start"}` replays the whole conversation first, sessiond's
        `{type: "_sessiond/message", messageId}` from that message on."""
        return await self._reopen(message, replay=replay_from_of(params_of(message)))

    async def _reopen(self, message: dict[str, Any], *, replay: str | None) -> dict[str, Any]:
        """load / resume: open the thread (drift-checked), replay it (`replay`: "" all of
        it, a messageId from that message on, None nothing), and answer from sessiond's
        own record — AGENT's session is reached in the background (the best path AGENT
        offers), and the first prompt waits for it. A session recorded elsewhere is held:
        replayed, with a notice, and continued only once the person says so at its first
        prompt."""
        params = params_of(message)
        thread_id = session_id_of(params)
        cwd = cwd_of(params, required=False)
        servers = mcp_servers_of(params)
        accept = accept_drift(params)
        if replay and self.service.store.exists(thread_id):
            self._write_batches()  # a cursor the editor was shown names a message recorded
            _replay_after(self.service.store.read(thread_id)[0].items, replay, thread_id)
        live = self.live.get(thread_id)
        elsewhere = live is not None and cwd is not None and not same_directory(cwd, live.cwd)
        if live is not None and (elsewhere or live.held is not None):
            # Elsewhere now, or still waiting for the person (drift, another process): opened
            # again from the record, drift-checked, with what this load says of the drift.
            await self._close_live(live)
            live = None
        self.closed.discard(thread_id)
        report: dict[str, Any] | None = None
        if live is None:
            live, report, items = await self._open_waiting(thread_id, cwd, params, accept=accept)
        else:
            items = self._items(live)
        if servers is not None:
            live.mcp_servers = servers
        if replay is not None:
            for update in _replay_after(items, replay, thread_id):
                self._send_editor(
                    {
                        "jsonrpc": "2.0",
                        "method": "session/update",
                        "params": {"sessionId": thread_id, **update},
                    }
                )
        state = source.session_state(items)
        live.shown_state = state
        meta: dict[str, Any] = {
            "status": report["status"] if report else "ready",
            "drift": report["environment"]["drift"] if report else [],
            "continueReason": report.get("continueReason") if report else None,
        }
        if live.held is not None and live.held.busy is not None:
            meta["upstream"] = None
            meta["busy"] = live.held.busy
            self._notice(thread_id, busy_notice(live.held.busy), "busy")
        elif live.held is not None:
            meta["upstream"] = None
            self._notice(
                thread_id,
                f"{source.drift_summary(live.held.environment)}. Nothing will be sent to the "
                "agent until you say where to continue: your next message asks.",
                "drift",
            )
        elif live.agent_session is not None:
            meta["upstream"] = "live"
        else:
            meta["upstream"] = "reaching"  # the first prompt's answer says how
            if live.reaching is None:
                live.reaching = asyncio.get_running_loop().create_task(self._reach_soon(live))
                live.reaching.add_done_callback(_log_failure)
        return {**state, "_meta": {"sessiond": meta}}

    async def _open_waiting(
        self, thread_id: str, cwd: str | None, params: dict[str, Any], *, accept: bool | None
    ) -> tuple[Live, dict[str, Any] | None, list[dict[str, Any]]]:
        """`_open_thread`, waiting up to `BUSY_WAIT` for another process holding the thread
        to let go (the editor restarted: its last `sessiond acp` still exiting). Still held
        then: an editor that knows sessiond gets `ThreadBusy`; any other, the session
        replayed and held, with a notice it shows."""
        deadline = asyncio.get_running_loop().time() + BUSY_WAIT
        while True:
            try:
                live, report, items = self._open_thread(thread_id, cwd, params, accept=accept)
                return live, report, items
            except ProtocolError as exc:
                if exc.kind is not ErrorKind.THREAD_BUSY:
                    raise
                if asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.05)
                    continue
                if accept is False:
                    raise
                holder = str(exc.details.get("holder") or "another process")
                break
        items = self.service.store.read(thread_id)[0].items
        servers: list[Any] = (
            params["mcpServers"] if isinstance(params.get("mcpServers"), list) else []
        )
        held = Live(
            thread_id,
            None,
            source.ThreadRecorder.continuing(items, new_scope()),
            cwd or "/",
            servers,
            held=Held({}, cwd, busy=holder),
        )
        self.live[thread_id] = held
        return held, None, items

    def _open_thread(
        self, thread_id: str, cwd: str | None, params: dict[str, Any], *, accept: bool | None
    ) -> tuple[Live, dict[str, Any], list[dict[str, Any]]]:
        """Resume the thread in the store (a new session; a deleted one is brought back:
        its id is all an editor has), finish a turn a crash cut short, and remember how to
        reach AGENT's session. Drift: `accept` True continues, False is the typed error,
        None holds the session for the person to decide (nothing written meanwhile)."""
        if not self.service.store.exists(thread_id):
            raise ProtocolError(
                ErrorKind.THREAD_NOT_FOUND,
                f"no session {thread_id} here (a session is kept from its first prompt on)",
                threadId=thread_id,
            )
        report = self._resume(thread_id, cwd, accept is True)
        if report.get("readOnly"):  # no session on a read-only data directory: not drift
            raise self.service.home.refuse_write()
        servers: list[Any] = (
            params["mcpServers"] if isinstance(params.get("mcpServers"), list) else []
        )
        if report["status"] != "ready":
            drift = report["environment"]["drift"]
            if accept is False:
                fields = ", ".join(d["field"] for d in drift if d.get("severity") == "block")
                raise ProtocolError(
                    ErrorKind.WORKSPACE_DRIFT,
                    f"the session was recorded elsewhere ({fields}); load it with "
                    "_meta.sessiond.acceptDrift to continue here anyway",
                    threadId=thread_id,
                    drift=drift,
                )
            items = self.service.store.read(thread_id)[0].items
            scope = new_scope()
            shown = items + source.recover(items, scope).items  # written once confirmed
            current = report["environment"]["current"].get("cwd") or cwd or "/"
            held = Live(
                thread_id,
                None,
                source.ThreadRecorder.continuing(items, scope),
                current,
                servers,
                held=Held(report["environment"], cwd),
            )
            self.live[thread_id] = held
            return held, report, shown
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
        items = self.service.store.read(thread_id)[0].items
        scope = new_scope()
        recovered = source.recover(items, scope)
        recorder = source.ThreadRecorder.continuing(items, scope)
        cwd = report["environment"]["current"].get("cwd") or "/"
        live = Live(thread_id, session_id, recorder, cwd, servers)
        live.previous_agent_session = _agent_session_of(items)
        self.live[thread_id] = live
        if recovered.items:
            self._record(live, recovered)
            self._write_batches()
            items = self.service.store.read(thread_id)[0].items
        live.starting = self.hooks.session_started(
            self,
            thread_id=thread_id,
            session_id=session_id,
            source="resume",
            cwd=cwd,
            previous_session_id=report["session"]["resumedFrom"],
            after_answer=False,
        )
        return live, report, items

    def _resume(self, thread_id: str, cwd: str | None, accept_drift: bool) -> dict[str, Any]:
        """`ThreadService.resume`; a thread `session/delete` archived is unarchived first:
        an ACP editor has no other way to bring it back, and it named it."""

        def resume() -> dict[str, Any]:
            return self.service.resume(
                thread_id,
                cwd=cwd,
                accept_drift=accept_drift,
                message_limit=HISTORY_LIMIT,
                owner=self.owner,
            )

        try:
            return resume()
        except ProtocolError as exc:
            if exc.kind is not ErrorKind.THREAD_ARCHIVED:
                raise
        logger.info("session %s was deleted (archived); loading it brings it back", thread_id)
        self.service.archive(thread_id, False, self.owner)
        return resume()

    def _write_thread(self, live: Live) -> None:
        """A new session's thread, written at its first prompt (or once its items before
        one outgrow `PENDING_LIMIT`), with the id the editor already has; its SessionStart
        (`startup`) hooks start now and the prompt waits for them."""
        started = self.service.start(
            cwd=live.cwd,
            workspace_folder=None,
            client=self.client_info,
            owner=self.owner,
            origin={"agent": "acp", "sessionId": live.agent_session, "agentCommand": self.argv},
            thread_id=live.thread_id,
        )
        live.session_id = started.session_id
        pending, live.pending, live.pending_size = live.pending, None, 0
        if pending is not None:
            self._record(live, pending)
        self._flush_index_soon()
        live.starting = self.hooks.session_started(
            self,
            thread_id=live.thread_id,
            session_id=started.session_id,
            source="startup",
            cwd=live.cwd,
            after_answer=False,
        )

    async def _reach_soon(self, live: Live) -> None:
        await self._ensure_agent()
        if live.agent_session is None:
            await self._reach_agent_session(live)

    async def _agent_session_ready(self, live: Live) -> None:
        """AGENT running and the thread's AGENT session reached (waiting for a reach a
        load started; a failed one is tried again here)."""
        reaching = live.reaching
        if reaching is not None:
            try:
                await asyncio.shield(reaching)
            except ProtocolError:
                pass  # tried again below: this prompt gets its own error
            finally:
                if live.reaching is reaching:
                    live.reaching = None
        await self._ensure_agent()
        if live.agent_session is None:
            await self._reach_agent_session(live)

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
                    self.replaying.setdefault(str(previous), [])  # held while any load runs
                    self.loading[str(previous)] += 1
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
        elif via == "load":
            replayed = self.replayed.pop(str(previous), [])
            redactor = self.service.store.redactor  # the record's prompts are redacted
            lost = source.lost_turns(
                self._history(live), replayed, redactor.text if redactor else None
            )
            live.prime = source.priming_block(lost, source.LOST) if lost else None
        recorded = live.recorder.agent_session(agent_session, via, self.argv, result)
        self._record(live, recorded)
        live.agent_session = agent_session
        live.reached_via = via
        self._adopt(agent_session, live.thread_id)
        self._release_held(live)
        for update in source.state_changes(live.shown_state, result):
            # The editor was answered from the record: AGENT's actual mode and options win.
            params = {"sessionId": live.thread_id, "update": update}
            self._record(live, live.recorder.update(params))
            self._send_editor({"jsonrpc": "2.0", "method": "session/update", "params": params})
        live.shown_state = {}
        self._record(live, live.recorder.session_state(result))
        return via, result

    def _history(self, live: Live) -> list[dict[str, Any]]:
        """The thread's items from its newest `HISTORY_LIMIT` messages after the last
        clear or compact on, with the tool calls among them, as recorded so far (a thread
        started here has them too, when AGENT died and cannot resume)."""
        from restore.engine.subsystems import messages as messages_subsystem

        if live.session_id is None:
            return []
        self._write_batches()
        session = self.service.session_for(live.thread_id, live.session_id, self.owner)
        state = session.state.states["messages"]
        newest = messages_subsystem.newest(state, HISTORY_LIMIT)
        since = newest[0] if newest else int(state.get("boundarySeq") or 0) + 1
        items = self.service.store.read(live.thread_id)[0].items
        return [item for item in items if int(item.get("seq") or 0) >= since]

    def _items(self, live: Live) -> list[dict[str, Any]]:
        if live.session_id is None:
            return []
        self._write_batches()
        return self.service.store.read(live.thread_id)[0].items

    async def session_close(self, message: dict[str, Any]) -> dict[str, Any]:
        """Ends sessiond's session (and AGENT's, if AGENT can close one). Closing what is
        not open succeeds (ACP: SHOULD); `_meta.sessiond.known` false says it never was."""
        thread_id = session_id_of(params_of(message))
        live = self.live.get(thread_id)
        self.closed.add(thread_id)
        if live is not None:
            await self._close_live(live)
            if live.session_id is not None:
                self.hooks.session_ended(
                    self,
                    thread_id=live.thread_id,
                    session_id=live.session_id,
                    reason="close",
                    after_answer=False,
                )
            return {}
        return {} if self.service.store.exists(thread_id) else _unknown()

    async def _close_live(self, live: Live) -> None:
        """End sessiond's session on the thread, and AGENT's if AGENT can close one."""
        self._release_held(live)
        self._write_batches()
        self.live.pop(live.thread_id, None)
        for answer in live.drop_queued():
            self._send_editor(answer)
        if live.reaching is not None:
            live.reaching.cancel()
            live.reaching = None
        if live.agent_session is not None:
            self.by_agent.pop(live.agent_session, None)
            if self._agent_offers("close"):
                with contextlib.suppress(AgentRefused, AgentGone):
                    await self._call("session/close", {"sessionId": live.agent_session})
        if live.session_id is not None:
            self.service.close(live.thread_id, live.session_id, self.owner)

    async def session_delete(self, message: dict[str, Any]) -> dict[str, Any]:
        """The thread is archived, not deleted: it leaves `session/list`, but `sessiond
        list --archived` still shows it and loading its id brings it back. Deleting what is
        not there succeeds (ACP: SHOULD), with `_meta.sessiond.known` false."""
        thread_id = session_id_of(params_of(message))
        live = self.live.get(thread_id)
        agent_session = live.agent_session if live else None
        written = live is None or live.pending is None
        if live is not None:
            await self._close_live(live)
        exists = written and self.service.store.exists(thread_id)
        if exists and agent_session is None:
            agent_session = _agent_session_of(self.service.store.read(thread_id)[0].items)
        if exists:
            self.service.archive(thread_id, True, self.owner)
        if agent_session is not None and self._agent_offers("delete"):
            with contextlib.suppress(AgentRefused, AgentGone, ProtocolError):
                await self._ensure_agent()
                await self._call("session/delete", {"sessionId": agent_session})
        return {} if exists or live is not None else _unknown()

    async def session_fork(self, message: dict[str, Any]) -> dict[str, Any]:
        """(Unstable.) A new thread with the history so far, and AGENT's own fork of its
        session when AGENT offers one; otherwise (emulated) the fork's AGENT session is a new
        one, primed with that history at the fork's first prompt, as a session whose AGENT
        session was lost is (`_reach_agent_session`)."""
        params = params_of(message)
        live = self.live.get(session_id_of(params))
        if live is None or live.held is not None:
            raise ProtocolError(ErrorKind.STALE_SESSION, "load or resume the session first")
        if live.pending is not None:
            self._write_thread(live)
        if not self._agent_offers("fork"):
            return self._emulated_fork(live, params)
        await self._agent_session_ready(live)
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
            source.ThreadRecorder(new_scope()),
            cwd_of(params, required=False) or live.cwd,
            params.get("mcpServers") or [],
            agent_session,
        )
        self.live[thread_id] = fork
        self._record(fork, fork.recorder.agent_session(agent_session, "new", self.argv, result))
        self._flush_index_soon()
        self._adopt(agent_session, thread_id)
        return {**result, "sessionId": thread_id}

    def _emulated_fork(self, live: Live, params: dict[str, Any]) -> dict[str, Any]:
        self._write_batches()  # the fork holds everything recorded up to now
        started = self.service.fork(live.thread_id, at_turn_id=None, at_seq=None, owner=self.owner)
        thread_id = started.summary.threadId
        items = self.service.store.read(thread_id)[0].items
        fork = Live(
            thread_id,
            started.session_id,
            source.ThreadRecorder.continuing(items, new_scope()),
            cwd_of(params, required=False) or live.cwd,
            params.get("mcpServers") or live.mcp_servers,
        )
        self.live[thread_id] = fork
        self._flush_index_soon()
        return {"sessionId": thread_id, "_meta": {"sessiond": {"fork": "emulated"}}}

    async def session_rename(self, message: dict[str, Any]) -> dict[str, Any]:
        """`_sessiond/session/rename {sessionId, title}` (a sessiond extension, advertised in
        `initialize`'s `_meta.sessiond.sessionMethods`; rename is only a proposal in ACP):
        recorded as the thread's title (`thread/setTitle`), so `session/list` and every
        other client show it; sent on to AGENT when AGENT takes a title (`AGENT_RENAMES`)."""
        params = params_of(message)
        thread_id = session_id_of(params)
        title = params.get("title")
        if not isinstance(title, str) or not title.strip() or len(title) > TITLE_MAX:
            raise ProtocolError(
                ErrorKind.INVALID_PARAMS,
                f"title must be text of 1-{TITLE_MAX} characters",
                field="title",
            )
        live = self.live.get(thread_id)
        if live is not None and live.pending is not None:
            self._write_thread(live)  # named before its first prompt: kept from now on
        if live is None and not self.service.store.exists(thread_id):
            raise ProtocolError(ErrorKind.THREAD_NOT_FOUND, "no such session", threadId=thread_id)
        summary = self.service.set_title(thread_id, title.strip())
        self._flush_index_soon()
        forwarded = None
        method = next((m for c, m in AGENT_RENAMES if self._agent_offers(c)), None)
        if method is not None and live is not None and live.held is None:
            with contextlib.suppress(ProtocolError):  # not reached: recorded all the same
                await self._agent_session_ready(live)  # (a load reaches it in the background)
        if live is not None and live.agent_session is not None and method is not None:
            try:
                await self._call(method, {"sessionId": live.agent_session, "title": title.strip()})
                forwarded = method
            except (AgentRefused, AgentGone) as exc:
                logger.info("AGENT did not rename session %s: %s", live.agent_session, exc)
        meta = {"title": summary.title, "forwarded": forwarded is not None}
        if forwarded is not None:
            meta["forwardedAs"] = forwarded
        return {"_meta": {"sessiond": meta}}


TITLE_MAX = 500
"""As `thread/setTitle`'s."""
AGENT_RENAMES = (("rename", "session/rename"), ("title", "session/set_title"))
"""How AGENT takes a title, by the session capability it advertises: the rename proposal's
`session/rename` (agentclientprotocol/agent-client-protocol#1978), and the SDK's unstable
`session/set_title` (`sessionCapabilities.title`: codex-acp 2.6)."""


def busy_notice(holder: str) -> str:
    return (
        f"This session is open in another process ({holder}): another editor window, or "
        "one still closing. It is shown here as it was recorded; what you send is not sent "
        "until that one lets it go."
    )


def _replay_after(
    items: list[dict[str, Any]], message_id: str, thread_id: str
) -> list[dict[str, Any]]:
    """The replay of `items` from the message `message_id` on, inclusive ("": all of it);
    a message the record does not hold is the typed error naming the cursor that works."""
    updates = list(source.replay(items))
    if not message_id:
        return updates
    for at, params in enumerate(updates):
        if params["update"].get("messageId") == message_id:
            return updates[at:]
    raise ProtocolError(
        ErrorKind.INVALID_PARAMS,
        f"session {thread_id} has no message {message_id}: name one a replay or your prompt "
        'carried, or replay it all with replayFrom {"type": "start"}',
        field="replayFrom",
        threadId=thread_id,
    )


def _unknown() -> dict[str, Any]:
    return {"_meta": {"sessiond": {"known": False}}}


def _empty_acp(info: dict[str, Any]) -> bool:
    """A thread an earlier sessiond acp wrote at `session/new` and that never got a
    prompt: not a session anyone resumes (this one writes threads at the first prompt)."""
    origin = info.get("origin") or {}
    return origin.get("agent") == "acp" and not info.get("preview") and not info.get("title")


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("could not reach AGENT's session yet: %s", task.exception())


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
