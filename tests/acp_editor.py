"""The editor side of the `sessiond acp` tests: the official ACP Python SDK's client
(`agent-client-protocol`) launching `sessiond acp -- AGENT` as a real process.

What the editor was shown is observed on the wire, in arrival order (`Editor.received`),
so a test can compare it with what a later `session/load` replays.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import Client, RequestError
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)
from acp.stdio import spawn_agent_process

REPO = Path(__file__).resolve().parent.parent
FAKE_AGENT = Path(__file__).with_name("acp_agent.py")
HANG_GUARD = 60.0  # seconds before a test gives up waiting (not a performance limit)


class Editor(Client):
    """Answers like an editor whose user allows (or rejects) every tool call."""

    def __init__(self, allow: bool = True) -> None:
        self.allow = allow
        self.received: list[dict[str, Any]] = []
        self.permissions: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permissions.append(tool_call)
        chosen = "allow" if self.allow else "reject"
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen)
        )

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        Path(path).write_text(content)
        return WriteTextFileResponse()

    async def read_text_file(
        self, session_id: str, path: str, **kwargs: Any
    ) -> ReadTextFileResponse:
        return ReadTextFileResponse(content=Path(path).read_text())

    def observe(self, event: StreamEvent) -> None:
        message = event.message
        if (
            event.direction is StreamDirection.INCOMING
            and message.get("method") == "session/update"
        ):
            self.received.append(message["params"])

    def texts(self) -> list[str]:
        return [
            p["update"]["content"]["text"]
            for p in self.received
            if isinstance(p["update"].get("content"), dict) and "text" in p["update"]["content"]
        ]


@dataclass
class Running:
    """One `sessiond acp` process and the SDK connection to it."""

    conn: ClientSideConnection
    process: asyncio.subprocess.Process
    editor: Editor
    stderr: Path
    extra: dict[str, Any] = field(default_factory=dict)

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """A method the SDK's client has no wrapper for (session/delete)."""
        return await self.conn._conn.send_request(method, params)

    def kill9(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)


def fake_agent(state: Path, caps: str = "resume") -> list[str]:
    return [sys.executable, str(FAKE_AGENT), "--caps", caps, "--state", str(state)]


@contextlib.asynccontextmanager
async def sessiond_acp(
    home: Path, agent: list[str], *, allow: bool = True, env: dict[str, str] | None = None
) -> AsyncIterator[Running]:
    """`sessiond acp --home HOME -- AGENT...`, initialized; closed (end of input) after."""
    editor = Editor(allow)
    stderr = home.parent / f"acp-stderr-{os.getpid()}-{id(editor)}.log"
    full_env = {
        "PYTHONPATH": str(REPO),
        "SESSIOND_CONFIG_HOME": str(home.parent / "config"),
        "SESSIOND_LOG": "INFO",
        **(env or {}),
    }
    with open(stderr, "ab") as errors:
        async with spawn_agent_process(
            editor,
            sys.executable,
            "-m",
            "server.cli",
            "acp",
            "--home",
            str(home),
            "--",
            *agent,
            env=full_env,
            cwd=REPO,
            transport_kwargs={"stderr": errors.fileno(), "shutdown_timeout": HANG_GUARD},
            observers=[editor.observe],
            use_unstable_protocol=True,
        ) as (conn, process):
            running = Running(conn, process, editor, stderr)
            async with asyncio.timeout(HANG_GUARD):
                running.extra["initialize"] = await conn.initialize(protocol_version=1)
            yield running


def agent_log(state: Path) -> list[dict[str, Any]]:
    path = state / "log.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def wait_for(condition: Any, what: str) -> None:
    async with asyncio.timeout(HANG_GUARD):
        while not condition():
            await asyncio.sleep(0.02)


__all__ = ["RequestError"]
