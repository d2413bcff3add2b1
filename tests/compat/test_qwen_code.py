"""Qwen Code 0.24.4, real: each test runs the pinned `qwen` headless (`-p`, stream-json)
against the mock model's Chat Completions (its OpenAI settings), imports the transcripts it
wrote (`~/.qwen/projects/<encoded cwd>/chats/`, sub-agents under `subagents/`) with a real
`sessiond import qwen`, and asserts on what a real server makes of them.

Every import must report nothing unmapped but what QwenCodeParser.IGNORED lists."""

from __future__ import annotations

import json
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
    summary = import_from(home, "qwen", agent.qwen_projects)
    assert summary["unmapped"] == {}, summary["unmapped"]
    return summary


def chats(agent: AgentHome) -> list[Path]:
    return sorted(agent.qwen_projects.glob("*/chats/*.jsonl"))


@pytest.mark.compat("qwen-code", "messages", "model")
def test_a_qwen_text_turn_is_imported_with_its_reasoning_cwd_branch_model_and_handoff(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({"hello": [
        Reply(text="Hello from the mock model.", thinking="The person wants a greeting.",
              usage=USAGE),
    ]}))  # fmt: skip
    run = agent.qwen("[[hello]] say hello").check()
    assert imported(home, agent)["created"] == 1
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    assert thread["origin"]["agent"] == "qwen-code"
    assert thread["origin"]["sessionId"] == run.session_id
    assert (thread["cwd"], thread["branch"]) == (str(agent.repo), BRANCH)
    assert thread["title"] == "[[hello]] say hello"
    report = resume(server, thread["threadId"])
    said = [(m["role"], m["content"], m.get("thought")) for m in report["messages"]["items"]]
    assert said == [
        ("user", "[[hello]] say hello", None),
        ("assistant", "The person wants a greeting.", True),
        ("assistant", "Hello from the mock model.", None),
    ]
    assert states(report)["model_override"]["model"] == "gpt-4.1"
    assert report["handoff"] == {"agent": "qwen-code", "cwd": str(agent.repo),
                                 "command": ["qwen", "--resume", run.session_id]}  # fmt: skip
    usage = subprocess.run([str(agent.bins / "qwen"), "--help"], capture_output=True,
                           text=True, env=agent.env(), timeout=120)  # fmt: skip
    assert "-r, --resume" in usage.stdout  # "Resume a specific session by its ID"


def work(repo: Path) -> Scenario:
    notes = str(repo / "notes.txt")  # Qwen's file tools take absolute paths only
    return Scenario({
        "work": [
            Reply(text="Writing notes.", calls=(Call("write_file", {
                "file_path": notes, "content": "one\ntwo\n"}),), usage=USAGE),
            Reply(calls=(Call("edit", {"file_path": notes, "old_string": "two",
                                       "new_string": "three"}),), usage=USAGE),
            Reply(calls=(Call("run_shell_command", {"command": "echo failing; exit 3",
                                                    "description": "fails"}),), usage=USAGE),
            Reply(calls=(Call("todo_write", {"todos": [
                {"id": "1", "content": "write notes", "status": "completed"},
                {"id": "2", "content": "ask a helper", "status": "in_progress"},
            ]}),), usage=USAGE),
            Reply(calls=(Call("agent", {"description": "look around", "prompt": "[[helper]] look",
                                        "subagent_type": "general-purpose"}),), usage=USAGE),
            Reply(text="Notes written; the command failed; the helper runs.", usage=USAGE),
        ],
        "helper": [Reply(text="The helper looked around.", usage=USAGE)],
    })  # fmt: skip


class Worked:
    def __init__(self, agent: AgentHome, model: MockModel, run: Run, home: Path) -> None:
        self.agent, self.model, self.run, self.home = agent, model, run, home
        self.summary = imported(home, agent)


@pytest.fixture(scope="module")
def worked(agent_bins: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worked]:
    root = tmp_path_factory.mktemp("qwen-work")
    repo = root / "agents" / "repo"
    with MockModel(work(repo)) as model:
        agent = AgentHome(root / "agents", model, agent_bins)
        run = agent.qwen("[[work]] write notes, edit them, run a command, plan, delegate")
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


@pytest.mark.compat("qwen-code", "edits", "todos")
def test_edits_with_their_contents_a_failing_command_and_the_todo_list(
    worked: Worked, served: ServerProcess
) -> None:
    (parent,) = served.request("thread/list", {})["threads"]
    items = items_of(served, parent["threadId"])
    notes = str(worked.agent.repo / "notes.txt")
    edits = [(e["path"], e.get("kind"), e["contentKnown"]) for e in of_type(items, "file_edit")]
    assert edits == [(notes, "write_file", True), (notes, "edit", True)]
    report = resume(served, parent["threadId"])
    (entry,) = states(report)["file_history"]["files"]
    assert (entry["beforeSha"], entry["afterSha"]) == (sha("one\ntwo\n"), sha("one\nthree\n"))
    assert (entry["currentSha"], entry["diverged"]) == (sha("one\nthree\n"), False)
    (started, done) = [i for i in of_type(items, "operation") if i["tool"] == "run_shell_command"]
    assert (started["command"], done["state"], done["exitCode"]) == (
        "echo failing; exit 3", "failed", 3)  # fmt: skip
    todos = [(t["content"], t["status"]) for t in states(report)["todos"]["items"]]
    assert todos == [("write notes", "completed"), ("ask a helper", "in_progress")]


