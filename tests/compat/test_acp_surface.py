"""ACP's session surface through `sessiond acp`, against the real ACP agents (codex-acp,
claude-agent-acp, `gemini --acp`, pinned in tests/agents/package.json, answered by the
mock model), the official ACP SDK as the editor: list, resume (v1: no replay; the v2
draft's `replayFrom`), load, close, delete, fork and rename, whatever each agent offers of
them itself; native sub-agent sessions as child threads."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from tests.agents.mock_model import Call, Reply, Scenario
from tests.compat.conftest import Agents
from tests.compat.test_acp_agents import (
    EDITORS,
    HANG,
    new_session,
    shell,
    sleeping,
    tagged,
    watchdog_tag,
)
from tests.compat.test_codex import delegation
from tests.conftest import git
from tests.support.acp_editor import drawn, sessiond_acp, wait_for
from tests.test_acp import text

SURFACE = Scenario({
    "one": [Reply(text="First answer.")],
    "two": [Reply(text="Second answer.")],
    "three": [Reply(text="Third answer.")],
    "forked": [Reply(text="The fork remembers.")],
    "after": [Reply(text="Resumed and remembering.")],
})  # fmt: skip


def users(received: list[dict[str, Any]]) -> list[str]:
    """The person's messages in a replay, in order."""
    return [
        p["update"]["content"]["text"]
        for p in drawn(received)
        if p["update"]["sessionUpdate"] == "user_message_chunk"
    ]


def prepare(agents: Agents, agent: str, script: Scenario) -> tuple[list[str], dict[str, str], Path]:
    """The agent's ACP command, its environment and its repository."""
    place = agents.start(script)
    if agent == "codex":
        place.write_codex_config(model="gpt-5.5")
    return place.acp_command(agent), place.env(), place.repo


@pytest.mark.parametrize("agent", ["codex", "claude", "gemini"])
async def test_the_stable_session_methods_fork_and_rename_on_a_real_agent(
    agents: Agents, tmp_path: Path, agent: str
) -> None:
    """One session of three turns (the second with the editor's `messageId`), then, in a
    new `sessiond acp`: list; resume without a replay (v1) and its next prompt reaching
    the model with the history; close; resume with `replayFrom: start` (the v2 draft's
    load) and from the second message on; load (v1); rename (listed by its new title);
    fork (AGENT's own or emulated) whose prompt the model gets with the history; delete
    (gone from the list, and again: still no error)."""
    command, env, place_repo = prepare(agents, agent, SURFACE)
    home = tmp_path / "sessiond"
    named = str(uuid.uuid4())
    prompts = ["[[one]] first", "[[two]] second", "[[three]] third"]
    async with sessiond_acp(home, command, env=env) as run:
        session = await new_session(run, agent, place_repo)
        await run.conn.prompt(session_id=session, prompt=text(prompts[0]))
        await run.call("session/prompt", {"sessionId": session, "prompt": text(prompts[1]),
                                          "messageId": named})  # fmt: skip
        await run.conn.prompt(session_id=session, prompt=text(prompts[2]))
    base = {"sessionId": session, "cwd": str(place_repo), "mcpServers": []}
    async with sessiond_acp(home, command, env=env) as run:
        listed = await run.conn.list_sessions(cwd=str(place_repo))
        assert [(s.session_id, s.title) for s in listed.sessions] == [(session, prompts[0])]

        resumed = await run.call("session/resume", base)  # v1: no replay
        assert run.editor.received == [] and resumed["_meta"]["sessiond"]["status"] == "ready"
        after = await run.conn.prompt(session_id=session, prompt=text("[[after]] go on"))
        assert after.stop_reason == "end_turn"
        history = _asked(agents, "after")
        for earlier in (*prompts, "First answer.", "Third answer."):
            assert earlier in history, (agent, earlier)
        assert await run.call("session/close", {"sessionId": session}) == {}
        with pytest.raises(RequestError):  # closed: a prompt does not silently reopen it
            await run.conn.prompt(session_id=session, prompt=text("[[after]] closed?"))

        at = len(run.editor.received)
        await run.call("session/resume", {**base, "replayFrom": {"type": "start"}})
        assert users(run.editor.received[at:]) == [*prompts, "[[after]] go on"]
        await run.call("session/close", {"sessionId": session})
        at = len(run.editor.received)
        cursor = {"type": "_sessiond/message", "messageId": named}
        await run.call("session/resume", {**base, "replayFrom": cursor})
        assert users(run.editor.received[at:]) == [*prompts[1:], "[[after]] go on"]
        await run.call("session/close", {"sessionId": session})
        at = len(run.editor.received)
        await run.conn.load_session(cwd=str(place_repo), session_id=session)
        assert users(run.editor.received[at:]) == [*prompts, "[[after]] go on"]

        renamed = await run.call("_sessiond/session/rename", {"sessionId": session,
                                                              "title": "Renamed here"})  # fmt: skip
        assert renamed["_meta"]["sessiond"]["title"] == "Renamed here"
        offers = run.extra["initialize"].field_meta["sessiond"]["agentCapabilities"]
        takes_title = (offers.get("sessionCapabilities") or {}).get("title") is not None
        assert renamed["_meta"]["sessiond"]["forwarded"] is takes_title  # codex-acp: set_title
        listed = await run.conn.list_sessions(cwd=str(place_repo))
        assert [(s.session_id, s.title) for s in listed.sessions] == [(session, "Renamed here")]

        fork = await run.call("session/fork", base)
        forked = fork["sessionId"]
        assert forked != session
        answer = await run.conn.prompt(session_id=forked, prompt=text("[[forked]] and now?"))
        assert answer.stop_reason == "end_turn"
        history = _asked(agents, "forked")
        for earlier in (prompts[0], "Second answer.", "[[after]] go on"):
            assert earlier in history, (agent, "fork", earlier)
        listed = await run.conn.list_sessions(cwd=str(place_repo))
        assert {s.session_id for s in listed.sessions} == {session, forked}

        assert await run.call("session/delete", {"sessionId": forked}) == {}
        assert await run.call("session/delete", {"sessionId": forked}) == {}  # again: fine
        listed = await run.conn.list_sessions(cwd=str(place_repo))
        assert [s.session_id for s in listed.sessions] == [session]


