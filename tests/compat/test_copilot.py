"""GitHub Copilot CLI 1.0.102, real: each test runs the pinned `copilot` headless (`-p`,
json output) with no login, offline, its own-key provider being the mock model's Chat
Completions (`COPILOT_PROVIDER_BASE_URL`, `COPILOT_OFFLINE=true`), imports the sessions it
wrote (`~/.copilot/session-state/<id>/events.jsonl`) with a real `sessiond import copilot`,
and asserts on what a real server makes of them. Copilot CLI is closed source: the mapping
is of what it writes.

Every import must report nothing unmapped but what CopilotParser.IGNORED lists."""

from __future__ import annotations

import json
import shutil
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
from tests.compat.test_opencode import items_of, of_type, sha
from tests.support.rpc_client import HANG_GUARD, ServerProcess
from tests.support.wait import eventually

USAGE = Usage(input_tokens=1500, output_tokens=90, cache_read_tokens=500)


def imported(home: Path, agent: AgentHome) -> dict[str, Any]:
    summary = import_from(home, "copilot", agent.copilot_sessions)
    assert summary["unmapped"] == {}, summary["unmapped"]
    return summary


def events(agent: AgentHome, session: str) -> list[dict[str, Any]]:
    path = agent.copilot_sessions / session / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.compat("copilot", "messages", "model")
def test_a_copilot_text_turn_is_imported_with_its_reasoning_cwd_branch_model_and_handoff(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({"hello": [
        Reply(text="Hello from the mock model.", thinking="The person wants a greeting.",
              usage=USAGE),
    ]}))  # fmt: skip
    run = agent.copilot("[[hello]] say hello").check()
    assert imported(home, agent)["created"] == 1
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    assert thread["origin"]["agent"] == "copilot"
    assert thread["origin"]["sessionId"] == run.session_id
    assert (thread["cwd"], thread["branch"]) == (str(agent.repo), BRANCH)
    assert thread["title"] == "[[hello]] say hello"
    report = resume(server, thread["threadId"])
    said = [(m["role"], m["content"], m.get("thought")) for m in report["messages"]["items"]]
    assert said == [
        ("user", "[[hello]] say hello", None),  # as typed, not with Copilot's datetime
        ("assistant", "The person wants a greeting.", True),
        ("assistant", "Hello from the mock model.", None),
    ]
    assert agents.model.main_requests()[0].last_user_text().startswith("<current_datetime>")
    assert states(report)["model_override"]["model"] == "gpt-4.1"
    assert report["handoff"] == {"agent": "copilot", "cwd": str(agent.repo),
                                 "command": ["copilot", "--resume", run.session_id]}  # fmt: skip
    usage = subprocess.run([str(agent.bins / "copilot"), "--help"], capture_output=True,
                           text=True, env=agent.env(), timeout=120)  # fmt: skip
    assert "-r, --resume [<value>]" in usage.stdout


def work(repo: Path) -> Scenario:
    notes = str(repo / "notes.txt")  # Copilot's file tools take absolute paths
    todos = ("INSERT INTO todos (id, title, status) VALUES ('notes', 'write notes', 'done'), "
             "('helper', 'ask a helper', 'in_progress')")  # fmt: skip
    return Scenario({
        "work": [
            Reply(text="Writing notes.", calls=(Call("create", {
                "path": notes, "file_text": "one\ntwo\n"}),), usage=USAGE),
            Reply(calls=(Call("edit", {"path": notes, "old_str": "two", "new_str": "three"}),),
                  usage=USAGE),
            Reply(calls=(Call("bash", {"command": "echo failing; exit 3",
                                       "description": "fails"}),), usage=USAGE),
            Reply(calls=(Call("sql", {"description": "Plan the work", "query": todos}),),
                  usage=USAGE),
            Reply(calls=(Call("task", {"description": "look around", "prompt": "[[helper]] look",
                                       "agent_type": "general-purpose", "name": "helper"}),),
                  usage=USAGE),
            Reply(text="Notes written; the command failed; the helper looked.", usage=USAGE),
        ],
        "helper": [Reply(text="The helper looked around.", usage=USAGE)],
    })  # fmt: skip


class Worked:
    def __init__(self, agent: AgentHome, model: MockModel, run: Run, home: Path) -> None:
        self.agent, self.model, self.run, self.home = agent, model, run, home
        self.summary = imported(home, agent)


@pytest.fixture(scope="module")
def worked(agent_bins: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worked]:
    root = tmp_path_factory.mktemp("copilot-work")
    with MockModel(work(root / "agents" / "repo")) as model:
        agent = AgentHome(root / "agents", model, agent_bins)
        run = agent.copilot("[[work]] write notes, edit them, run a command, plan, delegate")
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


@pytest.mark.compat("copilot", "edits", "todos")
def test_edits_with_contents_a_command_failed_though_copilot_says_success_and_the_todos(
    worked: Worked, served: ServerProcess
) -> None:
    (parent,) = served.request("thread/list", {})["threads"]
    items = items_of(served, parent["threadId"])
    notes = str(worked.agent.repo / "notes.txt")
    edits = [(e["path"], e.get("kind"), e["contentKnown"]) for e in of_type(items, "file_edit")]
    assert edits == [(notes, "create", True), (notes, "edit", True)]
    report = resume(served, parent["threadId"])
    (entry,) = states(report)["file_history"]["files"]
    assert (entry["beforeSha"], entry["afterSha"]) == (sha("one\ntwo\n"), sha("one\nthree\n"))
    assert (entry["currentSha"], entry["diverged"]) == (sha("one\nthree\n"), False)
    (recorded,) = [
        e["data"]
        for e in events(worked.agent, worked.run.session_id)
        if e["type"] == "tool.execution_complete" and "shellExecution" in e["data"]
    ]
    assert (recorded["success"], recorded["shellExecution"]["exitCode"]) == (True, 3)
    (_, done) = [i for i in of_type(items, "operation") if i["tool"] == "bash"]
    assert (done["state"], done["exitCode"]) == ("failed", 3)
    todos = [(t["content"], t["status"]) for t in states(report)["todos"]["items"]]
    assert todos == [("write notes", "completed"), ("ask a helper", "in_progress")]


