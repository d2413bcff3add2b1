"""`sessiond acp` at the door: no line can wedge it, and every request it cannot take is
answered, naming what is wrong in ACP's own words. A real `sessiond acp` process on plain
pipes (tests/support/acp_editor.py `RawEditor`: bytes the SDK would never send) in front of the
scripted agent (tests/support/acp_agent.py); the SDK's client where the request is well formed."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from restore.home.layout import Layout
from tests.support.acp_editor import (
    agent_log,
    drawn,
    fake_agent,
    raw_sessiond_acp,
    sessiond_acp,
)
from tests.test_acp import text, thread_items

INITIALIZE = {"protocolVersion": 1, "clientCapabilities": {}}


def kind_of(answer: dict[str, Any]) -> str:
    return str(answer["error"]["data"]["kind"])


@pytest.mark.parametrize("first", [b"this is not json", b"42", b"[1, 2]"])
async def test_a_first_line_that_is_not_a_message_is_answered_and_initialize_still_works(
    home: Path, tmp_path: Path, first: bytes
) -> None:
    async with raw_sessiond_acp(home, fake_agent(tmp_path / "agent")) as editor:
        await editor.send_line(first)
        refused = await editor.next_message()
        answer = await editor.request("initialize", INITIALIZE)
    assert refused["id"] is None
    expected = "ParseError" if first == b"this is not json" else "InvalidRequest"
    assert kind_of(refused) == expected
    assert refused["error"]["code"] == (-32700 if expected == "ParseError" else -32600)
    assert answer["result"]["agentInfo"]["name"] == "fake-agent"
    assert repr(first.decode())[1:-1] in editor.log()  # said in the log, with the line
    assert "initialize" in [e["event"] for e in agent_log(tmp_path / "agent")]


async def test_the_agent_gets_the_editors_capabilities_as_sent_sub_agent_offer_included(
    home: Path, tmp_path: Path
) -> None:
    """Native sub-agent sessions are recorded as child threads (server/acp/subagents.py),
    so the editor's offer of them reaches AGENT with everything else it declared. (Until
    they were recorded, the offer was taken out.)"""
    air = {"version": 1, "capabilities": ["nativeSubagentSessions", "asyncTasks"]}
    declared = {
        "fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True,
        "subagents": {}, "_meta": {"jetbrains": {"air": air}, "zed": {"x": 1}},
    }  # fmt: skip
    async with raw_sessiond_acp(home, fake_agent(tmp_path / "agent")) as editor:
        params = {"protocolVersion": 1, "clientCapabilities": declared,
                  "clientInfo": {"name": "an-editor", "version": "1"}}  # fmt: skip
        answer = await editor.request("initialize", params)
    assert answer["result"]["agentInfo"]["name"] == "fake-agent"
    (got,) = [e["params"] for e in agent_log(tmp_path / "agent") if e["event"] == "initialize"]
    assert got == params


async def test_an_agent_that_prints_a_banner_before_its_first_message_is_still_understood(
    home: Path, tmp_path: Path
) -> None:
    agent = fake_agent(tmp_path / "agent", "resume", "--banner")
    async with raw_sessiond_acp(home, agent) as editor:
        answer = await editor.request("initialize", INITIALIZE)
    assert answer["result"]["agentInfo"]["name"] == "fake-agent"
    assert "Fake agent 1.0 -- ready to help!" in editor.log()


async def test_a_line_that_is_not_json_is_logged_redacted_from_either_side(
    home: Path, tmp_path: Path
) -> None:
    """Issue 34: a stray line on AGENT's stdout (or from the editor) was logged as it
    was, secret included, in the log the editor keeps. It is logged redacted, as a record
    would be stored: what it was is still there to debug, the secret is not."""
    pat = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    agent = fake_agent(tmp_path / "agent", "resume", f"--banner-text=starting with {pat} ok")
    async with raw_sessiond_acp(home, agent) as editor:
        answer = await editor.request("initialize", INITIALIZE)
        assert answer["result"]["agentInfo"]["name"] == "fake-agent"
        await editor.send_line(f"oops {pat} not json".encode())
        refused = await editor.next_message()
        assert refused["error"]["code"] == -32700
    log = editor.log()
    assert "starting with [secret:github-pat:" in log and "oops [secret:github-pat:" in log
    assert pat not in log and pat[:12] not in log


async def test_a_message_nested_too_deep_is_answered_from_the_editor_and_cut_from_the_agent(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    """Nesting orjson parses (up to 1,024) but cannot write back (over 254): an editor's
    request 300 deep is refused with a typed error; an agent's update 900 deep is recorded
    and forwarded with what lies below 128 levels cut, its text intact."""
    repo = make_repo("repo")
    async with raw_sessiond_acp(home, fake_agent(tmp_path / "agent")) as editor:
        await editor.request("initialize", INITIALIZE)
        new = await editor.request("session/new", {"cwd": str(repo), "mcpServers": []})
        session = new["result"]["sessionId"]
        deep: Any = "x"
        for _ in range(300):
            deep = {"a": deep}
        block = {"type": "text", "text": "deep", "_meta": deep}
        refused = await editor.request("session/prompt", {"sessionId": session, "prompt": [block]})
        answer = await editor.request(
            "session/prompt", {"sessionId": session, "prompt": text("deep 900")}
        )
        shown = [
            m["params"]["update"] for m in editor.received if m.get("method") == "session/update"
        ]
    assert kind_of(refused) == "PayloadTooLarge"
    assert refused["error"]["data"]["depth"] == 304  # message, params, prompt, block, 300
    assert answer["result"]["stopReason"] == "end_turn"
    texts = [p["update"]["content"]["text"] for p in drawn([{"update": u} for u in shown])]
    assert texts == ["deep", "echo: after deep"]
    cut = shown[0]["_meta"]
    levels = 0
    while isinstance(cut, dict):
        cut, levels = cut["a"], levels + 1
    assert cut == "[sessiond: nested too deep, cut]" and levels < 128
    prompts = [e for e in agent_log(tmp_path / "agent") if e["event"] == "session/prompt"]
    assert len(prompts) == 1  # the refused prompt never reached the agent
    recorded = [i["update"] for i in thread_items(home, session) if i["type"] == "acp_update"]
    assert recorded[1:] == shown  # (the first is the prompt, drawn by the editor itself)


async def test_session_ids_and_params_that_cannot_be_a_session_are_refused_in_acp_words(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    unknown = str(uuid.uuid4())
    async with raw_sessiond_acp(home, fake_agent(state)) as editor:
        await editor.request("initialize", INITIALIZE)
        answers = {
            name: await editor.request(method, params)
            for name, method, params in [
                ("delete path", "session/delete", {"sessionId": "../../x"}),
                ("close path", "session/close", {"sessionId": "../../x"}),
                ("delete unknown", "session/delete", {"sessionId": unknown}),
                ("close unknown", "session/close", {"sessionId": unknown}),
                ("load word", "session/load", {"sessionId": "no-such-session", "cwd": str(repo)}),
                ("resume word", "session/resume", {"sessionId": "no-such-session"}),
                ("prompt word", "session/prompt", {"sessionId": "no-such-session", "prompt": []}),
                ("load unknown", "session/load", {"sessionId": unknown, "cwd": str(repo)}),
                ("load number", "session/load", {"sessionId": 42, "cwd": str(repo)}),
                ("list cwd number", "session/list", {"cwd": 7}),
                ("list array", "session/list", [str(repo)]),
                ("new relative", "session/new", {"cwd": "relative/dir", "mcpServers": []}),
                ("new no cwd", "session/new", {"mcpServers": []}),
                ("new missing dir", "session/new", {"cwd": str(repo / "gone")}),
            ]
        }
    kinds = {name: kind_of(a) if "error" in a else "ok" for name, a in answers.items()}
    assert kinds == {
        "delete path": "InvalidId",
        "close path": "InvalidId",
        "delete unknown": "ok",  # ACP: deleting what never existed SHOULD succeed
        "close unknown": "ok",  # ACP: closing what is not open SHOULD succeed
        "load word": "InvalidId",
        "resume word": "InvalidId",
        "prompt word": "InvalidId",
        "load unknown": "ThreadNotFound",
        "load number": "InvalidParams",
        "list cwd number": "InvalidParams",
        "list array": "InvalidParams",
        "new relative": "InvalidParams",
        "new no cwd": "InvalidParams",
        "new missing dir": "InvalidParams",
    }
    for name in ("delete unknown", "close unknown"):  # ... and says it never was
        assert answers[name]["result"] == {"_meta": {"sessiond": {"known": False}}}
    for name in ("load word", "resume word", "prompt word"):
        message = answers[name]["error"]["message"]
        assert "sessionId" in message and "threadId" not in message
    assert "must be a string" in answers["load number"]["error"]["message"]
    assert answers["new relative"]["error"]["data"]["field"] == "cwd"
    events = [e["event"] for e in agent_log(state)]
    assert "session/new" not in events  # no bad session/new reached the agent
    assert not list(Layout(home).threads_dir.rglob("*.jsonl"))  # and nothing was recorded


async def test_another_spelling_of_an_open_session_is_that_session_not_a_second_one(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("hello"))
        loaded = await run.conn.load_session(cwd=str(repo), session_id=session.upper())
        answer = await run.conn.prompt(session_id=session.upper(), prompt=text("again"))
    assert loaded.field_meta["sessiond"]["upstream"] == "live"
    assert answer.stop_reason == "end_turn"
    items = thread_items(home, session)
    assert [i["type"] for i in items].count("session_meta") == 1  # one sessiond session
    events = [e["event"] for e in agent_log(state) if e["event"].startswith("session/")]
    assert events == ["session/new", "session/prompt", "session/prompt"]  # one AGENT session


async def test_loading_an_open_session_from_another_directory_is_drift_checked(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo, other = make_repo("repo"), make_repo("other")
    async with sessiond_acp(home, fake_agent(tmp_path / "agent")) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("hello"))
        with pytest.raises(RequestError) as refused:
            await run.conn.load_session(
                cwd=str(other), session_id=session, sessiond={"acceptDrift": False}
            )
    assert refused.value.data["kind"] == "WorkspaceDrift"
    assert "cwd" in {d["field"] for d in refused.value.data["drift"]}


async def test_an_agent_that_answers_two_new_sessions_with_one_id_gets_the_second_refused(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state, "resume", "--same-session")) as run:
        first = (await run.conn.new_session(cwd=str(repo))).session_id
        with pytest.raises(RequestError) as refused:
            await run.conn.new_session(cwd=str(repo))
        await run.conn.prompt(session_id=first, prompt=text("mine"))
        shown = {p["sessionId"] for p in run.editor.received}
    assert refused.value.data["kind"] == "InternalError"
    assert refused.value.data["agentSessionId"] == "fake-same"
    assert shown == {first}  # session 1's updates went to session 1
    raw = [i for i in thread_items(home, first) if i["type"] == "acp_update"]
    texts = [p["update"]["content"]["text"] for p in drawn([{"update": i["update"]} for i in raw])]
    assert texts == ["mine", "echo: mine"]
    assert len(list(Layout(home).threads_dir.rglob("*.jsonl"))) == 1


async def test_a_prompt_after_close_is_refused_until_the_session_is_loaded_again(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("hello"))
        await run.conn.close_session(session_id=session)
        with pytest.raises(RequestError) as refused:
            await run.conn.prompt(session_id=session, prompt=text("still there?"))
        prompts = len([e for e in agent_log(state) if e["event"] == "session/prompt"])
        await run.conn.load_session(cwd=str(repo), session_id=session)
        answer = await run.conn.prompt(session_id=session, prompt=text("back"))
    assert refused.value.data["kind"] == "StaleSession"
    assert "load or resume" in str(refused.value)
    assert prompts == 1  # the refused prompt reached nobody
    assert answer.stop_reason == "end_turn"


async def test_loading_a_deleted_session_brings_it_back_an_acp_editor_has_no_unarchive(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("hello"))
        await run.call("session/delete", {"sessionId": session})
        hidden = [s.session_id for s in (await run.conn.list_sessions()).sessions]
        await run.conn.load_session(cwd=str(repo), session_id=session)
        replayed = run.editor.texts()[-2:]
        listed = [s.session_id for s in (await run.conn.list_sessions()).sessions]
    assert hidden == [] and listed == [session]
    assert replayed == ["hello", "echo: hello"]
    assert Layout(home).thread_path(session).exists()
