"""`sessiond acp` stays within its bounds whatever AGENT streams: memory under a flood of
updates for a session nobody opened (measured on the real process, /proc), and merging a
message's chunks in work linear in its size (counted, not timed; the time is in
bench/acp.py beside a baseline)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from restore.sources import acp as source
from server.acp.state import MAX_QUEUED
from tests.support.acp_editor import agent_log, drawn, fake_agent, sessiond_acp, wait_for
from tests.test_acp import text

FLOOD = 200_000
"""1 KB updates: the flood that drove the proxy to 445 MiB."""
RSS_LIMIT_KIB = 100 * 1024


def peak_rss_kib(pid: int) -> int:
    """The process's peak resident set (VmHWM), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for {pid}")


async def test_a_flood_for_a_session_nobody_opened_keeps_the_proxy_under_100_mib(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    agent = fake_agent(state, "resume", "--flood", str(FLOOD))
    async with sessiond_acp(home, agent) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        peak = peak_rss_kib(run.process.pid)
        answer = await run.conn.prompt(session_id=session, prompt=text("still here?"))
        reached = [p for p in run.editor.received if p["sessionId"] == session]
        stray = [p for p in run.editor.received if p["sessionId"] == "fake-nobody-opened"]
    assert next(e for e in agent_log(state) if e["event"] == "flooded")["count"] == FLOOD
    assert peak < RSS_LIMIT_KIB, f"peak RSS {peak / 1024:.0f} MiB"
    assert answer.stop_reason == "end_turn"
    assert [p["update"]["content"]["text"] for p in drawn(reached)] == ["echo: still here?"]
    assert 0 < len(stray) <= 256  # the newest of the flood, forwarded; the rest dropped
    assert "the oldest are dropped" in run.stderr.read_text()


class CountedText(str):
    """Chunk text that counts the characters every concatenation with it copies."""

    copied = 0

    def __add__(self, other: Any) -> str:
        CountedText.copied += len(self) + len(other)
        return str.__add__(self, other)

    def __radd__(self, other: Any) -> str:
        CountedText.copied += len(self) + len(other)
        return str.__add__(str(other), self)


def test_twenty_thousand_chunks_of_one_message_merge_in_linear_work() -> None:
    """Merging by concatenation copied the text so far at every chunk (quadratic: 10,000
    chunks of 1 KB took 32 s of CPU, the loop blocked). Counted here: the characters
    copied by concatenations while merging stay within the message's own size."""
    chunks = 20_000
    piece = "z" * 9 + "\n"
    recorder = source.ThreadRecorder("idle")
    recorder.begin_turn("turn", [{"type": "text", "text": "go"}])
    CountedText.copied = 0
    for _ in range(chunks):
        update = {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m",
            "content": {"type": "text", "text": CountedText(piece)},
        }
        recorder.update({"update": update})
    ended = recorder.end_turn("idle2", stop_reason="end_turn")
    (message,) = [i for i in ended.items if i["type"] == "message"]
    assert message["content"] == [{"type": "text", "text": piece * chunks}]
    assert CountedText.copied <= 2 * len(piece) * chunks, CountedText.copied


async def _hold_prompts(run: Any, session: str, state: Path, count: int) -> list[Any]:
    """A turn that never ends (`busy`), then `count` prompts sent behind it, in order."""
    turn = asyncio.ensure_future(run.conn.prompt(session_id=session, prompt=text("busy")))
    await wait_for(lambda: any(e["event"] == "busy" for e in agent_log(state)), "busy")
    held = [
        asyncio.ensure_future(run.conn.prompt(session_id=session, prompt=text(f"later {i}")))
        for i in range(count)
    ]
    await asyncio.ensure_future(run.conn.list_sessions())  # sent after them: they are held
    return [turn, *held]


def _prompts_agent_got(state: Path) -> list[str]:
    return [
        block["text"]
        for e in agent_log(state)
        if e["event"] == "session/prompt"
        for block in e["params"]["prompt"]
    ]


async def test_prompts_held_behind_a_running_turn_are_bounded_and_a_cancel_answers_them(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    """An editor that keeps sending while a turn runs gets `Overloaded` past the bound,
    not a proxy that grows; `session/cancel` ends the held prompts as claude-agent-acp
    ends the ones it queued: `cancelled`, never sent to AGENT."""
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        turn, *held = await _hold_prompts(run, session, state, MAX_QUEUED + 1)
        with pytest.raises(RequestError) as refused:
            await held[-1]
        await run.conn.cancel(session_id=session)
        answers = await asyncio.gather(*held[:-1])
        turn.cancel()
    assert refused.value.data["kind"] == "Overloaded"
    assert refused.value.data["limit"] == MAX_QUEUED
    assert [a.stop_reason for a in answers] == ["cancelled"] * MAX_QUEUED
    assert _prompts_agent_got(state) == ["busy"]


@pytest.mark.parametrize("how", ["session/close", "the editor goes away"])
async def test_prompts_held_when_the_session_ends_are_never_sent(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path], how: str
) -> None:
    """Held prompts of a session that closes are answered `cancelled`; when the editor
    goes away they die with it: AGENT is not started again to run them for nobody."""
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        turn, *held = await _hold_prompts(run, session, state, 3)
        if how == "session/close":
            await run.conn.close_session(session_id=session)
            answers = await asyncio.gather(*held)
            assert [a.stop_reason for a in answers] == ["cancelled"] * 3
        for waiting in (turn, *held):
            waiting.cancel()
    assert run.process.returncode is not None
    assert _prompts_agent_got(state) == ["busy"]
    assert len({e["pid"] for e in agent_log(state)}) == 1