@pytest.mark.compat("copilot", "sub-agents", "cost")
def test_a_sub_agent_in_the_parents_file_is_a_child_thread_and_the_tokens_are_copilots(
    worked: Worked, served: ServerProcess
) -> None:
    """Copilot writes a sub-agent's events into the parent's own events.jsonl, tagged with
    its `agentId`: they become a thread of their own, under the `task` call."""
    recorded = events(worked.agent, worked.run.session_id)
    (started,) = [e for e in recorded if e["type"] == "subagent.started"]
    (parent,) = served.request("thread/list", {})["threads"]
    assert parent["childCount"] == 1
    (child,) = served.request("thread/list", {"parentThreadId": parent["threadId"]})["threads"]
    assert child["threadId"] == thread_id_for("copilot", started["agentId"], 1)
    assert child["parentOperationId"] == started["data"]["toolCallId"]
    assert child["title"] == "look around"
    assert [m["content"] for m in of_type(items_of(served, child["threadId"]), "message")] == [
        "[[helper]] look", "The helper looked around."]  # fmt: skip
    parent_items = items_of(served, parent["threadId"])
    assert "The helper looked around." not in [
        m["content"] for m in of_type(parent_items, "message")
    ]
    spawned = [i for i in of_type(parent_items, "operation")
               if i["tool"] == "task" and i["state"] == "committed"]  # fmt: skip
    assert spawned[0]["childThreadId"] == child["threadId"]
    # Copilot's own totals at the end of the run (its cost is 0 with your own key: the
    # tokens are what it counts), the sub-agent's included, are the cost line's.
    (shutdown,) = [e["data"] for e in recorded if e["type"] == "session.shutdown"]
    counted = shutdown["accountingSnapshot"]["modelMetrics"]["gpt-4.1"]["usage"]
    cost = states(resume(served, parent["threadId"]))["cost"]
    assert (cost["inputTokens"], cost["outputTokens"]) == (
        counted["inputTokens"], counted["outputTokens"] + counted["reasoningTokens"])  # fmt: skip
    assert cost["subagents"]["threads"] == 1 and cost["usd"] > 0  # gpt-4.1: genai-prices


@pytest.mark.compat("copilot", "resume")
def test_copilot_resume_continues_a_reimport_adds_the_turn_once_and_a_deleted_one_is_kept(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({"one": [Reply(text="First answer.")],
                                   "two": [Reply(text="Second answer.")]}))  # fmt: skip
    session = agent.copilot("[[one]] first prompt").check().session_id
    assert imported(home, agent)["created"] == 1
    assert agent.copilot("[[two]] second prompt", resume=session).check().session_id == session
    assert "[[one]] first prompt" in agents.model.main_requests()[-1].text()
    grown = imported(home, agent)
    assert (grown["created"], grown["updated"]) == (0, 1)
    again = imported(home, agent)
    assert (again["created"], again["updated"], again["items"]) == (0, 0, 0)
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    items = items_of(server, thread["threadId"])
    assert [m["content"] for m in of_type(items, "message")] == [
        "[[one]] first prompt", "First answer.", "[[two]] second prompt", "Second answer.",
    ]  # fmt: skip
    shutil.rmtree(agent.copilot_sessions / session)  # deleted (`/session delete`, or by hand)
    assert imported(home, agent)["sessions"] == 0
    assert items_of(server, thread["threadId"]) == items


def test_a_followed_copilot_session_is_listed_while_it_is_written(
    agents: Agents, spawn: Callable[..., ServerProcess]
) -> None:
    """`serve --follow copilot` (its store found by $COPILOT_HOME): announced while
    Copilot still waits on the model, and grows."""
    gate = threading.Event()
    shell = Call("bash", {"command": "echo live", "description": "print"})
    steps = Scenario({"live": [Reply(calls=(shell,)), Reply(text="Live answer.")]})

    def script(request: Request) -> Reply:
        if request.tools and request.scenario() == "live" and request.round() == 1:
            assert gate.wait(HANG_GUARD), "the test never let the second call through"
        return steps(request)

    agent = agents.start(script)
    agent.copilot_sessions.mkdir(parents=True)
    server = spawn(args=["--follow", "copilot"],
                   env={"COPILOT_HOME": str(agent.copilot_sessions.parent)})  # fmt: skip
    server.initialize([str(agent.repo)])
    assert server.request("thread/list", {})["threads"] == []
    runs: list[Run] = []
    runner = threading.Thread(target=lambda: runs.append(agent.copilot("[[live]] go live")))
    runner.start()
    try:
        started = eventually(lambda: [
            n["params"]["thread"] for n in list(server.notifications)
            if n["method"] == "thread/started"])[0]  # fmt: skip
        assert started["origin"]["agent"] == "copilot" and not gate.is_set()
    finally:
        gate.set()
        runner.join(HANG_GUARD)
    runs[0].check()
    texts = eventually(lambda: [
        m["content"] for m in resume(server, started["threadId"])["messages"]["items"]
        if m["content"] == "Live answer."
    ])  # fmt: skip
    assert texts == ["Live answer."]
