"""ACP's session surface as `sessiond acp` offers it, the v2 draft's shape included:
`session/resume {replayFrom}` (the draft folds `session/load` into resume) — no replay,
all of it, or from a message on — over the official ACP SDK's client as the editor,
`sessiond acp` a real process, tests/support/acp_agent.py as AGENT (the real agents:
tests/compat/test_acp_surface.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from tests.support.acp_editor import agent_log, drawn, fake_agent, sessiond_acp, wait_for
from tests.test_acp import text


def said(received: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Who said what in a replay: (kind, text) of each message (its chunks joined: sessiond
    may cut them anew, restore/sources/acp_chunks.py)."""
    out = []
    for params in drawn(received):
        update = params["update"]
        content = update.get("content")
        if update["sessionUpdate"].endswith("message_chunk") and isinstance(content, dict):
            out.append((update["sessionUpdate"], content.get("text", "")))
    return out


async def _three_turns(home: Path, repo: Path, state: Path, caps: str) -> tuple[str, str]:
    """A session of three prompts; the second carries the editor's own `messageId`."""
    named = str(uuid.uuid4())
    async with sessiond_acp(home, fake_agent(state, caps)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("one"))
        await run.call(
            "session/prompt", {"sessionId": session, "prompt": text("two"), "messageId": named}
        )
        await run.conn.prompt(session_id=session, prompt=text("three"))
    return session, named


@pytest.mark.parametrize("caps", ["none", "all"])
async def test_resume_replays_nothing_all_or_from_a_message_as_the_v2_draft_asks(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path], caps: str
) -> None:
    """Whatever AGENT offers (nothing; everything): resume without `replayFrom` replays
    nothing (v1, and the draft's default); `{type: start}` the whole conversation before
    answering, each of the person's messages with a `messageId`; sessiond's
    `{type: _sessiond/message}` from that message on, inclusive — the editor's own id or
    one a replay named. The session goes on after each."""
    repo = make_repo("repo")
    session, named = await _three_turns(home, repo, tmp_path / "agent", caps)
    whole = [
        ("user_message_chunk", "one"),
        ("agent_message_chunk", "echo: one"),
        ("user_message_chunk", "two"),
        ("agent_message_chunk", "echo: two"),
        ("user_message_chunk", "three"),
        ("agent_message_chunk", "echo: three"),
    ]
    base = {"sessionId": session, "cwd": str(repo), "mcpServers": []}
    async with sessiond_acp(home, fake_agent(tmp_path / "agent", caps)) as run:
        plain = await run.call("session/resume", base)
        assert run.editor.received == []
        assert plain["_meta"]["sessiond"]["status"] == "ready"
        await run.call("session/close", {"sessionId": session})

        await run.call("session/resume", {**base, "replayFrom": {"type": "start"}})
        replayed = list(run.editor.received)
        assert said(replayed) == whole
        ids = [p["update"].get("messageId") for p in replayed
               if p["update"]["sessionUpdate"] == "user_message_chunk"]  # fmt: skip
        assert ids[1] == named and None not in ids and len(set(ids)) == 3
        await run.call("session/close", {"sessionId": session})

        at = len(run.editor.received)
        cursor = {"type": "_sessiond/message", "messageId": named}
        await run.call("session/resume", {**base, "replayFrom": cursor})
        assert said(run.editor.received[at:]) == whole[2:]
        await run.call("session/close", {"sessionId": session})

        at = len(run.editor.received)  # a messageId the replay named, not the editor
        cursor = {"type": "_sessiond/message", "messageId": ids[2]}
        await run.call("session/resume", {**base, "replayFrom": cursor})
        assert said(run.editor.received[at:]) == whole[4:]
        at = len(run.editor.received)
        answer = await run.conn.prompt(session_id=session, prompt=text("four"))
        assert answer.stop_reason == "end_turn"
        assert said(run.editor.received[at:]) == [("agent_message_chunk", "echo: four")]


