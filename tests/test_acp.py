"""`sessiond acp`: the real chain — the official ACP SDK's client as the editor, `sessiond
acp` as a real process, and a scripted ACP agent (tests/support/acp_agent.py) as AGENT."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from restore.engine.subsystems import ThreadState
from restore.home.layout import Layout
from restore.stores.embedded.files import ThreadStore
from tests.conftest import git
from tests.support import fetched
from tests.support.acp_editor import (
    agent_log,
    drawn,
    fake_agent,
    sessiond_acp,
    wait_for,
)
from tests.support.processes import alive
from tests.support.rpc_client import ServerProcess

EDIT_UPDATES = 12
"""What the editor draws of the fake agent's `edit` prompt: its 13 session/update
notifications, its two thought chunks one text (`drawn`: sessiond may cut chunks anew)."""


def thread_items(home: Path, thread_id: str) -> list[dict[str, Any]]:
    return ThreadStore(Layout(home)).read(thread_id)[0].items


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def shown(received: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a replay must redraw: every update, without the session id."""
    return [{k: v for k, v in params.items() if k != "sessionId"} for params in received]


async def test_initialize_adds_sessiond_session_methods_to_any_agent(
    home: Path, tmp_path: Path
) -> None:
    async with sessiond_acp(home, fake_agent(tmp_path / "agent", caps="none")) as run:
        answer = run.extra["initialize"]
        maps = Path(f"/proc/{run.process.pid}/maps")
        before = maps.read_text()
        await run.conn.list_sessions()
        after = maps.read_text()
    # No warmup: the index (SQLite) is loaded by the first session method, not before.
    assert "_sqlite3" not in before and "_sqlite3" in after
    capabilities = answer.agent_capabilities
    assert capabilities.load_session is True
    sessions = capabilities.session_capabilities
    assert None not in (sessions.list, sessions.resume, sessions.close, sessions.delete)
    assert sessions.fork is not None  # unstable; this AGENT has none: emulated
    methods = answer.field_meta["sessiond"]["sessionMethods"]
    assert methods == {
        "fork": "emulated",
        "rename": "_sessiond/session/rename",
        "replayFrom": ["start", "_sessiond/message"],  # the v2 draft's resume, and from a message
    }
    assert capabilities.prompt_capabilities.image is True  # AGENT's own, passed through
    assert answer.agent_info.name == "fake-agent"
    assert answer.field_meta["sessiond"]["agentCapabilities"]["loadSession"] is False


