"""Recording when the disk is full, in the ACP proxy: durable before shown. A record that
fails is said to the editor at once (a notice it renders as an agent message), the agent's
work still reaches the person, and the turn's answer is a `StorageFull` error — never an
answer that looks recorded. Once space returns, the next turn records normally.

On a real small filesystem (a 512 KiB tmpfs holding `sessiond acp --home`, filled by
another file) against a real `sessiond acp` process; mounting needs root, and without it
that case is skipped, saying so. The same scenario also runs the proxy in this process
with the thread files' writes failing with ENOSPC, everywhere.
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from acp import RequestError

from tests.support.acp_editor import HANG_GUARD, drawn, fake_agent, sessiond_acp
from tests.support.disks import fill
from tests.test_acp import EDIT_UPDATES, text, thread_items

Prompt = Callable[[str], Awaitable[tuple[dict[str, Any], list[dict[str, Any]]]]]
"""Send a prompt: (its answer, as `{"result"}` or `{"error"}`; the updates it showed)."""


async def _scenario(
    prompt: Prompt, fill: Callable[[], None], free: Callable[[], None], notes: Path
) -> str:
    first, _ = await prompt("hello")
    assert first["result"]["stopReason"] == "end_turn"
    fill()
    full, shown = await prompt(f"edit {notes}")
    free()
    again, _ = await prompt("again")

    assert full["error"]["data"]["kind"] == "StorageFull"
    assert full["error"]["data"]["agentResult"]["stopReason"] == "end_turn"
    # At once: with the first record that failed (the first of the turn; on the small disk
    # the thread file's last page can still take the first few lines).
    (notice,) = [p for p in shown if "notice" in str(p["update"].get("_meta"))]
    assert notice["update"]["_meta"]["sessiond"]["notice"] == "unrecorded"
    assert "StorageFull" in notice["update"]["content"]["text"]
    agents = [p for p in shown if p is not notice]
    assert len(drawn(agents)) == EDIT_UPDATES  # the person still saw all the agent did
    assert notes.read_text() == "edited\n"
    assert again["result"]["stopReason"] == "end_turn"
    return str(first["session"])


def _turns(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    prompts = {i["turnId"]: i["content"][0]["text"] for i in items if i.get("role") == "user"}
    return [(prompts.get(i["turnId"], "?"), i["phase"]) for i in items if i["type"] == "turn"]


@pytest.mark.parametrize("how", ["a real small disk", "an injected ENOSPC"])
async def test_a_turn_on_a_full_disk_is_answered_as_not_recorded_and_the_next_one_records(
    request: pytest.FixtureRequest, tmp_path: Path, make_repo: Callable[..., Path], how: str
) -> None:
    repo = make_repo("repo")
    notes = repo / "notes.txt"
    if how == "an injected ENOSPC":
        home = tmp_path / "home"
        session = await _in_process(home, tmp_path / "agent", repo, notes)
    else:
        small_disk = request.getfixturevalue("small_disk")  # skipped, saying why, unless root
        home = small_disk / "home"
        session = await _real_process(home, small_disk, tmp_path / "agent", repo, notes)
    turns = _turns(thread_items(home, session))
    if how == "a real small disk":  # the thread file's last page may take the turn's start
        turns = [t for t in turns if t[0] != f"edit {notes}" or t[1] != "started"]
    assert turns == [
        ("hello", "started"),
        ("hello", "completed"),
        ("again", "started"),
        ("again", "completed"),
    ]  # nothing of the full disk's turn claims to be recorded


async def _real_process(home: Path, disk: Path, state: Path, repo: Path, notes: Path) -> str:
    filler: list[Path] = []
    async with sessiond_acp(home, fake_agent(state)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id

        async def prompt(words: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
            before = len(run.editor.received)
            try:
                answer = await run.conn.prompt(session_id=session, prompt=text(words))
                result: dict[str, Any] = {"result": {"stopReason": answer.stop_reason}}
            except RequestError as exc:
                result = {"error": {"code": exc.code, "message": str(exc), "data": exc.data}}
            result["session"] = session
            shown = [{k: v for k, v in p.items() if k != "sessionId"} for p in run.editor.received]
            return result, shown[before:]

        return await _scenario(
            prompt, lambda: filler.append(fill(disk)), lambda: filler.pop().unlink(), notes
        )


@dataclass
class _Editor:
    """The in-process stand-in for the editor: collects what the proxy writes, allows
    every permission the agent asks for."""

    out: list[dict[str, Any]]
    proxy: Any = None

    def write(self, data: bytes) -> None:
        message = orjson.loads(data)
        self.out.append(message)
        if "method" in message and "id" in message:  # AGENT asks
            params = message["params"]
            result: dict[str, Any] = {}
            if message["method"] == "session/request_permission":
                options = params.get("options") or [{}]
                allow = next((o for o in options if o.get("kind") == "allow_once"), options[0])
                result = {"outcome": {"outcome": "selected", "optionId": allow.get("optionId")}}
            elif message["method"] == "fs/write_text_file":
                Path(params["path"]).write_text(params["content"])
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            asyncio.get_running_loop().call_soon(self.proxy.editor_bytes, orjson.dumps(answer))

    async def request(self, request_id: int, method: str, params: dict[str, Any]) -> Any:
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self.proxy.editor_bytes(orjson.dumps(body))
        async with asyncio.timeout(HANG_GUARD):
            while True:
                for message in self.out:
                    if message.get("id") == request_id and "method" not in message:
                        return message
                await asyncio.sleep(0.01)


async def _in_process(home: Path, state: Path, repo: Path, notes: Path) -> str:
    """The proxy in this process, its thread files' writes failing with ENOSPC while
    `full` (the agent is a real process; its pipe writes are untouched)."""
    from server.acp.proxy import AcpProxy

    full = False
    real_write = os.write

    def write(fd: int, data: Any) -> int:
        target = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc") else ""
        if full and target.startswith(str(home)):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    def fill() -> None:
        nonlocal full
        full = True

    def free() -> None:
        nonlocal full
        full = False

    editor = _Editor([])
    proxy = AcpProxy(home, fake_agent(state), editor.write)
    editor.proxy = proxy
    os.write = write  # type: ignore[assignment]
    try:
        await proxy.start_agent()
        await editor.request(1, "initialize", {"protocolVersion": 1})
        new = await editor.request(2, "session/new", {"cwd": str(repo), "mcpServers": []})
        session = new["result"]["sessionId"]
        ids = iter(range(3, 100))

        async def prompt(words: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
            before = len(editor.out)
            params = {"sessionId": session, "prompt": text(words)}
            answer = await editor.request(next(ids), "session/prompt", params)
            shown = [
                {k: v for k, v in m["params"].items() if k != "sessionId"}
                for m in editor.out[before:]
                if m.get("method") == "session/update"
            ]
            return {**answer, "session": session}, shown

        return await _scenario(prompt, fill, free, notes)
    finally:
        os.write = real_write  # type: ignore[assignment]
        await proxy.stop()
        proxy.close()
