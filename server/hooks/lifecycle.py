"""Lifecycle hooks: run the user's commands and in-process hooks when sessions start and end.

A handler calls `session_started` / `session_ended` after it has computed its answer; both
return at once and the hooks run in a background task that first waits until that answer
has been sent. Nothing a hook does can change an answer, delay it, or take the server down:

- hooks of one event run in parallel, each under its own timeout;
- a command hook runs in its own process group (`start_new_session=True`), and the whole
  group is killed on timeout, on shutdown and when the server exits (EOF, `exit`, signal),
  with every process it started that left the group (server/processes/reaper.py: the server is a
  child subreaper and each run's processes carry its tag);
- events of one thread are handled in order (a clear's SessionEnd before its SessionStart);
- every run is recorded in the thread as `lifecycle` items (started, then completed,
  failed or timed_out, with exit code, bounded stderr and duration) and announced to
  clients as `lifecycle/hook` notifications;
- a SessionStart hook's `additionalContext` becomes a `prompt_section` item named
  `hook:SessionStart:<hook name>`, so the restore engine hands it back on the next resume;
  `session_started` returns the run as a task whose result is those sections, for a
  caller that hands them to an agent itself (the ACP proxy).

The start of a session is recorded by its `session_meta` line (source, reason,
resumedFrom, forkedFrom); the end of one by a `lifecycle` item with status `ended`.

This module is imported, and `hooks.json` files and entry points are read, by the first
lifecycle event (no warmup: docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from protocol import json_text
from restore.access import folder_of
from restore.child_env import child_environment
from server.hooks.config import (
    ConfigFiles,
    HookSpec,
    entry_point_hooks,
    user_config_dir,
    workspace_config_path,
)
from server.processes import reaper
from server.processes.watchdog import Watchdog

if TYPE_CHECKING:
    from server.host import Client, Host

logger = logging.getLogger("sessiond.hooks")

STDERR_LIMIT = 4096
"""Bytes of a hook's stderr kept in its lifecycle item (the tail: errors come last)."""
STDOUT_LIMIT = 1 << 20
"""A hook printing more than this on stdout is recorded as failed."""
SHUTDOWN_GRACE = 5.0
HOOKS_MARKER = "SESSIOND_HOOKS_OF"
"""Every process a hook starts carries it (the server's watchdog tag): what the watchdog
kills if the server is killed."""
"""How long SessionEnd hooks may still run after the client said `exit`; SessionStart
hooks still running then are killed at once."""


@dataclass
class _Session:
    """What the hooks of a session's end need to know, remembered from its start."""

    session_id: str
    source: str | None
    cwd: str | None
    owner: str
    transcript_path: str | None  # None: the store keeps no file (PostgreSQL)


@dataclass
class _Event:
    name: str  # SessionStart | SessionEnd
    thread_id: str
    session: _Session
    match_on: str  # the source (SessionStart) or the end reason (SessionEnd)
    folders: list[tuple[str, bool]]  # the client's workspace folders and their trust
    extra: dict[str, Any]
    workspace: str | None = None  # the trusted folder holding cwd: set off the event loop

    def payload(self) -> dict[str, Any]:
        """What a hook reads on stdin; Claude Code's snake_case names are there too, so
        scripts written for Claude Code's SessionStart hooks read it unchanged."""
        common = {
            "hookEventName": self.name,
            "threadId": self.thread_id,
            "sessionId": self.session.session_id,
            "source": self.session.source,
            "cwd": self.session.cwd,
            "transcriptPath": self.session.transcript_path,
            **self.extra,
        }
        return {
            **common,
            "hook_event_name": self.name,
            "session_id": self.session.session_id,
            "transcript_path": self.session.transcript_path,
        }


@dataclass(frozen=True)
class AddedContext:
    """A SessionStart hook's `additionalContext`, as the `prompt_section` it became."""

    section: str  # hook:SessionStart:<hook name>
    content: str


HookRun = asyncio.Task[list[AddedContext] | None]
"""The hooks of one event: their added context in configuration order (None: the run
failed as a whole, or was cancelled by a shutdown)."""


@dataclass
class _Outcome:
    status: str  # completed | failed | timed_out
    exit_code: int | None = None
    stderr: str | None = None
    error: str | None = None
    additional_context: str | None = None