async def test_a_replay_cursor_that_names_nothing_is_a_typed_error_that_changes_nothing(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    session, _ = await _three_turns(home, repo, tmp_path / "agent", "none")
    base = {"sessionId": session, "cwd": str(repo), "mcpServers": []}
    async with sessiond_acp(home, fake_agent(tmp_path / "agent", "none")) as run:
        for cursor, says in [
            ({"type": "_sessiond/message", "messageId": str(uuid.uuid4())}, "has no message"),
            ({"type": "end"}, 'replayFrom must be {"type": "start"}'),
            ("start", 'replayFrom must be {"type": "start"}'),
        ]:
            with pytest.raises(RequestError) as refused:
                await run.call("session/resume", {**base, "replayFrom": cursor})
            assert refused.value.data["kind"] == "InvalidParams"
            assert refused.value.data["field"] == "replayFrom"
            assert says in str(refused.value)
        assert run.editor.received == []
        await run.call("session/resume", {**base, "replayFrom": {"type": "start"}})
        assert len(said(run.editor.received)) == 6  # nothing lost, nothing opened twice


def _sessions_in(received: list[dict[str, Any]]) -> set[str]:
    return {params["sessionId"] for params in received}


async def test_a_native_sub_agent_session_is_a_child_thread_named_by_its_thread_id(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path], spawn: Any
) -> None:
    """An editor offering native sub-agent sessions (the draft RFD's
    `clientCapabilities.subagents`) gets them: the offer reaches AGENT, which announces a
    child session and works in it. The child is a thread under its parent's
    (`parentThreadId`), named to the editor by that thread's id in the announcement, its
    updates and its permission request; its work is recorded there, not in the parent,
    and a load of either replays what the editor was shown of it."""
    repo = make_repo("repo")
    state = tmp_path / "agent"
    offer = {"subagents": {}}
    async with sessiond_acp(home, fake_agent(state), capabilities=offer) as run:
        parent = (await run.conn.new_session(cwd=str(repo))).session_id
        done = await run.conn.prompt(session_id=parent, prompt=text("delegate it"))
        received = list(run.editor.received)
        asked = list(run.editor.permissions)
    assert done.stop_reason == "end_turn"
    announced = [p["update"] for p in received
                 if p["update"]["sessionUpdate"] == "subagent_update"]  # fmt: skip
    assert len(announced) == 2 and {p["sessionId"] for p in received[:1]} == {parent}
    child = announced[0]["sessionId"]
    assert child != f"{parent}-child" and announced[1]["sessionId"] == child
    assert _sessions_in(received) == {parent, child}
    child_shown = [p for p in received if p["sessionId"] == child]
    assert [u["update"]["sessionUpdate"] for u in child_shown[:2]] == [
        "tool_call", "tool_call_update"]  # fmt: skip
    assert len(asked) == 1 and asked[0].tool_call_id == "t-sub"
    prompted = {e.get("sid") for e in agent_log(state) if e["event"] == "session/prompt"}
    assert len(prompted) == 1  # the editor prompted the parent; AGENT ran the child itself

    server = spawn()
    server.initialize([str(repo)])
    children = server.request("thread/list", {"parentThreadId": parent})["threads"]
    assert [(c["threadId"], c["title"]) for c in children] == [(child, "Check the tree")]
    top = server.request("thread/list", {})["threads"]
    assert [t["threadId"] for t in top] == [parent]  # a child is listed under its parent
    items = server.request("thread/read", {"threadId": child, "limit": 500})["items"]
    ops = {i["operationId"]: i for i in items if i["type"] == "operation"}
    assert [op["status"] for op in ops.values()] == ["completed"]
    assert any(i["type"] == "permission_decision" for i in items)
    said = [part["text"] for i in items if i["type"] == "message" for part in i["content"]]
    assert said == ["Listed: a.txt b.txt"]
    parent_items = server.request("thread/read", {"threadId": parent, "limit": 500})["items"]
    assert not [i for i in parent_items if i["type"] == "operation"]
    server.close()

    async with sessiond_acp(home, fake_agent(state), capabilities=offer) as run:
        await run.call(
            "session/resume",
            {
                "sessionId": parent,
                "cwd": str(repo),
                "mcpServers": [],
                "replayFrom": {"type": "start"},
            },
        )
        replayed_parent = list(run.editor.received)
        at = len(replayed_parent)
        await run.conn.load_session(cwd=str(repo), session_id=child)
        replayed_child = run.editor.received[at:]
    assert [p["update"] for p in replayed_parent if p["update"]["sessionUpdate"] ==
            "subagent_update"] == announced  # fmt: skip
    assert _sessions_in(replayed_child) == {child}
    shown_child = [{k: v for k, v in p.items() if k != "sessionId"} for p in child_shown]
    assert said_of(replayed_child) == said_of(shown_child)


