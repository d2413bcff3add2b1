"""OpenCode 1.18, real: each test runs the pinned `opencode` headless (`opencode run --format
json`) against the mock model's Chat Completions (a custom provider in its config), imports
the database it wrote (`~/.local/share/opencode/opencode.db`, rows of sessions, messages,
parts and todos; read from a copy, WAL and all) with a real `sessiond import opencode`, and
asserts on what a real server makes of it.

Every import must report nothing unmapped but what OpenCodeParser.IGNORED lists."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from restore.agents.identity import thread_id_for
from tests.agents.clis import BRANCH, AgentHome, Run
from tests.agents.mock_model import Call, MockModel, Reply, Request, Scenario, Usage
from tests.compat.conftest import Agents, import_from, resume, states
from tests.support.rpc_client import HANG_GUARD, ServerProcess
from tests.support.wait import eventually
from tests.test_cli import sessiond

USAGE = Usage(input_tokens=1500, output_tokens=90, cache_read_tokens=500)


def imported(home: Path, agent: AgentHome) -> dict[str, Any]:
    """`sessiond import opencode --from <its data folder>`; nothing OpenCode wrote is left
    unmapped (what the parser leaves out on purpose is on OpenCodeParser.IGNORED)."""
    summary = import_from(home, "opencode", agent.opencode_data)
    assert summary["unmapped"] == {}, summary["unmapped"]
    return summary


def items_of(server: ServerProcess, thread_id: str) -> list[dict[str, Any]]:
    return server.request("thread/read", {"threadId": thread_id, "limit": 500})["items"]


def of_type(items: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [item for item in items if item["type"] == kind]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def rows(agent: AgentHome, query: str, *args: Any) -> list[tuple[Any, ...]]:
    """What OpenCode itself recorded (read-only; OpenCode is not running)."""
    database = agent.opencode_data / "opencode.db"
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        return db.execute(query, args).fetchall()


@pytest.mark.compat("opencode", "messages", "model")
def test_an_opencode_text_turn_is_imported_with_its_reasoning_cwd_branch_model_and_handoff(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({"hello": [
        Reply(text="Hello from the mock model.", thinking="The person wants a greeting.",
              usage=USAGE),
    ]}))  # fmt: skip
    run = agent.opencode("[[hello]] say hello").check()
    assert imported(home, agent)["created"] == 1
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    assert thread["origin"]["agent"] == "opencode"
    assert thread["origin"]["sessionId"] == run.session_id
    assert thread["origin"]["path"] == f"{agent.opencode_data / 'opencode.db'}#{run.session_id}"
    assert (thread["cwd"], thread["branch"]) == (str(agent.repo), BRANCH)
    assert thread["title"] == "A short summary of the session."  # OpenCode's own title
    report = resume(server, thread["threadId"])
    said = [(m["role"], m["content"], m.get("thought")) for m in report["messages"]["items"]]
    assert said == [
        ("user", "[[hello]] say hello", None),
        ("assistant", "The person wants a greeting.", True),
        ("assistant", "Hello from the mock model.", None),
    ]
    assert states(report)["model_override"]["model"] == "gpt-4.1"
    assert report["handoff"] == {"agent": "opencode", "cwd": str(agent.repo),
                                 "command": ["opencode", "--session", run.session_id]}  # fmt: skip
    usage = subprocess.run([str(agent.bins / "opencode"), "--help"], capture_output=True,
                           text=True, env=agent.env(), timeout=120)  # fmt: skip
    assert "-s, --session" in usage.stdout + usage.stderr  # the TUI takes the session id
    again = imported(home, agent)
    assert (again["created"], again["updated"], again["unchanged"]) == (0, 0, 1)


WORK = Scenario({
    "work": [
        Reply(text="Writing notes.", calls=(Call("write", {"filePath": "notes.txt",
                                                           "content": "one\ntwo\n"}),),
              usage=USAGE),
        Reply(calls=(Call("edit", {"filePath": "notes.txt", "oldString": "two",
                                   "newString": "three"}),), usage=USAGE),
        Reply(calls=(Call("bash", {"command": "echo failing; exit 3",
                                   "description": "a command that fails"}),), usage=USAGE),
        Reply(calls=(Call("todowrite", {"todos": [
            {"content": "write notes", "status": "completed", "priority": "high"},
            {"content": "ask a helper", "status": "in_progress", "priority": "medium"},
        ]}),), usage=USAGE),
        Reply(calls=(Call("task", {"description": "look around", "prompt": "[[helper]] look",
                                   "subagent_type": "general"}),), usage=USAGE),
        Reply(text="Notes written; the command failed; the helper looked.", usage=USAGE),
    ],
    "helper": [Reply(text="The helper looked around.", usage=USAGE)],
})  # fmt: skip


class Worked:
    """One OpenCode session that did everything (written once for the tests below)."""

    def __init__(self, agent: AgentHome, model: MockModel, run: Run, home: Path) -> None:
        self.agent, self.model, self.run, self.home = agent, model, run, home
        self.summary = imported(home, agent)


@pytest.fixture(scope="module")
def worked(agent_bins: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worked]:
    root = tmp_path_factory.mktemp("opencode-work")
    with MockModel(WORK) as model:
        agent = AgentHome(root / "agents", model, agent_bins)
        run = agent.opencode("[[work]] write notes, edit them, run a command, plan, delegate")
        home = root / "home"
        home.mkdir()
        yield Worked(agent, model, run.check(), home)
        assert not model.errors, model.errors


@pytest.fixture
def served(worked: Worked) -> Iterator[ServerProcess]:
    server = ServerProcess(worked.home)
    try:
        server.initialize([str(worked.agent.repo)])
        yield server
    finally:
        server.close()


def the_parent(server: ServerProcess) -> dict[str, Any]:
    (thread,) = server.request("thread/list", {})["threads"]
    return thread


@pytest.mark.compat("opencode", "edits")
def test_a_file_written_then_edited_is_in_file_history_with_its_contents(
    worked: Worked, served: ServerProcess
) -> None:
    agent = worked.agent
    assert (agent.repo / "notes.txt").read_text() == "one\nthree\n"
    items = items_of(served, the_parent(served)["threadId"])
    edits = [(e["path"], e.get("kind"), e["contentKnown"]) for e in of_type(items, "file_edit")]
    notes = str(agent.repo / "notes.txt")
    assert edits == [(notes, "write", True), (notes, "edit", True)]
    history = states(resume(served, the_parent(served)["threadId"]))["file_history"]
    (entry,) = history["files"]  # what the helper or the command touched is not an edit
    assert entry["path"] == notes
    assert (entry["beforeSha"], entry["afterSha"]) == (sha("one\ntwo\n"), sha("one\nthree\n"))
    assert (entry["currentSha"], entry["diverged"]) == (sha("one\nthree\n"), False)
    assert history["edits"] == 2


@pytest.mark.compat("opencode", "messages")
def test_a_command_that_exits_non_zero_is_failed_though_opencode_says_completed(
    worked: Worked, served: ServerProcess
) -> None:
    (recorded,) = [json.loads(data) for (data,) in rows(
        worked.agent, "SELECT data FROM part WHERE data LIKE '%\"tool\":\"bash\"%'")]  # fmt: skip
    assert recorded["state"]["status"] == "completed"  # what OpenCode wrote
    assert recorded["state"]["metadata"]["exit"] == 3
    items = items_of(served, the_parent(served)["threadId"])
    (started, done) = [i for i in of_type(items, "operation") if i["tool"] == "bash"]
    assert (started["state"], started["command"]) == ("started", "echo failing; exit 3")
    assert (done["state"], done["exitCode"]) == ("failed", 3)
    assert "failing" in done["result"]
    assert done["operationId"] == recorded["callID"]


@pytest.mark.compat("opencode", "todos")
def test_the_todo_list_is_what_todowrite_wrote(worked: Worked, served: ServerProcess) -> None:
    report = resume(served, the_parent(served)["threadId"])
    todos = [(t["content"], t["status"]) for t in states(report)["todos"]["items"]]
    assert todos == [("write notes", "completed"), ("ask a helper", "in_progress")]
    table = rows(worked.agent, "SELECT content, status FROM todo ORDER BY position")
    assert [tuple(row) for row in table] == todos  # OpenCode's own table agrees


@pytest.mark.compat("opencode", "sub-agents", "cost")
def test_the_sub_agent_is_a_child_thread_and_the_cost_is_opencodes_own_within_one_percent(
    worked: Worked, served: ServerProcess
) -> None:
    parent = the_parent(served)
    assert parent["childCount"] == 1
    (child,) = served.request("thread/list", {"parentThreadId": parent["threadId"]})["threads"]
    ((child_session, parent_session),) = rows(
        worked.agent, "SELECT id, parent_id FROM session WHERE parent_id IS NOT NULL"
    )
    assert parent["origin"]["sessionId"] == parent_session == worked.run.session_id
    assert child["threadId"] == thread_id_for("opencode", child_session, 1)
    assert child["origin"]["parentSessionId"] == parent_session
    (task,) = [json.loads(data) for (data,) in rows(
        worked.agent, "SELECT data FROM part WHERE data LIKE '%\"tool\":\"task\"%'")]  # fmt: skip
    assert child["parentOperationId"] == child["origin"]["parentToolCallId"] == task["callID"]
    child_items = items_of(served, child["threadId"])
    assert [m["content"] for m in of_type(child_items, "message")] == [
        "[[helper]] look", "The helper looked around."]  # fmt: skip
    done = [i for i in of_type(items_of(served, parent["threadId"]), "operation")
            if i["tool"] == "task" and i["state"] == "committed"]  # fmt: skip
    assert done[0]["childThreadId"] == child["threadId"]
    # Tokens as OpenCode counted them, priced by genai-prices; OpenCode's own figure (its
    # config prices the mock's gpt-4.1 as the price list does) within 1%, sub-agent included.
    cost = states(resume(served, parent["threadId"]))["cost"]
    ((own_cost, own_input, own_output, own_read),) = rows(worked.agent,
        "SELECT cost, tokens_input, tokens_output, tokens_cache_read FROM session "
        "WHERE id = ?", parent_session)  # fmt: skip
    ((child_cost,),) = rows(worked.agent, "SELECT cost FROM session WHERE id = ?", child_session)
    assert cost["own"]["outputTokens"] == own_output
    assert cost["own"]["inputTokens"] == own_input + own_read
    assert cost["subagents"]["threads"] == 1 and cost["subagents"]["missing"] == 0
    assert own_cost > 0 and child_cost > 0
    assert cost["usd"] == pytest.approx(own_cost + child_cost, rel=0.01)
    # `sessiond show` spends what the cost line does, the sub-agent's included (its footer
    # once left it out).
    shown = sessiond(worked.home, "show", parent["threadId"])
    theirs = cost["subagents"]["usd"]
    assert shown.stdout.splitlines()[-1].endswith(
        f"${cost['usd']:.4f} spent (sub-agents ${theirs:.4f})")  # fmt: skip


@pytest.mark.compat("opencode", "messages")
def test_an_imported_opencode_session_is_found_by_search(worked: Worked) -> None:
    done = sessiond(worked.home, "search", "helper", "looked", "--json")
    assert done.returncode == 0, done.stderr
    hits = [json.loads(line) for line in done.stdout.splitlines()]
    assert {hit["thread"]["origin"]["agent"] for hit in hits} == {"opencode"}
    assert any("The helper looked around." in hit["snippet"] for hit in hits)


@pytest.mark.compat("opencode", "resume")
def test_opencode_run_session_continues_a_reimport_adds_the_new_turn_once_and_a_delete_keeps_it(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({
        "one": [Reply(calls=(Call("bash", {"command": "echo first-output",
                                           "description": "print"}),)),
                Reply(text="First answer.")],
        "two": [Reply(text="Second answer.")],
    }))  # fmt: skip
    session = agent.opencode("[[one]] first prompt").check().session_id
    assert imported(home, agent)["created"] == 1
    before = len(agents.model.main_requests())
    assert agent.opencode("[[two]] second prompt", resume=session).check().session_id == session
    resumed = agents.model.main_requests()[before]  # the earlier turns went back to the model
    assert resumed.user_texts() == ["[[one]] first prompt", "[[two]] second prompt"]
    assert any("first-output" in result for t in resumed.turns for result in t.results)
    grown = imported(home, agent)
    assert (grown["created"], grown["updated"]) == (0, 1)
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    items = items_of(server, thread["threadId"])
    assert len({i["id"] for i in items}) == len(items)
    assert [m["content"] for m in of_type(items, "message")] == [
        "[[one]] first prompt", "First answer.", "[[two]] second prompt", "Second answer.",
    ]  # fmt: skip
    again = imported(home, agent)
    assert (again["updated"], again["created"], again["items"]) == (0, 0, 0)
    # Kept after OpenCode deletes it: the thread is whole, and an import changes nothing.
    agent.run([str(agent.bins / "opencode"), "session", "delete", session]).check()
    assert rows(agent, "SELECT id FROM session") == []
    after = imported(home, agent)
    assert (after["sessions"], after["created"], after["updated"]) == (0, 0, 0)
    assert items_of(server, thread["threadId"]) == items


def test_a_followed_opencode_session_is_listed_while_it_is_written(
    agents: Agents, spawn: Callable[..., ServerProcess]
) -> None:
    """`serve --follow opencode` (its database found by $XDG_DATA_HOME, as OpenCode finds
    it): the session is announced while OpenCode still waits on the model, and grows."""
    gate = threading.Event()
    steps = Scenario({"live": [Reply(calls=(Call("bash", {"command": "echo live",
                                                          "description": "print"}),)),
                               Reply(text="Live answer.")]})  # fmt: skip

    def script(request: Request) -> Reply:
        if request.tools and request.scenario() == "live" and request.round() == 1:
            assert gate.wait(HANG_GUARD), "the test never let the second call through"
        return steps(request)

    agent = agents.start(script)
    agent.opencode_data.mkdir(parents=True)
    server = spawn(args=["--follow", "opencode"],
                   env={"XDG_DATA_HOME": str(agent.opencode_data.parent)})  # fmt: skip
    server.initialize([str(agent.repo)])
    assert server.request("thread/list", {})["threads"] == []  # from here on it follows
    runs: list[Run] = []
    runner = threading.Thread(target=lambda: runs.append(agent.opencode("[[live]] go live")))
    runner.start()
    try:
        started = eventually(lambda: announced(server, "thread/started"))[0]
        assert started["origin"]["agent"] == "opencode" and started["cwd"] == str(agent.repo)
        assert not gate.is_set() and runner.is_alive()  # OpenCode is mid-turn
        mid = eventually(lambda: [
            m["content"] for m in resume(server, started["threadId"])["messages"]["items"]
            if m["role"] == "user"])  # fmt: skip
        assert mid == ["[[live]] go live"]
    finally:
        gate.set()
        runner.join(HANG_GUARD)
    runs[0].check()
    assert started["origin"]["sessionId"] == runs[0].session_id
    texts = eventually(lambda: [
        m["content"] for m in resume(server, started["threadId"])["messages"]["items"]
        if m["content"] == "Live answer."
    ])  # fmt: skip
    assert texts == ["Live answer."]


def announced(server: ServerProcess, method: str) -> list[dict[str, Any]]:
    return [n["params"]["thread"] for n in list(server.notifications) if n["method"] == method
            and (n["params"]["thread"].get("origin") or {}).get("agent") == "opencode"]  # fmt: skip