class LifecycleHooks:
    """The server's hooks: configuration, running processes, and the per-thread queue."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self._files = ConfigFiles()
        self._entry_points: list[HookSpec] | None = None
        self._sessions: dict[str, _Session] = {}  # open sessions by thread id
        self._cwd_of_thread: dict[str, str | None] = {}
        self._tasks: set[HookRun] = set()
        self._last_of_thread: dict[str, HookRun] = {}
        self._processes: dict[int, str] = {}  # process group id -> event name
        self._active_runs: set[str] = set()  # command hooks whose own process still runs
        self._orphans = reaper.Orphans()
        self._ran_commands = False
        self._watchdog: Watchdog | None = None
        self._stopping = False

    # --- called by handlers ------------------------------------------------------------

    def session_started(
        self,
        client: Client,
        *,
        thread_id: str,
        session_id: str,
        source: str,
        cwd: str | None,
        previous_session_id: str | None = None,
        forked_from: dict[str, Any] | None = None,
        after_answer: bool = True,
    ) -> HookRun:
        """Run the SessionStart hooks matching `source`, after the current answer is sent.

        `cwd=None` (clear, compact) means the cwd the thread's last session started in.
        `after_answer=False`: the caller sent its answer already (the ACP proxy). The run
        ends when every hook finished, failed or timed out (each under its own timeout)."""
        if cwd is None:
            cwd = self._cwd_of_thread.get(thread_id)
        self._cwd_of_thread[thread_id] = cwd
        session = _Session(
            session_id=session_id,
            source=source,
            cwd=cwd,
            owner=client.owner,
            transcript_path=self.host.service.store.transcript_path(thread_id),
        )
        self._sessions[thread_id] = session
        extra: dict[str, Any] = {}
        if previous_session_id:
            extra["previousSessionId"] = previous_session_id
        if forked_from:
            extra["forkedFrom"] = forked_from
        event = _Event("SessionStart", thread_id, session, source, _folders(client), extra)
        return self._schedule(thread_id, lambda: self._run_event(event), after_answer)

    def session_ended(
        self,
        client: Client,
        *,
        thread_id: str,
        session_id: str,
        reason: str,
        after_answer: bool = True,
    ) -> None:
        """Record the end of a session (close, clear, shutdown, disconnect) and run its
        SessionEnd hooks. `after_answer`: the current task is a request's, whose answer
        goes out first (a disconnect has no request to wait for)."""
        session = self._sessions.get(thread_id)
        if session is None or session.session_id != session_id:
            # Opened before this server knew it (cannot happen today): end it all the same.
            session = _Session(session_id, None, None, client.owner, "")
        else:
            del self._sessions[thread_id]
        event = _Event(
            "SessionEnd",
            thread_id,
            session,
            reason,
            _folders(client),
            {"reason": reason},
        )
        self._schedule(thread_id, lambda: self._run_event(event), after_answer)

    def connection_lost(self, client: Client, thread_ids: list[str]) -> None:
        """A client went away without `shutdown`: its sessions (closed and recorded as
        ended by the store already) get their SessionEnd hooks, reason `disconnect`."""
        for thread_id in thread_ids:
            session = self._sessions.get(thread_id)
            if session is not None and session.owner == client.owner:
                self.session_ended(
                    client,
                    thread_id=thread_id,
                    session_id=session.session_id,
                    reason="disconnect",
                    after_answer=False,
                )

    async def connection_shutdown(self, client: Client) -> None:
        """`shutdown`: end every session the connection still holds (reason `shutdown`)."""
        held = [(tid, s) for tid, s in self._sessions.items() if s.owner == client.owner]
        for thread_id, session in held:
            if not await self._still_open(thread_id, session):
                del self._sessions[thread_id]
                continue
            self.session_ended(
                client, thread_id=thread_id, session_id=session.session_id, reason="shutdown"
            )

    # --- stopping ----------------------------------------------------------------------

    async def stop(self, grace: float = SHUTDOWN_GRACE) -> None:
        """The server is exiting: kill SessionStart hooks now, give SessionEnd hooks up to
        `grace` seconds, then kill whatever is left. No new hook starts after this."""
        self._stopping = True
        for pgid, event in list(self._processes.items()):
            if event != "SessionEnd":
                reaper.kill_group(pgid)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        self.kill_all()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)

    def kill_all(self) -> None:
        """Kill every hook process group still running, and every process a hook started
        that left its group (safe from any thread, any time)."""
        self._stopping = True
        for pgid in list(self._processes):
            reaper.kill_group(pgid)
        if self._ran_commands:
            reaper.kill_tagged(None)

    # --- running -----------------------------------------------------------------------

    def _schedule(
        self,
        thread_id: str,
        work: Callable[[], Awaitable[list[AddedContext]]],
        after_answer: bool = True,
    ) -> HookRun:
        request = asyncio.current_task() if after_answer else None
        previous = self._last_of_thread.get(thread_id)

        async def run() -> list[AddedContext] | None:
            # The connection sends the answer from a done-callback registered before ours:
            # waiting for the request's task means the answer is written when hooks start.
            if request is not None and not request.done():
                await asyncio.wait({request})
            if previous is not None and not previous.done():
                await asyncio.wait({previous})
            try:
                return await work()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("lifecycle hooks of thread %s failed", thread_id)
                return None

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        self._last_of_thread[thread_id] = task

        def forget(done: HookRun) -> None:
            self._tasks.discard(done)
            if self._last_of_thread.get(thread_id) is done:
                del self._last_of_thread[thread_id]

        task.add_done_callback(forget)
        return task

    async def _run_event(self, event: _Event) -> list[AddedContext]:
        if event.name == "SessionEnd" and event.match_on not in ("close", "disconnect"):
            # A close or a disconnect records its own end (restore/service/sessions.py) before the
            # lock is released.
            await self._append(
                event.thread_id,
                [
                    _lifecycle_item(
                        event,
                        status="ended",
                        reason=event.match_on,
                    )
                ],
            )
        # Off the event loop: resolving folders and reading hooks.json touch the disk.
        specs = await asyncio.to_thread(self._specs, event)
        specs = [s for s in specs if s.event == event.name]
        specs = [s for s in specs if s.matches(event.match_on)]
        names: set[str] = set()
        runs = []
        for spec in specs:
            name = spec.name
            suffix = 2
            while name in names:
                name, suffix = f"{spec.name}:{suffix}", suffix + 1
            names.add(name)
            runs.append(self._run_hook(event, spec, name))
        return [added for added in await asyncio.gather(*runs) if added is not None]

    def _specs(self, event: _Event) -> list[HookSpec]:
        """Every configured hook for the event's place (on a worker thread, not the loop)."""
        event.workspace = workspace = trusted_folder(event.session.cwd, event.folders)
        specs = list(self._files.load(user_config_dir() / "hooks.json", "user"))
        if workspace is not None:
            path = workspace_config_path(workspace)
            specs += self._files.load(path, f"workspace:{workspace}")
        if self._entry_points is None:
            self._entry_points = entry_point_hooks()
        return specs + self._entry_points

    async def _run_hook(self, event: _Event, spec: HookSpec, name: str) -> AddedContext | None:
        if self._stopping and event.name != "SessionEnd":
            return None
        run_id = str(uuid.uuid4())
        fields = {"hook": name, "hookType": spec.kind, "origin": spec.origin, "runId": run_id}
        if spec.command is not None:
            fields["command"] = spec.command
        started = _lifecycle_item(event, status="started", **fields)
        self._notify(event, started)
        recorded = asyncio.ensure_future(self._append(event.thread_id, [started]))
        began = time.monotonic()
        if spec.command is not None:
            outcome = await self._run_command(event, spec, run_id)
        else:
            outcome = await self._run_function(event, spec)
        duration_ms = round((time.monotonic() - began) * 1000)
        items: list[dict[str, Any]] = []
        section = None
        if outcome.additional_context and event.name == "SessionStart":
            section = f"hook:{event.name}:{name}"
            items.append(
                {
                    "type": "prompt_section",
                    "id": str(uuid.uuid4()),
                    "name": section,
                    "content": outcome.additional_context,
                    "cacheable": False,
                    "source": "hook",
                }
            )
        finished = _lifecycle_item(
            event,
            status=outcome.status,
            exitCode=outcome.exit_code,
            stderr=outcome.stderr,
            error=outcome.error,
            durationMs=duration_ms,
            promptSection=section,
            **fields,
        )
        items.append(finished)
        await recorded
        await self._append(event.thread_id, items)
        self._notify(event, finished)
        if section is None or outcome.additional_context is None:
            return None
        return AddedContext(section, outcome.additional_context)

    async def _run_command(self, event: _Event, spec: HookSpec, run_id: str) -> _Outcome:
        assert spec.command is not None
        cwd = event.session.cwd if event.session.cwd and os.path.isdir(event.session.cwd) else None
        if not self._ran_commands:
            # Before the first hook process: what a hook detaches (double fork, setsid) is
            # re-parented to this process, not init, so it can be found and killed; and
            # should this process be killed (-9) with nobody left to do it, the watchdog
            # kills every process a hook started (server/processes/watchdog.py).
            reaper.become_subreaper()
            self._watchdog = Watchdog.start(HOOKS_MARKER)
            self._ran_commands = True
        env = child_environment(  # never the store's credentials (restore/child_env.py)
            {
                "SESSIOND_HOOK_EVENT": event.name,
                "SESSIOND_THREAD_ID": event.thread_id,
                "SESSIOND_SESSION_ID": event.session.session_id,
                "SESSIOND_PROJECT_DIR": event.workspace or event.session.cwd or "",
                reaper.MARKER: run_id,  # inherited by everything the hook starts
                **(self._watchdog.tagged() if self._watchdog is not None else {}),
            }
        )
        self._active_runs.add(run_id)
        try:
            process = await asyncio.create_subprocess_shell(
                spec.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,  # its own process group: killpg reaches its children
            )
        except OSError as exc:
            self._active_runs.discard(run_id)
            return _Outcome("failed", error=f"could not start: {exc}")
        self._processes[process.pid] = event.name
        if self._watchdog is not None:
            self._watchdog.guard(process.pid)  # its process group
        try:
            async with asyncio.timeout(spec.timeout):
                _, stdout, stderr, code = await asyncio.gather(
                    _feed(process, orjson.dumps(event.payload())),
                    _read_head(process.stdout, STDOUT_LIMIT + 1),
                    _read_tail(process.stderr, STDERR_LIMIT),
                    process.wait(),
                )
        except TimeoutError:
            reaper.kill_group(process.pid)
            killed = await asyncio.to_thread(reaper.kill_tagged, {run_id})
            await _reap(process)
            self._orphans.add(killed - {process.pid})  # asyncio reaps the hook itself
            return _Outcome(
                "timed_out",
                exit_code=process.returncode,
                error=f"no answer within {spec.timeout:g} s; it and every process it "
                "started were killed",
            )
        except BaseException:
            reaper.kill_group(process.pid)  # cancelled: the server is going away
            reaper.kill_tagged({run_id})
            raise
        finally:
            self._processes.pop(process.pid, None)
            self._active_runs.discard(run_id)
            self._orphans.finished(process.pid)
            if self._watchdog is not None:
                # Its group id may be reused; what it left behind still carries the tag.
                self._watchdog.release(process.pid)
            # What the hook left behind (adopted, or exited) is reaped off the event loop.
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().run_in_executor(
                    None, self._orphans.tend, self._active_runs
                )
        return _judge(code, stdout, _decode_stderr(stderr))

    async def _run_function(self, event: _Event, spec: HookSpec) -> _Outcome:
        assert spec.function is not None
        payload = event.payload()
        try:
            async with asyncio.timeout(spec.timeout):
                if asyncio.iscoroutinefunction(spec.function):
                    result = await spec.function(payload)
                else:
                    result = await _in_daemon_thread(spec.function, payload)
        except TimeoutError:
            return _Outcome("timed_out", error=f"no answer within {spec.timeout:g} s")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            tail = traceback.format_exc()[-STDERR_LIMIT:]
            return _Outcome("failed", stderr=tail, error=f"{type(exc).__name__}: {exc}")
        if result is None:
            return _Outcome("completed")
        if not isinstance(result, dict):
            return _Outcome("failed", error="a hook returns None or a dict")
        return _context_outcome(result, exit_code=None, stderr=None)

    # --- recording ---------------------------------------------------------------------

    async def _append(self, thread_id: str, items: list[dict[str, Any]]) -> None:
        """Record in the thread while this process has it open; never take its lock again
        after a close (whoever resumes it next must not find it busy). What cannot be
        recorded is still announced by `lifecycle/hook` and logged, never raised."""
        try:
            written = await self.host.run_in_worker(
                self.host.service.append_if_open, thread_id, items
            )
        except Exception as exc:
            logger.warning("could not record lifecycle items in thread %s: %s", thread_id, exc)
            return
        if not written:
            logger.info("thread %s is closed here; hook records only announced", thread_id)

    def _notify(self, event: _Event, item: dict[str, Any]) -> None:
        params = {"threadId": event.thread_id, "sessionId": item["targetSessionId"]}
        params.update((k, v) for k, v in item.items() if k not in ("type", "id", "targetSessionId"))
        with contextlib.suppress(Exception):
            self.host.broadcast("lifecycle/hook", params)

    async def _still_open(self, thread_id: str, session: _Session) -> bool:
        def check() -> bool:
            try:
                self.host.service.session_for(thread_id, session.session_id, session.owner)
            except Exception:
                return False
            return True

        return await self.host.run_in_worker(check)