async def test_a_prompt_is_recorded_onto_the_subsystems_and_listed_everywhere(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    notes = repo / "notes.txt"
    notes.write_text("before\n")
    async with sessiond_acp(home, fake_agent(tmp_path / "agent")) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        answer = await run.conn.prompt(session_id=session, prompt=text(f"edit {notes}"))
        listed = await run.conn.list_sessions(cwd=str(repo))
        received = list(run.editor.received)
    assert answer.stop_reason == "end_turn" and answer.usage.input_tokens == 100
    assert notes.read_text() == "before\nedited\n"
    assert len(drawn(received)) == EDIT_UPDATES
    assert {p["sessionId"] for p in received} == {session}  # the editor never sees AGENT's id
    assert drawn(received)[2]["_meta"] == {"fake": {"n": 1}}  # _meta forwarded untouched
    assert [s.session_id for s in listed.sessions] == [session]
    assert listed.sessions[0].title == "Editing a file"

    items = thread_items(home, session)
    raw = [i for i in items if i["type"] == "acp_update" and not i.get("synthesized")]
    assert [
        {"update": i["update"], **({"_meta": i["meta"]} if "meta" in i else {})} for i in raw
    ] == (shown(received))
    messages = [
        (i["role"], i.get("thought", False), i["content"]) for i in items if i["type"] == "message"
    ]
    assert messages == [
        ("user", False, text(f"edit {notes}")),
        ("assistant", True, text("Thinking about the edit.")),
        ("assistant", False, text("I will edit the file.")),
        ("assistant", False, text("Done.")),
    ]
    steps = [(i["state"], i["tool"]) for i in items if i["type"] == "operation"]
    assert steps == [("planned", "edit"), ("started", "edit"), ("committed", "edit")]
    edits = [i for i in items if i["type"] == "file_edit"]
    assert len(edits) == 1 and edits[0]["path"] == str(notes)
    assert edits[0]["afterSha"] == hashlib.sha256(notes.read_bytes()).hexdigest()
    assert edits[0]["beforeSha"] == hashlib.sha256(b"before\n").hexdigest()
    assert (Layout(home).blob_path(edits[0]["afterSha"])).read_bytes() == notes.read_bytes()
    decision = next(i for i in items if i["type"] == "permission_decision")
    assert decision["allowed"] is True and decision["paths"] == [str(notes)]

    state = ThreadState().apply_all(items).states
    assert state["cost"]["usd"] == 0.25
    assert (state["cost"]["inputTokens"], state["cost"]["outputTokens"]) == (100, 20)
    assert [t["content"] for t in state["todos"]["items"]] == ["Edit the file", "Run the tests"]
    assert state["permissions"]["approvalMode"] == "acceptEdits"
    assert state["model_override"] == {"model": "fake-model-2"}
    assert state["attribution"]["files"][str(notes)]["approved"] == 1
    assert state["operations"]["open"] == {}
    turn = [i["phase"] for i in items if i["type"] == "turn"]
    assert turn == ["started", "completed"]

    # The same thread, over sessiond's own protocol, from another process.
    server = ServerProcess(home)
    try:
        server.initialize()
        rows = server.request("thread/list", {"cwd": str(repo)})["threads"]
    finally:
        server.close()
    assert [r["threadId"] for r in rows] == [session]
    assert rows[0]["origin"]["agent"] == "acp"
    assert rows[0]["origin"]["sessionId"].startswith("fake-")
    assert rows[0]["preview"] == f"edit {notes}"


async def test_a_write_outside_the_workspace_is_never_read_for_its_before_blob(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    """The before-blob of an `fs/write_text_file` is read only inside the thread's
    workspace (restore/access.py): for a file elsewhere sessiond reads nothing, so the
    recorded edit has no before-sha. (Whether the write happens is the editor's call.)"""
    repo = make_repo("repo")
    secret = tmp_path / "elsewhere" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("not the agent's\n")
    async with sessiond_acp(home, fake_agent(tmp_path / "agent")) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text(f"edit {secret}"))
    edits = [i for i in thread_items(home, session) if i["type"] == "file_edit"]
    assert len(edits) == 1 and edits[0]["path"] == str(secret)
    assert edits[0].get("beforeSha") is None


async def test_kill_9_mid_turn_loses_nothing_the_editor_was_shown(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    notes = repo / "notes.txt"
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        turn = asyncio.ensure_future(
            run.conn.prompt(session_id=session, prompt=text(f"edit {notes} then hang"))
        )
        titled = lambda: any(  # noqa: E731 - the last update before the turn's last word
            p["update"].get("title") == "Editing a file" for p in run.editor.received
        )
        await wait_for(titled, "the whole turn but its last word")
        received = list(run.editor.received)
        agent_pid = agent_log(state)[-1]["pid"]
        run.kill9()
        await run.process.wait()
        with pytest.raises(Exception):  # noqa: B017 - the connection is gone, whatever it says
            await turn
    await wait_for(lambda: not alive(agent_pid), "AGENT dying with sessiond (PDEATHSIG)")

    async with sessiond_acp(home, fake_agent(state)) as run:
        listed = await run.conn.list_sessions()
        assert [s.session_id for s in listed.sessions] == [session]
        loaded = await run.conn.load_session(cwd=str(repo), session_id=session)
        replayed = shown(run.editor.received)
    prompt = [p for p in replayed if p["update"]["sessionUpdate"] == "user_message_chunk"]
    assert len(prompt) == 1 and isinstance(prompt[0]["update"]["messageId"], str)  # a cursor
    assert prompt == [
        {
            "update": {
                "sessionUpdate": "user_message_chunk",
                "content": text(f"edit {notes} then hang")[0],
                "messageId": prompt[0]["update"]["messageId"],
            }
        }
    ]
    assert [p for p in replayed if p not in prompt] == shown(received)
    assert loaded.field_meta["sessiond"]["continueReason"] == "process_recovery"

    items = thread_items(home, session)
    turns = [(i["phase"], i.get("continueReason")) for i in items if i["type"] == "turn"]
    assert turns == [("started", None), ("interrupted", "process_recovery")]
    said = [i["content"] for i in items if i["type"] == "message" and i["role"] == "assistant"]
    # The turn's last message is one word, held back (a secret may be in progress at the
    # end of a message, restore/sources/acp_chunks.py) until the turn ends, which it never
    # did: not shown, so not recorded. All the editor was shown is (above).
    assert text("Done.") not in said and text("I will edit the file.") in said
    assert "Done." not in json.dumps(received)


@pytest.mark.parametrize(
    ("caps", "upstream"), [("resume", "resume"), ("load", "load"), ("none", "new")]
)
async def test_a_prompt_after_load_reaches_agent_by_the_best_path_it_offers(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path], caps: str, upstream: str
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state, caps)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("remember the number 42"))
    first_agent_session = agent_log(state)[-1]["sid"]

    async with sessiond_acp(home, fake_agent(state, caps)) as run:
        loaded = await run.conn.load_session(cwd=str(repo), session_id=session)
        replayed = run.editor.texts()
        answer = await run.conn.prompt(session_id=session, prompt=text("what was it?"))
        echoed = run.editor.texts()[len(replayed) :]
    assert answer.stop_reason == "end_turn"
    assert replayed == ["remember the number 42", "echo: remember the number 42"]
    assert echoed == ["echo: what was it?"]
    assert loaded.field_meta["sessiond"]["upstream"] == "reaching"  # answered from the record
    meta = answer.field_meta["sessiond"]  # the first prompt says how AGENT's was reached
    assert meta["upstream"] == upstream
    assert meta["primed"] is (upstream == "new")

    log = [e for e in agent_log(state) if e["event"].startswith("session/")]
    second = [e for e in log if e["pid"] != log[0]["pid"]]
    reopened, prompt = second[0], second[-1]
    assert reopened["event"] == f"session/{upstream}"
    blocks = [b["text"] for b in prompt["params"]["prompt"]]
    if upstream == "new":
        assert reopened["sid"] is None and prompt["sid"] != first_agent_session
        assert len(blocks) == 2 and blocks[1] == "what was it?"
        assert "remember the number 42" in blocks[0] and "echo: remember the number 42" in blocks[0]
    else:
        assert reopened["sid"] == first_agent_session == prompt["sid"]
        assert blocks == ["what was it?"]  # AGENT has its history: no priming
    items = thread_items(home, session)
    vias = [i["via"] for i in items if i["type"] == "acp_session"]
    assert vias == ["new", upstream]


