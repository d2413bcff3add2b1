"""Kilo 7.7.7 (Kilo Code's CLI, a fork of OpenCode), real: each test runs the pinned `kilo`
headless (`kilo run --format json`) against the mock model's Chat Completions, imports the
database it wrote (`~/.local/share/kilo/kilo.db`) with a real `sessiond import kilo`, and
asserts on what a real server makes of it. (7.8.1, Kilo's newest release, ships no Linux
binary; 7.7.7 is the one before.)

Every import must report nothing unmapped but what the parser's IGNORED lists."""

from __future__ import annotations

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
from tests.agents.mock_model import Call, MockModel, Reply, Request, Scenario
from tests.compat.conftest import Agents, import_from, resume, states
from tests.compat.test_opencode import USAGE, WORK, items_of, of_type, sha
from tests.support.rpc_client import HANG_GUARD, ServerProcess
from tests.support.wait import eventually


def imported(home: Path, agent: AgentHome) -> dict[str, Any]:
    summary = import_from(home, "kilo", agent.kilo_data)
    assert summary["unmapped"] == {}, summary["unmapped"]
    return summary


def rows(agent: AgentHome, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{agent.kilo_data / 'kilo.db'}?mode=ro", uri=True) as db:
        return db.execute(query, args).fetchall()


@pytest.mark.compat("kilo", "messages", "model")
def test_a_kilo_text_turn_is_imported_with_its_reasoning_cwd_branch_model_and_handoff(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({"hello": [
        Reply(text="Hello from the mock model.", thinking="The person wants a greeting.",
              usage=USAGE),
    ]}))  # fmt: skip
    run = agent.kilo("[[hello]] say hello").check()
    assert imported(home, agent)["created"] == 1
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    assert thread["origin"]["agent"] == "kilo"
    assert thread["origin"]["sessionId"] == run.session_id
    assert (thread["cwd"], thread["branch"]) == (str(agent.repo), BRANCH)
    # Kilo keeps its placeholder title ("New session - <time>"): the first prompt is used.
    assert rows(agent, "SELECT title FROM session")[0][0].startswith("New session - ")
    assert thread["title"] == "[[hello]] say hello"
    report = resume(server, thread["threadId"])
    said = [(m["role"], m["content"], m.get("thought")) for m in report["messages"]["items"]]
    assert said == [
        ("user", "[[hello]] say hello", None),  # not the <environment_details> Kilo sends
        ("assistant", "The person wants a greeting.", True),
        ("assistant", "Hello from the mock model.", None),
    ]
    assert "<environment_details>" in agents.model.main_requests()[0].last_user_text()
    assert states(report)["model_override"]["model"] == "gpt-4.1"
    assert report["handoff"] == {"agent": "kilo", "cwd": str(agent.repo),
                                 "command": ["kilo", "--session", run.session_id]}  # fmt: skip
    usage = subprocess.run([str(agent.bins / "kilo"), "--help"], capture_output=True,
                           text=True, env=agent.env(), timeout=120)  # fmt: skip
    assert "-s, --session" in usage.stdout + usage.stderr


class Worked:
    def __init__(self, agent: AgentHome, run: Run, home: Path) -> None:
        self.agent, self.run, self.home = agent, run, home
        self.summary = imported(home, agent)


@pytest.fixture(scope="module")
def worked(agent_bins: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worked]:
    root = tmp_path_factory.mktemp("kilo-work")
    with MockModel(WORK) as model:
        agent = AgentHome(root / "agents", model, agent_bins)
        run = agent.kilo("[[work]] write notes, edit them, run a command, plan, delegate")
        home = root / "home"
        home.mkdir()
        yield Worked(agent, run.check(), home)
        assert not model.errors, model.errors


@pytest.fixture
def served(worked: Worked) -> Iterator[ServerProcess]:
    server = ServerProcess(worked.home)
    try:
        server.initialize([str(worked.agent.repo)])
        yield server
    finally:
        server.close()


@pytest.mark.compat("kilo", "edits", "todos")
def test_edits_a_failing_command_and_the_todo_list_come_through(
    worked: Worked, served: ServerProcess
) -> None:
    (parent,) = served.request("thread/list", {})["threads"]
    items = items_of(served, parent["threadId"])
    notes = str(worked.agent.repo / "notes.txt")
    edits = [(e["path"], e.get("kind"), e["contentKnown"]) for e in of_type(items, "file_edit")]
    assert edits == [(notes, "write", True), (notes, "edit", True)]
    report = resume(served, parent["threadId"])
    (entry,) = states(report)["file_history"]["files"]
    assert (entry["afterSha"], entry["diverged"]) == (sha("one\nthree\n"), False)
    (_, done) = [i for i in of_type(items, "operation") if i["tool"] == "bash"]
    (recorded,) = [json.loads(data) for (data,) in rows(
        worked.agent, "SELECT data FROM part WHERE data LIKE '%\"tool\":\"bash\"%'")]  # fmt: skip
    assert (recorded["state"]["status"], recorded["state"]["metadata"]["exit"]) == ("completed", 3)
    assert (done["state"], done["exitCode"]) == ("failed", 3)
    todos = [(t["content"], t["status"]) for t in states(report)["todos"]["items"]]
    assert todos == [("write notes", "completed"), ("ask a helper", "in_progress")]


@pytest.mark.compat("kilo", "sub-agents", "cost")
def test_the_sub_agent_is_a_child_thread_and_the_cost_is_kilos_own_within_one_percent(
    worked: Worked, served: ServerProcess
) -> None:
    (parent,) = served.request("thread/list", {})["threads"]
    (child,) = served.request("thread/list", {"parentThreadId": parent["threadId"]})["threads"]
    ((child_session, parent_session),) = rows(
        worked.agent, "SELECT id, parent_id FROM session WHERE parent_id IS NOT NULL"
    )
    assert child["threadId"] == thread_id_for("kilo", child_session, 1)
    (task,) = [json.loads(data) for (data,) in rows(
        worked.agent, "SELECT data FROM part WHERE data LIKE '%\"tool\":\"task\"%'")]  # fmt: skip
    assert child["parentOperationId"] == task["callID"]
    cost = states(resume(served, parent["threadId"]))["cost"]
    (own,), (theirs,) = (rows(worked.agent, "SELECT cost FROM session WHERE id = ?", session)
                         for session in (parent_session, child_session))  # fmt: skip
    assert cost["subagents"]["threads"] == 1
    assert own[0] > 0 and theirs[0] > 0
    assert cost["usd"] == pytest.approx(own[0] + theirs[0], rel=0.01)


@pytest.mark.compat("kilo", "resume")
def test_kilo_run_session_continues_a_reimport_adds_the_turn_once_and_a_delete_keeps_it(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({"one": [Reply(text="First answer.")],
                                   "two": [Reply(text="Second answer.")]}))  # fmt: skip
    session = agent.kilo("[[one]] first prompt").check().session_id
    assert imported(home, agent)["created"] == 1
    assert agent.kilo("[[two]] second prompt", resume=session).check().session_id == session
    assert agents.model.main_requests()[-1].user_texts()[0].startswith("[[one]] first prompt")
    assert (imported(home, agent)["updated"], imported(home, agent)["updated"]) == (1, 0)
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    items = items_of(server, thread["threadId"])
    assert [m["content"] for m in of_type(items, "message")] == [
        "[[one]] first prompt", "First answer.", "[[two]] second prompt", "Second answer.",
    ]  # fmt: skip
    agent.run([str(agent.bins / "kilo"), "session", "delete", session]).check()
    assert rows(agent, "SELECT id FROM session") == []
    assert imported(home, agent)["sessions"] == 0
    assert items_of(server, thread["threadId"]) == items  # kept whole


def test_a_followed_kilo_session_is_listed_while_it_is_written(
    agents: Agents, spawn: Callable[..., ServerProcess]
) -> None:
    """`serve --follow kilo`: the session is announced while Kilo still waits on the
    model, and grows."""
    gate = threading.Event()
    steps = Scenario({"live": [Reply(calls=(Call("bash", {"command": "echo live",
                                                          "description": "print"}),)),
                               Reply(text="Live answer.")]})  # fmt: skip

    def script(request: Request) -> Reply:
        if request.tools and request.scenario() == "live" and request.round() == 1:
            assert gate.wait(HANG_GUARD), "the test never let the second call through"
        return steps(request)

    agent = agents.start(script)
    agent.kilo_data.mkdir(parents=True)
    server = spawn(args=["--follow", "kilo"],
                   env={"XDG_DATA_HOME": str(agent.kilo_data.parent)})  # fmt: skip
    server.initialize([str(agent.repo)])
    assert server.request("thread/list", {})["threads"] == []
    runs: list[Run] = []
    runner = threading.Thread(target=lambda: runs.append(agent.kilo("[[live]] go live")))
    runner.start()
    try:
        started = eventually(lambda: [
            n["params"]["thread"] for n in list(server.notifications)
            if n["method"] == "thread/started"])[0]  # fmt: skip
        assert started["origin"]["agent"] == "kilo" and not gate.is_set()
    finally:
        gate.set()
        runner.join(HANG_GUARD)
    runs[0].check()
    texts = eventually(lambda: [
        m["content"] for m in resume(server, started["threadId"])["messages"]["items"]
        if m["content"] == "Live answer."
    ])  # fmt: skip
    assert texts == ["Live answer."]