def _asked(agents: Agents, scenario: str) -> str:
    """What the model was sent for `scenario`: every main request of it (Codex also asks
    for a title with the turn's words, at a moment of its own, with less history)."""
    assert agents.model is not None
    asked = [r for r in agents.model.main_requests() if r.scenario() == scenario]
    assert asked, scenario
    return "\n".join(str(r.text()) for r in asked)


@pytest.mark.parametrize(
    ("agent", "editor"),
    [("claude", "subagents-rfd"), ("claude", "jetbrains-air"), ("codex", "subagents-rfd")],
)
async def test_a_native_sub_agent_session_of_a_real_agent_is_a_child_thread(
    agents: Agents, home: Path, spawn: Any, agent: str, editor: str
) -> None:
    """An editor offering native sub-agent sessions gets them from claude-agent-acp and
    codex-acp: every session the editor is shown is the parent or a thread under it
    (`parentThreadId`), and the sub-agent's own tool call is recorded in its child
    thread, not in the parent."""
    if agent == "claude":
        script = Scenario({
            "delegate": [Reply(calls=(Call("Agent", {
                "description": "Check the tree", "subagent_type": "general-purpose",
                "prompt": "[[child]] list the files"}),)), Reply(text="The sub-agent is done.")],
            "child": [Reply(calls=(shell("claude", "echo from-the-sub-agent"),)),
                      Reply(text="Listed.")],
        })  # fmt: skip
        command, env, repo = prepare(agents, agent, script)
        ask = "[[delegate]] ask it"
    else:
        place = agents.start(delegation(code_mode=False))
        place.write_codex_config(model="gpt-5.5", multi_agent_v2=True)
        command, env, repo = place.acp_command(agent), place.env(), place.repo
        ask = "[[parent]] delegate"
    async with sessiond_acp(home, command, env=env, capabilities=EDITORS[editor]) as run:
        session = await new_session(run, agent, repo)
        done = await run.conn.prompt(session_id=session, prompt=text(ask))
        assert done.stop_reason == "end_turn"
        received = list(run.editor.received)
    shown_in = {p["sessionId"] for p in received}
    server = spawn()
    server.initialize([str(repo)])
    children = server.request("thread/list", {"parentThreadId": session})["threads"]
    child_ids = {c["threadId"] for c in children}
    assert children and shown_in == {session} | child_ids, (shown_in, child_ids)
    announced = [p["update"] for p in received if p["update"]["sessionUpdate"] in (
        "subagent_update", "subagent_spawned", "subagent_state_update")]  # fmt: skip
    named = {u.get("sessionId") or u.get("subagentSessionId") for u in announced}
    assert named == child_ids  # the RFD's form (`sessionId`), AIR's (`subagentSessionId`)
    child_ops: list[str] = []
    for child in child_ids:
        items = server.request("thread/read", {"threadId": child, "limit": 500})["items"]
        child_ops += [str(i.get("title")) for i in items if i["type"] == "operation"]
    parent_items = server.request("thread/read", {"threadId": session, "limit": 500})["items"]
    parent_ops = [str(i.get("title")) for i in parent_items if i["type"] == "operation"]
    mark = "from-the-sub-agent" if agent == "claude" else "List files"  # codex: `ls | wc -l`
    assert any(mark in title for title in child_ops), child_ops
    assert not any(mark in title for title in parent_ops), parent_ops
    with contextlib.suppress(Exception):
        server.close()