# --- helpers -----------------------------------------------------------------------------


def _folders(client: Client) -> list[tuple[str, bool]]:
    return [
        (str(entry.get("path", "")), entry.get("trusted") is True)
        for entry in client.workspace_folders
    ]


def trusted_folder(cwd: str | None, folders: list[tuple[str, bool]]) -> str | None:
    """The innermost workspace folder holding `cwd`, if the client marked it trusted.
    Workspace hooks run only from a trusted folder (docs/security.md); both are resolved first,
    so `TRUSTED/../UNTRUSTED` counts as UNTRUSTED."""
    folder = folder_of(cwd, [path for path, _ in folders]) if cwd else None
    if folder is None:
        return None
    trusted = {path.rstrip("/") or "/": flag for path, flag in folders}
    return folder if trusted.get(folder) else None


def _lifecycle_item(event: _Event, *, status: str, **fields: Any) -> dict[str, Any]:
    item = {
        "type": "lifecycle",
        "id": str(uuid.uuid4()),
        "event": event.name,
        "targetSessionId": event.session.session_id,
        "source": event.session.source,
        "reason": event.extra.get("reason"),
        "status": status,
        **fields,
    }
    return {key: value for key, value in item.items() if value is not None}


def _judge(code: int | None, stdout: bytes, stderr: str) -> _Outcome:
    if code != 0:
        return _Outcome("failed", exit_code=code, stderr=stderr, error=f"exit code {code}")
    if len(stdout) > STDOUT_LIMIT:
        return _Outcome("failed", exit_code=code, stderr=stderr, error="stdout over 1 MiB")
    if not stdout.strip():
        return _Outcome("completed", exit_code=code, stderr=stderr or None)
    try:
        document, _ = json_text.loads(stdout)  # a Node hook's lone surrogate: U+FFFD
    except orjson.JSONDecodeError as exc:
        return _Outcome("failed", exit_code=code, stderr=stderr, error=f"stdout is not JSON: {exc}")
    if not isinstance(document, dict):
        return _Outcome("failed", exit_code=code, stderr=stderr, error="stdout is not an object")
    return _context_outcome(document, exit_code=code, stderr=stderr or None)


