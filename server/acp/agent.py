"""AGENT, the child process the proxy speaks ACP to: spawned in its own process group with
PR_SET_PDEATHSIG, so it dies with this process even after a kill -9; its stdout decoded
into messages, its exit reported once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from typing import Any, cast

import orjson

from restore.child_env import child_environment
from server.acp.checks import line_decoder
from server.processes.parent import die_with_parent as _die_with_parent
from server.processes.watchdog import Watchdog
from server.rpc.framing import Frame, FrameTooLarge

logger = logging.getLogger("sessiond.acp")

EXIT_SETTLE = 0.2
"""After AGENT's process exits, how long its last output may still be arriving."""


class AgentGone(Exception):
    """AGENT exited before it answered a request of the proxy's own."""


class AgentRefused(Exception):
    """AGENT answered a request of the proxy's own with an error."""

    def __init__(self, error: Any) -> None:
        super().__init__(str(error))
        self.error = error


class EditorGone(Exception):
    """The editor went away before it answered a request of the proxy's own."""


class AgentProcess(asyncio.SubprocessProtocol):
    """AGENT: its stdout decoded into messages, its exit reported once."""

    def __init__(
        self, on_message: Callable[[AgentProcess, bytes], None], on_gone: Callable[..., None]
    ) -> None:
        self.decoder = line_decoder()
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
        pipe = cast(asyncio.WriteTransport | None, self.transport.get_pipe_transport(0))
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