async def test_a_drifted_real_agent_session_loaded_twice_is_replayed_whole_and_asked_once(
    agents: Agents, tmp_path: Path
) -> None:
    """The drift-reload defect, with claude-agent-acp: a session recorded on one branch,
    loaded on another (held for the person's decision), then loaded again — as
    CodeCompanion's `/resume` twice — replays the conversation, not only the notice; the
    next prompt asks once, and once allowed reaches the agent."""
    command, env, repo = prepare(agents, "claude", SURFACE)
    home = tmp_path / "sessiond"
    async with sessiond_acp(home, command, env=env) as run:
        session = await new_session(run, "claude", repo)
        await run.conn.prompt(session_id=session, prompt=text("[[one]] first"))
    git(repo, "checkout", "-q", "-b", "elsewhere")
    async with sessiond_acp(home, command, env=env) as run:
        await run.conn.load_session(cwd=str(repo), session_id=session)
        at = len(run.editor.received)
        loaded = await run.conn.load_session(cwd=str(repo), session_id=session)
        again = run.editor.received[at:]
        answer = await run.conn.prompt(session_id=session, prompt=text("[[two]] go on here"))
        asked = list(run.editor.permissions)
    assert users(again) == ["[[one]] first"]
    assert "First answer." in "".join(
        p["update"]["content"].get("text", "")
        for p in again
        if p["update"]["sessionUpdate"] == "agent_message_chunk"
    )
    assert loaded.field_meta["sessiond"]["status"] == "needs_review"
    assert "branch" in {d["field"] for d in loaded.field_meta["sessiond"]["drift"]}
    assert [str(q.title) for q in asked if "Continue this session here?" in str(q.title)]
    assert len(asked) == 1 and answer.stop_reason == "end_turn"
    assert "[[one]] first" in _asked(agents, "two")


async def test_a_real_agent_killed_while_its_first_words_are_a_permission_shows_the_call(
    agents: Agents, tmp_path: Path
) -> None:
    """The recovery-id defect, with `gemini --acp`: it asks before it sends a word of the
    turn. sessiond killed (-9) while the allowed command runs; the next load shows that
    tool call closed as failed (the recovery's close no longer takes the prompt echo's id,
    which the store dropped as a duplicate)."""
    script = Scenario({"hang": [Reply(calls=(shell("gemini", HANG[0]),))]})
    command, env, repo = prepare(agents, "gemini", script)
    home = tmp_path / "sessiond"
    async with sessiond_acp(home, command, env=env) as run:
        session = await new_session(run, "gemini", repo)
        hang = asyncio.ensure_future(
            run.conn.prompt(session_id=session, prompt=text("[[hang]] wait a while"))
        )
        tag = watchdog_tag(run.process.pid)
        await wait_for(lambda: sleeping(tag) is not None and run.editor.permissions, "it runs")
        asked = run.editor.permissions[0].tool_call_id
        left = tagged(tag)
        run.kill9()
        await run.process.wait()
        with contextlib.suppress(Exception):
            await hang
    try:
        await wait_for(lambda: not tagged(tag), "every process of the killed proxy gone")
    finally:
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    async with sessiond_acp(home, command, env=env) as run:
        await run.conn.load_session(cwd=str(repo), session_id=session)
        replayed = [p["update"] for p in run.editor.received]
    closed = [u for u in replayed if u.get("toolCallId") == asked and u.get("status") == "failed"]
    assert len(closed) == 1, [u.get("sessionUpdate") for u in replayed]
    assert closed[0]["_meta"]["sessiond"]["interrupted"]