def _context_outcome(
    document: dict[str, Any], *, exit_code: int | None, stderr: str | None
) -> _Outcome:
    """`additionalContext` at the top level, or in Claude Code's `hookSpecificOutput`."""
    specific = document.get("hookSpecificOutput")
    context = document.get("additionalContext")
    if context is None and isinstance(specific, dict):
        context = specific.get("additionalContext")
    if context is not None and not isinstance(context, str):
        return _Outcome(
            "failed", exit_code=exit_code, stderr=stderr, error="additionalContext not a string"
        )
    return _Outcome("completed", exit_code=exit_code, stderr=stderr, additional_context=context)


def _decode_stderr(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


async def _feed(process: asyncio.subprocess.Process, data: bytes) -> None:
    """Write the payload to stdin; a hook that never reads it is not an error."""
    assert process.stdin is not None
    try:
        process.stdin.write(data)
        await process.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        with contextlib.suppress(Exception):
            process.stdin.close()


async def _read_head(stream: asyncio.StreamReader | None, limit: int) -> bytes:
    """The first `limit` bytes; the rest is read and dropped so the hook never blocks."""
    assert stream is not None
    kept = bytearray()
    while chunk := await stream.read(1 << 16):
        if len(kept) < limit:
            kept += chunk[: limit - len(kept)]
    return bytes(kept)


async def _read_tail(stream: asyncio.StreamReader | None, limit: int) -> bytes:
    assert stream is not None
    kept = b""
    truncated = False
    while chunk := await stream.read(1 << 16):
        kept += chunk
        if len(kept) > limit:
            kept, truncated = kept[-limit:], True
    return b"[...]" + kept if truncated else kept


async def _reap(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(TimeoutError, ProcessLookupError):
        async with asyncio.timeout(5):
            await process.wait()


def _in_daemon_thread(function: Callable[[dict[str, Any]], Any], payload: dict[str, Any]) -> Any:
    """Run a synchronous in-process hook on a daemon thread: if it hangs past its timeout
    the server stops waiting, and the thread cannot keep the process from exiting."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def deliver(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def work() -> None:
        try:
            result = function(payload)
        except BaseException as exc:
            loop.call_soon_threadsafe(deliver, None, exc)
        else:
            loop.call_soon_threadsafe(deliver, result, None)

    threading.Thread(target=work, name="sessiond-hook", daemon=True).start()
    return future
