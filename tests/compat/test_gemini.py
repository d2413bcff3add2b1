"""Gemini CLI, real: each test runs the pinned `gemini` (0.61.0) headless against the mock
model, imports the session store it wrote (`$HOME/.gemini/tmp/<project>/chats/`) with a
real `sessiond import gemini` process, and asserts on what a real server makes of it.

The one exception is the older format (one JSON document per session, up to 0.38): its
transcript was written by the real gemini-cli 0.38.2 against the same mock and is kept in
tests/compat/fixtures/ (its temporary root replaced by `@ROOT@`); the test then resumes
it with the pinned 0.61.0, as a person upgrading would.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from restore.agents.gemini.parser import GeminiParser
from tests.agents.clis import BRANCH, AgentHome, Run
from tests.agents.mock_model import Call, Reply, Request, Scenario, Usage
from tests.compat.conftest import Agents, import_from, resume, states
from tests.support.rpc_client import HANG_GUARD, ServerProcess
from tests.support.wait import eventually

FIXTURES = Path(__file__).parent / "fixtures"
LEGACY = FIXTURES / "gemini-0.38.2-session-2026-12-01T11-57-695ae3ca.json"


def imported(home: Path, agent: AgentHome) -> dict[str, Any]:
    """`sessiond import gemini --from <the store>`; nothing Gemini wrote is left unmapped
    (what the parser leaves out on purpose is on GeminiParser.IGNORED, with why)."""
    summary = import_from(home, "gemini", agent.gemini_tmp)
    assert summary["unmapped"] == {}, summary["unmapped"]
    return summary


def only_thread(server: ServerProcess) -> dict[str, Any]:
    (thread,) = server.request("thread/list", {})["threads"]
    return thread


def items_of(server: ServerProcess, thread_id: str) -> list[dict[str, Any]]:
    return server.request("thread/read", {"threadId": thread_id, "limit": 500})["items"]


def operations(items: list[dict[str, Any]], tool: str) -> list[dict[str, Any]]:
    return [i for i in items if i["type"] == "operation" and i["tool"] == tool]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def feed(parser: GeminiParser, records: list[dict[str, Any]], first: int = 1) -> list[Any]:
    return [item for n, record in enumerate(records, first)
            for item in parser.feed(n, record, record.get("timestamp"))]  # fmt: skip


def session_files(agent: AgentHome) -> list[Path]:
    return sorted(agent.gemini_tmp.glob("*/chats/session-*"))


@pytest.mark.compat("gemini", "messages", "model")
def test_a_gemini_text_turn_is_imported_with_its_thought_cwd_branch_model_and_handoff(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({"hello": [
        Reply(text="Hello from the mock model.", thinking="The person wants a greeting."),
    ]}))  # fmt: skip
    run = agent.gemini("[[hello]] say hello").check()
    assert imported(home, agent)["created"] == 1
    server = spawn()
    server.initialize([str(agent.repo)])
    thread = only_thread(server)
    assert thread["origin"]["agent"] == "gemini"
    assert thread["origin"]["sessionId"] == run.session_id  # the full id, not the file's 8
    assert (thread["cwd"], thread["branch"]) == (str(agent.repo), BRANCH)
    assert thread["title"] == "[[hello]] say hello"
    report = resume(server, thread["threadId"])
    said = [(m["role"], m["content"], m.get("thought")) for m in report["messages"]["items"]]
    assert said == [
        ("user", "[[hello]] say hello", None),
        ("assistant", "The person wants a greeting.", True),
        ("assistant", "Hello from the mock model.", None),
    ]  # the primed <session_context> Gemini sends first is not the person's
    assert states(report)["model_override"]["model"] == agents.model.main_requests()[0].model
    assert report["handoff"] == {"agent": "gemini", "cwd": str(agent.repo),
                                 "command": ["gemini", "--resume", run.session_id]}  # fmt: skip
    # Kept after Gemini deletes it (`sessionRetention`, 30 days by default): whole.
    items = items_of(server, thread["threadId"])
    for path in session_files(agent):
        path.unlink()
    assert imported(home, agent)["sessions"] == 0
    assert items_of(server, thread["threadId"]) == items


@pytest.mark.compat("gemini", "messages", "resume")
def test_a_session_file_gemini_rewrote_without_its_header_is_imported_without_a_handoff(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    """Gemini 0.61 rewrites a session file without its first line (the header naming the
    session) when another Gemini in the project prunes it; the file still holds the
    conversation. It was reported "empty: no session id in it yet": it is imported, said
    what it is, and offered no handoff (Gemini could not find the session by its name)."""
    agent = agents.start(Scenario({"one": [Reply(text="First answer.")],
                                   "two": [Reply(text="Second answer.")]}))  # fmt: skip
    first = agent.gemini("[[one]] first prompt").check()
    agent.gemini("[[two]] second prompt", resume=first.session_id).check()
    # The file holding the conversation (a headless --resume may leave one beside it with
    # none: docs/import.md, Gemini's files with no conversation yet).
    (path,) = [p for p in session_files(agent) if first.session_id[:8] in p.name
               and "second prompt" in p.read_text()]  # fmt: skip
    header, *rest = path.read_text().splitlines(keepends=True)
    assert json.loads(header)["sessionId"] == first.session_id
    path.write_text("".join(rest))  # as the pruning Gemini leaves it
    summary = import_from(home, "gemini", agent.gemini_tmp)
    (problem,) = [p for p in summary["problems"] if p["path"] == str(path)]
    assert (problem["status"], "no header line" in problem["reason"]) == ("created", True)
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = [t for t in server.request("thread/list", {})["threads"]
                 if t["origin"]["path"] == str(path)]  # fmt: skip
    assert thread["origin"]["sessionId"] == f"headerless:{path.stem}"
    assert thread["cwd"] == str(agent.repo)
    report = resume(server, thread["threadId"])
    assert [m["content"] for m in report["messages"]["items"] if not m.get("thought")] == [
        "[[one]] first prompt",
        "First answer.",
        "[[two]] second prompt",
        "Second answer.",
    ]
    assert report["handoff"] is None


EDITS = Scenario({"edit": [
    Reply(text="Writing notes.", calls=(Call("write_file", {"file_path": "notes.txt",
                                                           "content": "one\ntwo\n"}),)),
    Reply(calls=(Call("replace", {"file_path": "notes.txt", "old_string": "two",
                                  "new_string": "three", "instruction": "two to three"}),)),
    Reply(calls=(Call("replace", {"file_path": "README.md", "old_string": "NOT IN THE FILE",
                                  "new_string": "x", "instruction": "an edit that fails"}),)),
    Reply(text="Notes written; the README edit failed."),
]})  # fmt: skip


@pytest.mark.compat("gemini", "edits")
def test_a_file_written_then_edited_is_in_file_history_and_a_failed_edit_is_not(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(EDITS)
    agent.gemini("[[edit]] write notes, edit them, then edit the README").check()
    assert (agent.repo / "notes.txt").read_text() == "one\nthree\n"
    imported(home, agent)
    server = spawn()
    server.initialize([str(agent.repo)])
    thread = only_thread(server)
    report = resume(server, thread["threadId"])
    # Each message once, though Gemini writes one again whenever it changes (its tokens,
    # each call's result).
    texts = [m["content"] for m in report["messages"]["items"]]
    assert texts == [
        "[[edit]] write notes, edit them, then edit the README",
        "Writing notes.",
        "Notes written; the README edit failed.",
    ]
    history = states(report)["file_history"]
    (notes,) = history["files"]  # README.md is not there: its edit failed
    assert notes["path"] == str(agent.repo / "notes.txt")
    assert (notes["beforeSha"], notes["afterSha"]) == (sha("one\ntwo\n"), sha("one\nthree\n"))
    assert (notes["currentSha"], notes["diverged"]) == (sha("one\nthree\n"), False)
    assert history["edits"] == 2
    items = items_of(server, thread["threadId"])
    edits = [i for i in items if i["type"] == "file_edit"]
    assert [(e["path"], e["beforeSha"]) for e in edits] == [
        (str(agent.repo / "notes.txt"), None),  # written new: nothing before
        (str(agent.repo / "notes.txt"), sha("one\ntwo\n")),
    ]
    failed = [i for i in operations(items, "replace") if i["state"] == "failed"]
    assert len(failed) == 1 and "could not find" in failed[0]["result"].lower()
    assert failed[0]["operationId"] not in {e["operationId"] for e in edits}
    assert states(report)["operations"] == {"open": [], "closed": 3}


@pytest.mark.compat("gemini", "messages")
def test_shell_commands_are_operations_with_their_command_and_exit_code(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({"shell": [
        Reply(calls=(Call("run_shell_command", {"command": "echo hi && git branch --show-current",
                                                "description": "say hi"}),)),
        Reply(calls=(Call("run_shell_command", {"command": "echo out; exit 3"}),)),
        Reply(text="One worked, one exited 3."),
    ]}))  # fmt: skip
    agent.gemini("[[shell]] run two commands").check()
    imported(home, agent)
    server = spawn()
    server.initialize([str(agent.repo)])
    items = items_of(server, only_thread(server)["threadId"])
    started = [i for i in operations(items, "run_shell_command") if i["state"] == "started"]
    done = [i for i in operations(items, "run_shell_command") if i["state"] != "started"]
    assert [(i["command"], i["effect"]) for i in started] == [
        ("echo hi && git branch --show-current", "side_effect"),
        ("echo out; exit 3", "side_effect"),
    ]
    assert started[0]["description"] == "say hi"
    # Gemini calls both a success; the one that exited 3 failed (it was once `committed`).
    assert [(i["state"], i["exitCode"]) for i in done] == [("committed", 0), ("failed", 3)]
    assert BRANCH in done[0]["result"] and "out" in done[1]["result"]


@pytest.mark.compat("gemini", "todos", "cost")
def test_write_todos_is_the_todo_list_and_tokens_are_geminis_own_count(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    first = [{"description": "Write the parser", "status": "in_progress"},
             {"description": "Write the docs", "status": "pending"},
             {"description": "Ship it", "status": "pending"}]  # fmt: skip
    then = [{"description": "Write the parser", "status": "completed"},
            {"description": "Write the docs", "status": "in_progress"},
            {"description": "Ship it", "status": "cancelled"}]  # fmt: skip
    agent = agents.start(Scenario({"plan": [
        Reply(calls=(Call("write_todos", {"todos": first}),)),
        Reply(calls=(Call("write_todos", {"todos": then}),),
              usage=Usage(input_tokens=2000, output_tokens=80, cache_read_tokens=1500)),
        Reply(text="Planned.", usage=Usage(input_tokens=2100, output_tokens=20)),
    ]}))  # fmt: skip
    # write_todos is offered to Gemini 2 models (Gemini 3 ones get no todo tool); -m also
    # skips the router, so every model call of the session is in its transcript.
    run = agent.gemini("[[plan]] plan the work", args=("-m", "gemini-2.5-flash")).check()
    imported(home, agent)
    server = spawn()
    server.initialize([str(agent.repo)])
    report = resume(server, only_thread(server)["threadId"])
    todos = states(report)["todos"]["items"]
    assert [(t["content"], t["status"]) for t in todos] == [
        ("Write the parser", "completed"),
        ("Write the docs", "in_progress"),
        ("Ship it (cancelled)", "pending"),  # sessiond has three statuses; the fourth is said
    ]
    (stats,) = run.of_type("result")
    own = stats["stats"]["models"]["gemini-2.5-flash"]
    cost = states(report)["cost"]
    assert (cost["inputTokens"], cost["outputTokens"]) == (own["input_tokens"],
                                                           own["output_tokens"])  # fmt: skip
    assert list(cost["byModel"]) == ["gemini-2.5-flash"]
    assert cost["usd"] > 0  # priced by genai-prices
    items = items_of(server, report["thread"]["threadId"])
    cached = sum(i["cacheReadTokens"] for i in items if i["type"] == "cost")
    assert cached == own["cached"] == 1500


SUB_AGENT = Scenario({
    "main": [Reply(calls=(Call("invoke_agent", {"agent_name": "generalist",
                                                "prompt": "[[sub]] count the files"}),),
                   usage=Usage(input_tokens=1000, output_tokens=50)),
             Reply(text="The sub-agent counted one file.",
                   usage=Usage(input_tokens=1100, output_tokens=20, cache_read_tokens=600))],
    "sub": [Reply(calls=(Call("run_shell_command", {"command": "ls"}),),
                  usage=Usage(input_tokens=700, output_tokens=40)),
            Reply(calls=(Call("complete_task", {"result": {"response": "One file."}}),),
                  usage=Usage(input_tokens=800, output_tokens=10))],
})  # fmt: skip


@pytest.mark.compat("gemini", "sub-agents", "cost")
def test_a_sub_agent_is_a_child_thread_under_its_call_and_in_the_parents_cost(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    """invoke_agent runs the sub-agent in the same process: Gemini writes its session to
    `chats/<parent sessionId>/<its sessionId>.jsonl` (`kind: subagent`; nothing in it
    names the parent, its folder does) and puts its id on the parent's call (`agentId`).
    Gemini's own stats for the run count the sub-agent's model calls with the parent's
    (`-m` skips the router, whose calls no session file holds)."""
    agent = agents.start(SUB_AGENT)
    run = agent.gemini("[[main]] ask a sub-agent", args=("-m", "gemini-2.5-flash")).check()
    (child_file,) = agent.gemini_tmp.glob(f"*/chats/{run.session_id}/*.jsonl")
    child_meta = json.loads(child_file.read_text().splitlines()[0])
    assert child_meta["kind"] == "subagent"
    summary = imported(home, agent)
    assert (summary["sessions"], summary["created"]) == (2, 2), summary
    server = spawn()
    server.initialize([str(agent.repo)])
    parent = only_thread(server)  # the sub-agent is not a top-level thread
    assert (parent["origin"]["sessionId"], parent["childCount"]) == (run.session_id, 1)
    (child,) = server.request("thread/list", {"parentThreadId": parent["threadId"]})["threads"]
    assert child["origin"]["sessionId"] == child_meta["sessionId"] == child_file.stem
    assert child["origin"]["parentSessionId"] == run.session_id
    (called,) = [i for i in operations(items_of(server, parent["threadId"]), "invoke_agent")
                 if i["state"] == "committed"]  # fmt: skip
    assert (
        child["parentOperationId"] == child["origin"]["parentToolCallId"] == called["operationId"]
    )
    assert (called["childSessionId"], called["childThreadId"]) == (
        child_file.stem,
        child["threadId"],
    )
    assert "One file." in called["result"]
    texts = [m["content"] for m in resume(server, parent["threadId"])["messages"]["items"]]
    assert texts == ["[[main]] ask a sub-agent", "The sub-agent counted one file."]
    # The child is the sub-agent's own conversation; its handoff is the parent's session.
    report = resume(server, child["threadId"])
    assert [m["content"] for m in report["messages"]["items"]] == ["[[sub]] count the files"]
    shell = operations(items_of(server, child["threadId"]), "run_shell_command")
    assert [o["command"] for o in shell if o["state"] == "started"] == ["ls"]
    assert report["handoff"]["command"] == ["gemini", "--resume", run.session_id]
    # The parent's cost: its own, the sub-agent's line, and both in the total, as Gemini
    # counted the session (its stats include the sub-agent's calls).
    cost = states(resume(server, parent["threadId"]))["cost"]
    (stats,) = run.of_type("result")
    (theirs,) = stats["stats"]["models"].values()
    line = cost["subagents"]
    assert (line["threads"], line["missing"], line["items"][0]["threadId"]) == (
        1, 0, child["threadId"])  # fmt: skip
    assert (line["inputTokens"], line["outputTokens"]) == (1500, 50)  # the child's file
    assert (cost["inputTokens"], cost["outputTokens"]) == (theirs["input_tokens"],
                                                           theirs["output_tokens"])  # fmt: skip
    assert cost["own"]["inputTokens"] + line["inputTokens"] == cost["inputTokens"]
    assert line["usd"] > 0 and cost["usd"] == pytest.approx(cost["own"]["usd"] + line["usd"])


RESUMED = Scenario({
    "write": [Reply(calls=(Call("write_file", {"file_path": "notes.txt", "content": "one\n"}),)),
              Reply(text="Wrote notes.txt.")],
    "again": [Reply(text="Second turn, with the first in mind.")],
})  # fmt: skip


@pytest.mark.compat("gemini", "resume")
def test_the_handoff_resumes_in_gemini_with_the_earlier_turns_and_a_reimport_adds_the_turn_once(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(RESUMED)
    first = agent.gemini("[[write]] write notes").check()
    imported(home, agent)
    server = spawn()
    server.initialize([str(agent.repo)])
    thread = only_thread(server)
    handoff = resume(server, thread["threadId"])["handoff"]
    assert handoff["command"] == ["gemini", "--resume", first.session_id]
    program, flag, session = handoff["command"]
    second = agent.run([str(agent.bins / program), flag, session, "-p", "[[again]] go on",
                        "--output-format", "stream-json", "--approval-mode", "yolo"],
                       cwd=Path(handoff["cwd"])).check()  # fmt: skip
    assert second.session_id == first.session_id
    last = agents.model.main_requests()[-1]
    assert last.user_texts()[0] == "[[write]] write notes"
    assert ["write_file"] in [t.calls for t in last.turns if t.role == "assistant"]
    assert any("notes.txt" in r for t in last.turns for r in t.results)
    again = imported(home, agent)
    # However the resumed run was filed (appended to the session's file, or a new file
    # when the minute changed, left with nothing but Gemini's primed context), it is one
    # session: the same thread grows; nothing else is listed.
    assert (again["created"], again["updated"], again["revisions"]) == (0, 1, 0), again
    assert imported(home, agent)["updated"] == 0
    report = resume(server, thread["threadId"])
    texts = [m["content"] for m in report["messages"]["items"]]
    assert texts == ["[[write]] write notes", "Wrote notes.txt.", "[[again]] go on",
                     "Second turn, with the first in mind."]  # fmt: skip
    assert only_thread(server)["threadId"] == thread["threadId"]
    # Both runs' model calls, once each: Gemini's own count for its main model.
    model = last.model
    own = [run.of_type("result")[0]["stats"]["models"][model] for run in (first, second)]
    spent = states(report)["cost"]["byModel"][model]
    assert (spent["inputTokens"], spent["outputTokens"]) == (
        sum(o["input_tokens"] for o in own),
        sum(o["output_tokens"] for o in own),
    )


@pytest.mark.compat("gemini", "compaction")
def test_a_compression_is_a_compact_boundary_with_geminis_summary(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    """Gemini compresses before a model call once the last prompt passed
    `model.compressionThreshold` of the model's window: the summary (a `<state_snapshot>`,
    asked of the model without tools) replaces the history. A tiny threshold makes the
    resumed run compress what the first run said."""
    summary = "<state_snapshot>The person asked for two commands; both ran.</state_snapshot>"
    agent = agents.start(Scenario({
        "long": [Reply(calls=(Call("run_shell_command", {"command": "echo a"}),)),
                 Reply(calls=(Call("run_shell_command", {"command": "echo b"}),)),
                 Reply(text="Both ran.")],
        "after": [Reply(text="Carrying on from the summary.")],
    }, aside=lambda request: Reply(text=summary)))  # fmt: skip
    agent.write_gemini_settings(model={"compressionThreshold": 0.00001})
    first = agent.gemini("[[long]] run two commands").check()
    agent.gemini("[[after]] carry on", resume=first.session_id).check()
    assert agents.model.main_requests()[-1].user_texts()[0] == summary  # it did compress
    imported(home, agent)
    server = spawn()
    server.initialize([str(agent.repo)])
    thread = only_thread(server)
    items = items_of(server, thread["threadId"])
    (boundary,) = [i for i in items if i["type"] == "compact_boundary"]
    assert boundary["summary"] == summary
    report = resume(server, thread["threadId"])
    assert states(report)["messages"]["boundaryType"] == "compact_boundary"
    after = [m.get("content", m.get("summary")) for m in report["messages"]["items"]]
    assert after == [summary, "[[after]] carry on", "Carrying on from the summary."]
    # What an incremental import does, cut at any line of this transcript (metadata twice,
    # history restated three times, messages written again): the items of one pass.
    source = Path(thread["origin"]["path"])
    records = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    whole = feed(GeminiParser(), records)
    for cut in range(len(records) + 1):
        first = GeminiParser()
        items = feed(first, records[:cut])
        later = GeminiParser(json.loads(json.dumps(first.state)))
        assert items + feed(later, records[cut:], cut + 1) == whole, f"cut at line {cut}"


def test_a_followed_gemini_session_is_listed_while_it_is_written(
    agents: Agents, spawn: Callable[..., ServerProcess]
) -> None:
    """`serve --follow gemini` (its store found by $GEMINI_CLI_HOME, as Gemini finds it):
    the session is announced while Gemini is still waiting on the model, and grows."""
    gate = threading.Event()
    steps = Scenario({"live": [Reply(calls=(Call("run_shell_command", {"command": "echo live"}),)),
                               Reply(text="Live answer.")]})  # fmt: skip

    def script(request: Request) -> Reply:
        if request.tools and request.scenario() == "live" and request.round() == 1:
            assert gate.wait(HANG_GUARD), "the test never let the second call through"
        return steps(request)

    agent = agents.start(script)
    agent.gemini_tmp.mkdir(parents=True)
    server = spawn(args=["--follow", "gemini"], env={"GEMINI_CLI_HOME": str(agent.home)})
    server.initialize([str(agent.repo)])
    assert server.request("thread/list", {})["threads"] == []  # from here on it follows
    runs: list[Run] = []
    runner = threading.Thread(target=lambda: runs.append(agent.gemini("[[live]] go live")))
    runner.start()
    try:
        started = eventually(lambda: announced(server, "thread/started"))[0]
        assert started["origin"]["agent"] == "gemini" and started["cwd"] == str(agent.repo)
        assert not gate.is_set() and runner.is_alive()  # Gemini is mid-turn
        mid = [m["content"] for m in resume(server, started["threadId"])["messages"]["items"]]
        assert mid == ["[[live]] go live"]
    finally:
        gate.set()
        runner.join(HANG_GUARD)
    runs[0].check()
    assert started["origin"]["sessionId"] == runs[0].session_id
    eventually(lambda: any(t["itemCount"] > started["itemCount"]
                           for t in announced(server, "thread/updated")))  # fmt: skip
    texts = eventually(lambda: [
        m["content"] for m in resume(server, started["threadId"])["messages"]["items"]
        if m["content"] == "Live answer."
    ])  # fmt: skip
    assert texts == ["Live answer."]


@pytest.mark.compat("gemini", "sub-agents")
def test_a_followed_sub_agent_is_announced_under_its_parent_with_the_counts(
    agents: Agents, spawn: Callable[..., ServerProcess]
) -> None:
    """`serve --follow gemini` while Gemini runs a sub-agent: its thread is announced as
    the parent's child (`childCount` 0), and the parent's rows carry the count a listing
    gives (1), whichever of the two files the watcher imports first."""
    agent = agents.start(SUB_AGENT)
    agent.gemini_tmp.mkdir(parents=True)
    server = spawn(args=["--follow", "gemini"], env={"GEMINI_CLI_HOME": str(agent.home)})
    server.initialize([str(agent.repo)])
    assert server.request("thread/list", {})["threads"] == []  # from here on it follows
    run = agent.gemini("[[main]] ask a sub-agent", args=("-m", "gemini-2.5-flash")).check()

    def parent_rows() -> list[dict[str, Any]]:  # in the order they were sent
        rows = [n["params"]["thread"] for n in list(server.notifications)
                if n["method"] in ("thread/started", "thread/updated")]  # fmt: skip
        return [t for t in rows if (t.get("origin") or {}).get("sessionId") == run.session_id]

    (child,) = eventually(lambda: [t for t in announced(server, "thread/started")
                                   if t["parentThreadId"]])  # fmt: skip
    assert (child["childCount"], child["origin"]["parentSessionId"]) == (0, run.session_id)
    parent_id = child["parentThreadId"]
    eventually(lambda: parent_rows() and parent_rows()[-1]["childCount"] == 1)
    assert {t["threadId"] for t in parent_rows()} == {parent_id}
    assert all(isinstance(t["childCount"], int) for t in parent_rows())  # never unknown
    (listed,) = server.request("thread/list", {})["threads"]
    assert (listed["threadId"], listed["childCount"]) == (parent_id, 1)


def announced(server: ServerProcess, method: str) -> list[dict[str, Any]]:
    return [n["params"]["thread"] for n in list(server.notifications) if n["method"] == method
            and (n["params"]["thread"].get("origin") or {}).get("agent") == "gemini"]  # fmt: skip


@pytest.mark.compat("gemini", "messages", "edits", "resume")
def test_an_older_gemini_json_session_is_imported_and_resumed_by_the_current_cli(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    """Up to 0.38 a session was one JSON document (`session-*.json`), still on the disks
    of everyone who used Gemini CLI before April 2026. It is imported whole; resumed by the
    current CLI it continues in `session-*.jsonl` (the history copied over): a new
    revision, the one the handoff resumes."""
    agent = agents.start(Scenario({"later": [Reply(text="Continued in 0.61.")]}))
    project = agent.gemini_tmp / "repo"
    (project / "chats").mkdir(parents=True)
    legacy = project / "chats" / LEGACY.name.removeprefix("gemini-0.38.2-")
    legacy.write_text(LEGACY.read_text().replace("@ROOT@", str(agent.root)))
    (project / ".project_root").write_text(str(agent.repo))  # as 0.38.2 left them
    (agent.home / ".gemini" / "projects.json").write_text(
        json.dumps({"projects": {str(agent.repo): "repo"}})
    )
    (agent.repo / "notes.txt").write_text("one\nthree\n")  # what that session left
    session_id = json.loads(legacy.read_text())["sessionId"]
    assert imported(home, agent)["created"] == 1
    server = spawn()
    server.initialize([str(agent.repo)])
    old = only_thread(server)
    assert (old["origin"]["sessionId"], old["cwd"]) == (session_id, str(agent.repo))
    report = resume(server, old["threadId"])
    said = [m["content"] for m in report["messages"]["items"] if not m.get("thought")]
    assert said == ["[[write]] write notes, edit them, then run a command", "Writing.",
                    "Done with the notes."]  # fmt: skip
    (notes,) = states(report)["file_history"]["files"]  # the failed README edit is not
    assert (notes["afterSha"], notes["diverged"]) == (sha("one\nthree\n"), False)
    assert report["handoff"]["command"] == ["gemini", "--resume", session_id]

    agent.gemini("[[later]] carry on", resume=session_id).check()
    assert agents.model.main_requests()[-1].user_texts()[0].startswith("[[write]]")
    # The .json is kept; its copy continues as .jsonl; and the run's own new session file
    # (named for this minute) holds only Gemini's primed context: not a session.
    (startup,) = set(session_files(agent)) - {legacy, legacy.with_suffix(".jsonl")}
    assert startup.name.endswith(f"-{session_id[:8]}.jsonl")
    again = imported(home, agent)
    assert (again["created"], again["empty"]) == (1, 1)  # the copy: a revision of its own
    threads = server.request("thread/list", {})["threads"]
    (new,) = [t for t in threads if t["threadId"] != old["threadId"]]
    assert (new["origin"]["sessionId"], new["origin"]["revision"]) == (session_id, 2)
    texts = [m["content"] for m in resume(server, new["threadId"])["messages"]["items"]
             if not m.get("thought")]  # fmt: skip
    assert texts[-2:] == ["[[later]] carry on", "Continued in 0.61."]
    assert resume(server, old["threadId"])["handoff"] is None  # Gemini resumes the new one
    assert resume(server, new["threadId"])["handoff"]["command"][2] == session_id