def said_of(received: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return said([{"update": p["update"]} for p in received])


async def test_without_the_offer_a_sub_agent_works_in_its_parents_session(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    async with sessiond_acp(home, fake_agent(tmp_path / "agent")) as run:
        parent = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=parent, prompt=text("delegate it"))
        received = list(run.editor.received)
    assert _sessions_in(received) == {parent}
    assert "subagent_update" not in {p["update"]["sessionUpdate"] for p in received}


async def test_a_rename_reaches_an_agent_that_takes_a_title(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    """An AGENT advertising `sessionCapabilities.title` (the SDK's unstable
    `session/set_title`, codex-acp 2.6's) is sent the title under its own session id, also
    right after a load, while its session is still being reached."""
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state, "all")) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("one"))
    async with sessiond_acp(home, fake_agent(state, "all")) as run:
        await run.conn.load_session(cwd=str(repo), session_id=session)
        renamed = await run.call(
            "_sessiond/session/rename", {"sessionId": session, "title": "Named"}
        )
    assert renamed["_meta"]["sessiond"] == {
        "title": "Named", "forwarded": True, "forwardedAs": "session/set_title"}  # fmt: skip
    told = [e for e in agent_log(state) if e["event"] == "session/set_title"]
    opened = [e["sid"] for e in agent_log(state) if e["event"] == "session/prompt"]
    assert [(e["params"]["sessionId"], e["params"]["title"]) for e in told] == [
        (opened[0], "Named")]  # fmt: skip


async def test_a_session_reopened_while_the_agent_still_loads_it_is_replayed_once(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    """Resume, close and load again while AGENT's own load of the session (started by the
    resume, in the background) is still on its way: AGENT then replays its history twice,
    and the first load's end let the second replay through to the editor, the
    conversation drawn twice. AGENT's replays are held back until its last load ends."""
    repo = make_repo("repo")
    state = tmp_path / "agent"
    agent = fake_agent(state, "load", "--load-delay=0.5")
    async with sessiond_acp(home, agent) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("one"))
    async with sessiond_acp(home, agent) as run:
        other = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=other, prompt=text("AGENT runs"))
        base = {"sessionId": session, "cwd": str(repo), "mcpServers": []}
        await run.call("session/resume", base)
        loads = lambda: [e for e in agent_log(state) if e["event"] == "session/load"]  # noqa: E731
        await wait_for(lambda: len(loads()) == 1, "AGENT's load on its way")
        await run.call("session/close", {"sessionId": session})
        at = len(run.editor.received)
        await run.conn.load_session(cwd=str(repo), session_id=session)
        answer = await run.conn.prompt(session_id=session, prompt=text("two"))
        shown = run.editor.received[at:]
    assert answer.stop_reason == "end_turn" and len(loads()) == 2
    assert {p["sessionId"] for p in shown} == {session}  # nothing under AGENT's own id
    users = [t for kind, t in said(shown) if kind == "user_message_chunk"]
    assert users == ["one"]  # sessiond's replay, once; AGENT's two held back