async def test_turns_an_agent_lost_are_handed_back_to_it_after_a_load(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    """An agent whose own store lags behind what it showed (`--lags`: as Claude Code,
    whose transcript is written a moment after the turn) loses its newest turn when it is
    stopped; its load replay shows what it kept, and its next prompt gets the rest."""
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state, "load", "--lags")) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("remember the number 42"))
        await run.conn.prompt(session_id=session, prompt=text("and the colour blue"))
    async with sessiond_acp(home, fake_agent(state, "load", "--lags")) as run:
        await run.conn.load_session(cwd=str(repo), session_id=session)
        answer = await run.conn.prompt(session_id=session, prompt=text("what were they?"))
    assert answer.field_meta["sessiond"] == {"upstream": "load", "primed": True}
    prompt = [e for e in agent_log(state) if e["event"] == "session/prompt"][-1]
    primed, typed = (block["text"] for block in prompt["params"]["prompt"])
    assert typed == "what were they?"
    assert primed.startswith("[sessiond] Your session was stopped before it kept its last turns")
    assert "and the colour blue" in primed and "echo: and the colour blue" in primed
    assert "remember the number 42" not in primed  # it kept that one


async def test_an_editor_that_knows_sessiond_gets_drift_as_a_typed_error_unless_accepted(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    """`_meta.sessiond.acceptDrift: false` asks for the typed error (editors that do not
    know sessiond get the question instead: tests/test_acp_editors.py)."""
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("hello"))
    git(repo, "checkout", "-q", "-b", "elsewhere")

    async with sessiond_acp(home, fake_agent(state)) as run:
        with pytest.raises(RequestError) as refused:
            await run.conn.load_session(
                cwd=str(repo), session_id=session, sessiond={"acceptDrift": False}
            )
        assert run.editor.received == []  # nothing replayed, nothing opened
        loaded = await run.conn.load_session(
            cwd=str(repo), session_id=session, sessiond={"acceptDrift": True}
        )
        answer = await run.conn.prompt(session_id=session, prompt=text("go on"))
    assert refused.value.data["kind"] == "WorkspaceDrift"
    drift = {d["field"]: d for d in refused.value.data["drift"]}
    assert drift["branch"]["recorded"] == "main" and drift["branch"]["current"] == "elsewhere"
    assert loaded.field_meta["sessiond"]["drift"][0]["field"] == "branch"
    assert answer.stop_reason == "end_turn"
    assert any(i["type"] == "drift_accepted" for i in thread_items(home, session))