@pytest.mark.compat("qwen-code", "sub-agents", "cost")
def test_the_background_sub_agent_is_a_child_thread_and_the_tokens_are_qwens_own(
    worked: Worked, served: ServerProcess
) -> None:
    (parent,) = served.request("thread/list", {})["threads"]
    (child,) = served.request("thread/list", {"parentThreadId": parent["threadId"]})["threads"]
    (transcript,) = worked.agent.qwen_projects.glob("*/subagents/*/agent-*.jsonl")
    meta = json.loads(transcript.with_suffix(".meta.json").read_text())
    assert meta["parentSessionId"] == worked.run.session_id
    assert child["threadId"] == thread_id_for("qwen-code", transcript.stem, 1)
    assert child["parentOperationId"] == child["origin"]["parentToolCallId"] == meta["toolUseId"]
    assert [m["content"] for m in of_type(items_of(served, child["threadId"]), "message")] == [
        "[[helper]] look", "The helper looked around."]  # fmt: skip
    spawned = [i for i in of_type(items_of(served, parent["threadId"]), "operation")
               if i["tool"] == "agent" and i["state"] == "committed"]  # fmt: skip
    assert spawned[0]["childThreadId"] == child["threadId"]
    # Qwen keeps its own count of the run's tokens (the sub-agent's and its own side calls
    # included): the parent's cost line, sub-agent included, is that count exactly.
    (record,) = [json.loads(line) for line in
                 (worked.agent.home / ".qwen" / "usage_record.jsonl").read_text().splitlines()
                 if json.loads(line)["sessionId"] == worked.run.session_id]  # fmt: skip
    counted = record["models"]["gpt-4.1"]
    cost = states(resume(served, parent["threadId"]))["cost"]
    assert (cost["inputTokens"], cost["outputTokens"]) == (
        counted["inputTokens"], counted["outputTokens"] + counted["thoughtsTokens"])  # fmt: skip
    assert cost["subagents"]["threads"] == 1 and cost["usd"] > 0  # gpt-4.1: genai-prices


@pytest.mark.compat("qwen-code", "resume")
def test_qwen_resume_continues_a_reimport_adds_the_turn_once_and_a_pruned_file_is_kept(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({"one": [Reply(text="First answer.")],
                                   "two": [Reply(text="Second answer.")]}))  # fmt: skip
    session = agent.qwen("[[one]] first prompt").check().session_id
    assert imported(home, agent)["created"] == 1
    assert agent.qwen("[[two]] second prompt", resume=session).check().session_id == session
    assert "[[one]] first prompt" in agents.model.main_requests()[-1].user_texts()
    grown = imported(home, agent)
    assert (grown["created"], grown["updated"]) == (0, 1)
    again = imported(home, agent)
    assert (again["created"], again["updated"], again["items"]) == (0, 0, 0)
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    items = items_of(server, thread["threadId"])
    assert [m["content"] for m in of_type(items, "message") if not m.get("thought")] == [
        "[[one]] first prompt", "First answer.", "[[two]] second prompt", "Second answer.",
    ]  # fmt: skip
    for transcript in chats(agent):  # Qwen's cleanup (or the person) removes it
        transcript.unlink()
    assert imported(home, agent)["sessions"] == 0
    assert items_of(server, thread["threadId"]) == items


def test_a_followed_qwen_session_is_listed_while_it_is_written(
    agents: Agents, spawn: Callable[..., ServerProcess]
) -> None:
    """`serve --follow qwen` (its store found by $QWEN_HOME): announced while Qwen still
    waits on the model, and grows."""
    gate = threading.Event()
    shell = Call("run_shell_command", {"command": "echo live", "description": "print"})
    steps = Scenario({"live": [Reply(calls=(shell,)), Reply(text="Live answer.")]})

    def script(request: Request) -> Reply:
        if request.tools and request.scenario() == "live" and request.round() == 1:
            assert gate.wait(HANG_GUARD), "the test never let the second call through"
        return steps(request)

    agent = agents.start(script)
    agent.qwen_projects.mkdir(parents=True)
    server = spawn(args=["--follow", "qwen"], env={"QWEN_HOME": str(agent.home / ".qwen")})
    server.initialize([str(agent.repo)])
    assert server.request("thread/list", {})["threads"] == []
    runs: list[Run] = []
    runner = threading.Thread(target=lambda: runs.append(agent.qwen("[[live]] go live")))
    runner.start()
    try:
        started = eventually(lambda: [
            n["params"]["thread"] for n in list(server.notifications)
            if n["method"] == "thread/started"])[0]  # fmt: skip
        assert started["origin"]["agent"] == "qwen-code" and not gate.is_set()
    finally:
        gate.set()
        runner.join(HANG_GUARD)
    runs[0].check()
    texts = eventually(lambda: [
        m["content"] for m in resume(server, started["threadId"])["messages"]["items"]
        if m["content"] == "Live answer."
    ])  # fmt: skip
    assert texts == ["Live answer."]
