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
    InitializeResponse,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)
from acp.stdio import spawn_agent_process

from tests.support.wait import HANG_GUARD

REPO = Path(__file__).resolve().parents[2]
FAKE_AGENT = Path(__file__).with_name("acp_agent.py")


class Editor(Client):
    """Answers like an editor whose user allows (or rejects) every tool call, choosing by
    the option's kind (allow_once / reject_once), as editors draw their buttons."""

    def __init__(self, allow: bool = True) -> None:
        self.allow = allow
        self.received: list[dict[str, Any]] = []
        self.answered: list[int] = []
        """len(received) at each answer the editor got: a prompt's ends its turn."""
        self.permissions: list[Any] = []
        self.asked_at: list[int] = []
        """len(received) when each permission request arrived (in arrival order)."""
        self.options: list[list[Any]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permissions.append(tool_call)
        self.options.append(options)
        wanted = "allow_once" if self.allow else "reject_once"
        chosen = next(o.option_id for o in options if o.kind == wanted)
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
        elif (
            event.direction is StreamDirection.INCOMING
            and message.get("method") == "session/request_permission"
        ):
            self.asked_at.append(len(self.received))
        elif event.direction is StreamDirection.INCOMING and "method" not in message:
            self.answered.append(len(self.received))

    def texts(self) -> list[str]:
        """The texts the editor drew, in order: consecutive text chunks of one message
        (the same update but for the text) drawn as one, as editors append them. (sessiond
        may cut a message's chunks anew: the end of one is held back until no secret can
        be in progress there, restore/sources/acp_chunks.py.)"""
        runs: list[dict[str, Any]] = []
        at = 0
        for end in [*self.answered, len(self.received)]:  # a turn's message ends with it
            runs += drawn(self.received[at:end])
            at = max(at, end)
        return [text for p in runs if (text := _text_of(p)) is not None]


def _text_of(params: dict[str, Any]) -> str | None:
    content = params["update"].get("content")
    text = content.get("text") if isinstance(content, dict) else None
    return text if isinstance(text, str) else None


def _but_text(params: dict[str, Any]) -> dict[str, Any]:
    update = params["update"]
    return {**params, "update": {**update, "content": {**update["content"], "text": ""}}}


def drawn(received: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`session/update` params with consecutive text chunks of one message (the same but
    for the text) joined: what the editor draws, however the chunks were cut."""
    out: list[dict[str, Any]] = []
    for params in received:
        chunk = str(params["update"].get("sessionUpdate")).endswith("_chunk")
        texts = chunk and out and _text_of(params) is not None and _text_of(out[-1]) is not None
        if texts and _but_text(out[-1]) == _but_text(params):
            last = out[-1]["update"]
            joined = {**last["content"], "text": f"{_text_of(out[-1])}{_text_of(params)}"}
            out[-1] = {**out[-1], "update": {**last, "content": joined}}
            continue
        out.append(params)
    return out


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


class CodeCompanionLike:
    """An editor that knows nothing of sessiond, doing what CodeCompanion.nvim 19.22 does
    (`lua/codecompanion/acp/init.lua`, `Connection:_establish_session`, and the `/resume`
    slash command): a chat opens a session as it opens; `/resume` lists the sessions of
    its working directory and loads the one picked; ANY error of `session/load` is taken as
    "cannot load" and a new session is opened in its place without a word; it answers a
    permission request only while a prompt runs."""

    def __init__(self, run: Running, cwd: Path) -> None:
        self.run = run
        self.cwd = cwd
        self.session_id: str | None = None
        self.fell_back = False

    async def open_chat(self) -> str:
        self.session_id = (await self.run.conn.new_session(cwd=str(self.cwd))).session_id
        return self.session_id

    async def picker(self) -> list[Any]:
        return list((await self.run.conn.list_sessions(cwd=str(self.cwd))).sessions)

    async def resume(self, session_id: str) -> list[dict[str, Any]]:
        """What the chat buffer is redrawn from: the updates the load sent."""
        before = len(self.run.editor.received)
        try:
            await self.run.conn.load_session(cwd=str(self.cwd), session_id=session_id)
            self.session_id = session_id
        except RequestError:
            self.fell_back = True
            await self.open_chat()
        return [p["update"] for p in self.run.editor.received[before:]]

    async def send(self, text: str) -> Any:
        assert self.session_id is not None
        prompt = [{"type": "text", "text": text}]
        return await self.run.conn.prompt(session_id=self.session_id, prompt=prompt)


def fake_agent(state: Path, caps: str = "resume", *flags: str) -> list[str]:
    return [sys.executable, str(FAKE_AGENT), "--caps", caps, "--state", str(state), *flags]


class RawEditor:
    """An editor that writes bytes, not SDK calls: for what the SDK would never send (a
    line that is not JSON, a bare number, a message 300 levels deep). Reads every message
    `sessiond acp` writes, in order."""

    def __init__(self, process: asyncio.subprocess.Process, stderr: Path) -> None:
        self.process = process
        self.stderr = stderr
        self.received: list[dict[str, Any]] = []
        self._ids = iter(range(1, 1 << 30))

    async def send_line(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        await self.process.stdin.drain()

    async def next_message(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        async with asyncio.timeout(HANG_GUARD):
            line = await self.process.stdout.readline()
        if not line:
            raise EOFError("sessiond acp closed its output")
        message = json.loads(line)
        self.received.append(message)
        return message

    async def answer_to(self, request_id: Any) -> dict[str, Any]:
        """Messages until the answer with `request_id` (a request of sessiond's own to
        the editor is answered with an error: this editor allows nothing)."""
        while True:
            message = await self.next_message()
            if "method" not in message and message.get("id") == request_id:
                return message
            if "method" in message and "id" in message:
                refusal = {"code": -32601, "message": "not supported by this editor"}
                reply = {"jsonrpc": "2.0", "id": message["id"], "error": refusal}
                await self.send_line(json.dumps(reply).encode())

    async def request(self, method: str, params: Any) -> dict[str, Any]:
        """Send a request; its answer (result or error), whatever came before it."""
        request_id = next(self._ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self.send_line(json.dumps(body).encode())
        return await self.answer_to(request_id)

    def log(self) -> str:
        return self.stderr.read_text() if self.stderr.exists() else ""


@contextlib.asynccontextmanager
async def raw_sessiond_acp(home: Path, agent: list[str]) -> AsyncIterator[RawEditor]:
    """`sessiond acp --home HOME -- AGENT...` on plain pipes, not initialized."""
    stderr = home.parent / f"acp-raw-stderr-{os.getpid()}-{len(agent)}.log"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home.parent),
        "PYTHONPATH": str(REPO),
        "SESSIOND_CONFIG_HOME": str(home.parent / "config"),
        "SESSIOND_LOG": "INFO",
    }
    with open(stderr, "ab") as errors:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "server.cli", "acp", "--home", str(home), "--", *agent,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=errors,
            env=env, cwd=REPO, limit=1 << 24,
        )  # fmt: skip
        editor = RawEditor(process, stderr)
        try:
            yield editor
        finally:
            assert process.stdin is not None
            process.stdin.close()
            try:
                async with asyncio.timeout(HANG_GUARD):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()


@contextlib.asynccontextmanager
async def sessiond_acp(
    home: Path,
    agent: list[str],
    *,
    allow: bool = True,
    env: dict[str, str] | None = None,
    capabilities: dict[str, Any] | None = None,
) -> AsyncIterator[Running]:
    """`sessiond acp --home HOME -- AGENT...`, initialized; closed (end of input) after.
    `capabilities`: the editor's `clientCapabilities` as sent, for one the SDK does not
    model yet (the draft `subagents`)."""
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
                if capabilities is None:
                    running.extra["initialize"] = await conn.initialize(protocol_version=1)
                else:
                    params = {"protocolVersion": 1, "clientCapabilities": capabilities}
                    answer = await conn._conn.send_request("initialize", params)
                    running.extra["initialize"] = InitializeResponse.model_validate(answer)
            yield running


def agent_log(state: Path) -> list[dict[str, Any]]:
    path = state / "log.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


async def wait_for(condition: Any, what: str) -> None:
    async with asyncio.timeout(HANG_GUARD):
        while not condition():
            await asyncio.sleep(0.02)


__all__ = ["RequestError"]