async def test_delete_archives_the_session_out_of_the_list(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state, caps="all")) as run:
        kept = (await run.conn.new_session(cwd=str(repo))).session_id
        gone = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=kept, prompt=text("kept"))
        await run.conn.prompt(session_id=gone, prompt=text("soon deleted"))
        assert await run.call("session/delete", {"sessionId": gone}) == {}
        assert await run.call("session/delete", {"sessionId": gone}) == {}  # again: no error
        listed = await run.conn.list_sessions()
    assert [s.session_id for s in listed.sessions] == [kept]
    assert Layout(home).thread_path(gone, archived=True).exists()
    assert not Layout(home).thread_path(gone).exists()
    assert "session/delete" in [e["event"] for e in agent_log(state)]  # AGENT's copy too


async def test_an_agent_dying_mid_turn_fails_the_turn_and_the_next_prompt_restarts_it(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        with pytest.raises(RequestError) as died:
            await run.conn.prompt(session_id=session, prompt=text("die"))
        answer = await run.conn.prompt(session_id=session, prompt=text("still there?"))
        assert run.editor.texts()[-1] == "echo: still there?"
    assert died.value.data["kind"] == "AgentExited" and died.value.data["exitCode"] == 3
    assert answer.stop_reason == "end_turn"
    log = agent_log(state)
    pids = list(dict.fromkeys(e["pid"] for e in log))
    assert len(pids) == 2
    restarted = [e for e in log if e["pid"] == pids[1] and e["event"].startswith("session/")]
    assert [e["event"] for e in restarted] == ["session/resume", "session/prompt"]
    assert (
        restarted[0]["sid"]
        == log[-1]["sid"]
        == next(e["sid"] for e in log if e["event"] == "session/prompt")
    )
    turns = [
        (i["phase"], i.get("continueReason"))
        for i in thread_items(home, session)
        if i["type"] == "turn"
    ]
    assert turns[:2] == [("started", None), ("interrupted", "agent_exited")]
    assert turns[2:] == [("started", None), ("completed", None)]


@pytest.mark.parametrize("how", ["editor closes", "kill -9"])
async def test_no_agent_outlives_sessiond_even_one_stuck_in_a_tool_call(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path], how: str
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        turn = asyncio.ensure_future(run.conn.prompt(session_id=session, prompt=text("busy")))
        await wait_for(lambda: any(e["event"] == "busy" for e in agent_log(state)), "busy")
        agent_pid = agent_log(state)[-1]["pid"]
        if how == "kill -9":
            run.kill9()
            await run.process.wait()
        turn.cancel()
    assert run.process.returncode is not None
    await wait_for(lambda: not alive(agent_pid), "AGENT gone")


async def test_session_start_hooks_fire_for_acp_sessions(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    log = tmp_path / "hooks.jsonl"
    hook = Path(__file__).with_name("support") / "hook_program.py"
    command = {"type": "command", "command": f"{sys.executable} {hook} {log} ok"}
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "hooks.json").write_text(
        json.dumps({"SessionStart": [{"matcher": "startup|resume", "hooks": [command]}]})
    )
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("hello"))  # writes the thread
        await wait_for(lambda: log.exists(), "the startup hook")
    async with sessiond_acp(home, fake_agent(state)) as run:
        await run.conn.resume_session(cwd=str(repo), session_id=session)

        def sources() -> list[str]:
            lines = log.read_text().splitlines()
            return [json.loads(line)["payload"]["source"] for line in lines]

        await wait_for(lambda: sources() == ["startup", "resume"], "the resume hook")
    payload = json.loads(log.read_text().splitlines()[0])["payload"]
    assert payload["threadId"] == session and payload["cwd"] == str(repo)
    lifecycle = [i for i in thread_items(home, session) if i["type"] == "lifecycle"]
    assert {"started", "completed"} <= {i["status"] for i in lifecycle}


async def test_the_sdk_example_echo_agent_works_behind_sessiond(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path], echo_agent: Path
) -> None:
    repo = make_repo("repo")
    async with sessiond_acp(home, [sys.executable, str(echo_agent)]) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        answer = await run.conn.prompt(session_id=session, prompt=text("hello echo"))
        echoed = list(run.editor.received)
    assert answer.stop_reason == "end_turn"
    assert [p["update"]["content"]["text"] for p in drawn(echoed)] == ["hello echo"]
    assert echoed[0]["_meta"] == {"source": "echo_agent"}  # the agent's _meta, untouched
    async with sessiond_acp(home, [sys.executable, str(echo_agent)]) as run:
        await run.conn.load_session(cwd=str(repo), session_id=session)
        replayed = run.editor.texts()
        again = await run.conn.prompt(session_id=session, prompt=text("still there?"))
    assert again.field_meta["sessiond"]["upstream"] == "new"  # the echo agent cannot load
    assert replayed == ["hello echo", "hello echo"]  # the prompt, then the echo


@pytest.fixture(scope="session")
def echo_agent() -> Path:
    """examples/echo_agent.py from the installed SDK's sdist (fetched before the run:
    tests/support/fetched.py)."""
    return fetched.acp_sdk_example("echo_agent.py")


async def test_an_agent_without_fork_gets_one_emulated_primed_with_the_history(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state, caps="none")) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("remember the number 42"))
        forked = await run.conn.fork_session(cwd=str(repo), session_id=session)
        fork = forked.session_id
        assert forked.field_meta["sessiond"]["fork"] == "emulated"
        await run.conn.prompt(session_id=fork, prompt=text("what was it?"))
        await run.conn.prompt(session_id=session, prompt=text("the original goes on"))
        listed = {s.session_id for s in (await run.conn.list_sessions()).sessions}
    assert fork != session and listed == {session, fork}
    items = thread_items(home, fork)
    meta = next(i for i in items if i["type"] == "session_meta")
    assert meta["forkedFrom"]["threadId"] == session
    prompts = [i["content"] for i in items if i["type"] == "message" and i["role"] == "user"]
    assert prompts == [text("remember the number 42"), text("what was it?")]
    assert text("the original goes on") not in prompts
    # The fork's AGENT session is a new one, handed the history with its first prompt.
    log = [e for e in agent_log(state) if e["event"] == "session/prompt"]
    first, on_fork = log[0], log[1]
    assert on_fork["sid"] != first["sid"]
    blocks = [b["text"] for b in on_fork["params"]["prompt"]]
    assert len(blocks) == 2 and "remember the number 42" in blocks[0]
    assert blocks[1] == "what was it?"


async def test_rename_is_a_sessiond_extension_recorded_as_the_title(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    async with sessiond_acp(home, fake_agent(tmp_path / "agent", caps="none")) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        renamed = await run.conn.ext_method(
            "sessiond/session/rename", {"sessionId": session, "title": "the wombat's burrow"}
        )
        listed = (await run.conn.list_sessions()).sessions
        with pytest.raises(RequestError):
            await run.conn.ext_method(
                "sessiond/session/rename", {"sessionId": session, "title": ""}
            )
    assert renamed["_meta"]["sessiond"] == {"title": "the wombat's burrow", "forwarded": False}
    assert [s.title for s in listed if s.session_id == session] == ["the wombat's burrow"]
    titles = [i["title"] for i in thread_items(home, session) if i["type"] == "thread_title"]
    assert titles == ["the wombat's burrow"]  # named before its first prompt: kept


async def test_fork_is_offered_only_by_an_agent_that_forks_and_copies_the_history(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state, caps="all")) as run:
        assert run.extra["initialize"].agent_capabilities.session_capabilities.fork is not None
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("before the fork"))
        fork = (await run.conn.fork_session(cwd=str(repo), session_id=session)).session_id
        await run.conn.prompt(session_id=fork, prompt=text("on the fork"))
        assert await run.conn.close_session(session_id=session) is not None
        listed = {s.session_id for s in (await run.conn.list_sessions()).sessions}
    assert fork != session and listed == {session, fork}
    forked = thread_items(home, fork)
    prompts = [i["content"] for i in forked if i["type"] == "message" and i["role"] == "user"]
    assert prompts == [text("before the fork"), text("on the fork")]
    meta = next(i for i in forked if i["type"] == "session_meta")
    assert meta["forkedFrom"]["threadId"] == session
    events = [(e["event"], e["sid"]) for e in agent_log(state) if e["event"].startswith("session/")]
    original = next(sid for event, sid in events if event == "session/prompt")
    agent_sessions = [i["agentSessionId"] for i in forked if i["type"] == "acp_session"]
    assert agent_sessions[0] == original  # copied with the history; then AGENT's own fork
    assert ("session/prompt", agent_sessions[-1]) in events and agent_sessions[-1] != original
    assert ("session/close", original) in events
