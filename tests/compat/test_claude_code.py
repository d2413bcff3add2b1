"""Claude Code (the pinned CLI, 2.1) against the mock model: what sessiond makes of the
transcripts it really writes.

Each scenario is one real `claude -p` run (or a resumed second one); the assertions are on
sessiond's side of it, through a real `sessiond import` process and a real server: the
task list, edits and shell commands, sub-agents as child threads with their cost in the
parent's, a resumed run continuing the same thread, a compaction. Every scenario ends by
checking that its transcripts hold no record type or tool the mapping neither maps nor
lists in `ClaudeCodeParser.IGNORED` (with why).

Two facts of this CLI version the scenarios are built on: its planning tools (TaskCreate,
TaskUpdate, TaskList; TodoWrite with `CLAUDE_CODE_ENABLE_TASKS=false`) are offered for the
default model only with `CLAUDE_CODE_ENABLE_TODO_TOOLS=1` (older models get them without),
and in `-p` mode they are deferred: the request offers `ToolSearch` and a placeholder, so
the mock model first calls `ToolSearch {"query": "select:…"}`, as a real model would.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from restore.agents.claude_code.parser import ClaudeCodeParser
from tests.agents.clis import AgentHome, Run
from tests.agents.mock_model import Call, Reply, Scenario, Usage
from tests.compat.conftest import Agents, import_from, resume, states
from tests.support.rpc_client import REPO, ServerProcess
from tests.test_cli import sessiond

TODO_TOOLS = {"CLAUDE_CODE_ENABLE_TODO_TOOLS": "1"}


def assert_nothing_unmapped(agent: AgentHome) -> None:
    """Every record type and tool in the run's transcripts is mapped or on IGNORED."""
    transcripts = agent.transcripts(agent.claude_projects)
    assert transcripts
    for path in transcripts:
        parser = ClaudeCodeParser()
        for number, line in enumerate(path.read_bytes().splitlines(), 1):
            record = orjson.loads(line)
            parser.feed(number, record, record.get("timestamp"))
        left = {k: v for k, v in parser.unmapped_seen.items() if k not in parser.IGNORED}
        assert not left, f"{path.name}: not mapped and not on IGNORED: {left}"


def items_of(server: ServerProcess, thread_id: str) -> list[dict[str, Any]]:
    return server.request("thread/read", {"threadId": thread_id, "limit": 10_000})["items"]


def only_thread(server: ServerProcess) -> dict[str, Any]:
    (thread,) = server.request("thread/list", {})["threads"]
    return thread


def operations(items: list[dict[str, Any]], tool: str) -> list[dict[str, Any]]:
    return [i for i in items if i["type"] == "operation" and i["tool"] == tool]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- todos ---------------------------------------------------------------------------------

TASKS = Scenario({"tasks": [
    Reply(calls=(Call("ToolSearch", {"query": "select:TaskCreate,TaskUpdate,TaskList"}),)),
    Reply(calls=(
        Call("TaskCreate", {"subject": "Write the parser", "description": "parse it",
                            "activeForm": "Writing the parser"}),
        Call("TaskCreate", {"subject": "Test the parser", "description": "test it"}),
        Call("TaskCreate", {"subject": "Drop me", "description": "to be deleted"}),
    )),
    Reply(calls=(Call("TaskUpdate", {"taskId": "1", "status": "in_progress"}),)),
    Reply(calls=(
        Call("TaskUpdate", {"taskId": "1", "status": "completed"}),
        Call("TaskUpdate", {"taskId": "3", "status": "deleted"}),
        Call("TaskUpdate", {"taskId": "2", "subject": "Test the parser well"}),
    )),
    Reply(calls=(Call("TaskList", {}),)),
    Reply(text="Planned."),
]})  # fmt: skip


@pytest.mark.compat("claude-code", "todos")
def test_claude_code_tasks_become_the_todo_list_created_updated_deleted_in_order(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(TASKS)
    run = agent.claude("[[tasks]] plan the work", **TODO_TOOLS).check()
    assert agents.model is not None
    offered = [request.tools for request in agents.model.main_requests()]
    assert "TaskCreate" not in offered[0] and "ToolSearch" in offered[0]  # deferred in -p
    assert "TaskCreate" in offered[1]  # loaded by the ToolSearch call
    import_from(home, "claude", agent.claude_projects)
    server = spawn()
    server.initialize([str(agent.repo)])
    thread = only_thread(server)
    final = [
        {"id": "1", "content": "Write the parser", "status": "completed"},
        {"id": "2", "content": "Test the parser well", "status": "pending"},
    ]
    assert states(resume(server, thread["threadId"]))["todos"]["items"] == final
    # What Claude Code itself keeps: one file per live task under ~/.claude/tasks/<session>.
    kept = agent.home / ".claude" / "tasks" / run.session_id
    on_disk = [json.loads((kept / f"{t['id']}.json").read_text()) for t in final]
    assert [(t["id"], t["subject"], t["status"]) for t in on_disk] == [
        (t["id"], t["content"], t["status"]) for t in final
    ]
    assert not (kept / "3.json").exists()
    # Each change is a new list, in the order the results came back.
    lists = [i["items"] for i in items_of(server, thread["threadId"]) if i["type"] == "todos"]
    assert [len(entries) for entries in lists[:3]] == [1, 2, 3]
    assert lists[3][0] == {"id": "1", "content": "Write the parser", "status": "in_progress"}
    # Then one list per update (three results, in whatever order they came), and none
    # for TaskList: what it listed is what the updates had said.
    assert len(lists) == 7 and lists[-1] == final
    assert_nothing_unmapped(agent)


TODO_WRITE = Scenario({"todos": [
    Reply(calls=(Call("ToolSearch", {"query": "select:TodoWrite"}),)),
    Reply(calls=(Call("TodoWrite", {"todos": [
        {"content": "Read the code", "status": "completed", "activeForm": "Reading the code"},
        {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
    ]}),)),
    Reply(calls=(Call("TodoWrite", {"todos": [  # invalid: Claude Code refuses it
        {"content": "A list it refused", "status": "someday", "activeForm": "Refusing"},
    ]}),)),
    Reply(text="On it."),
]})  # fmt: skip


@pytest.mark.compat("claude-code", "todos")
def test_claude_code_todowrite_still_becomes_the_todo_list_when_tasks_are_off(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    """The list is the last one Claude Code accepted: a TodoWrite it refused (an invalid
    status) is a failed call, and no todo list (it once was the restored one)."""
    agent = agents.start(TODO_WRITE)
    agent.claude("[[todos]] fix it", CLAUDE_CODE_ENABLE_TASKS="false", **TODO_TOOLS).check()
    assert agents.model is not None
    assert "TodoWrite" in agents.model.main_requests()[1].tools
    import_from(home, "claude", agent.claude_projects)
    server = spawn()
    server.initialize([str(agent.repo)])
    thread_id = only_thread(server)["threadId"]
    todos = states(resume(server, thread_id))["todos"]["items"]
    assert [(t["content"], t["status"]) for t in todos] == [
        ("Read the code", "completed"),
        ("Fix the bug", "in_progress"),
    ]
    items = server.request("thread/read", {"threadId": thread_id, "limit": 500})["items"]
    writes = [(i["state"]) for i in items if i["type"] == "operation" and i["tool"] == "TodoWrite"]
    assert writes == ["started", "committed", "started", "failed"]
    assert_nothing_unmapped(agent)


# --- edits and shell commands ---------------------------------------------------------------


def edits(repo: Path) -> Scenario:
    notes = str(repo / "notes.txt")
    return Scenario({"edits": [
        Reply(calls=(Call("Write", {"file_path": notes, "content": "alpha\nbeta\n"}),)),
        Reply(calls=(Call("Edit", {"file_path": notes, "old_string": "beta",
                                   "new_string": "gamma"}),)),
        Reply(calls=(Call("Edit", {"file_path": notes, "old_string": "not there",
                                   "new_string": "x"}),)),
        Reply(calls=(Call("Bash", {"command": "echo hello-out && ls",
                                   "description": "say hello"}),)),
        Reply(calls=(Call("Bash", {"command": "echo oops >&2; exit 3",
                                   "description": "fail on purpose"}),)),
        Reply(text="Edited."),
    ]})  # fmt: skip


@pytest.mark.compat("claude-code", "edits", "permissions")
def test_claude_code_edits_and_shell_commands_with_a_failed_edit_that_edits_nothing(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(edits(agents.root / "agents" / "repo"))  # where AgentHome puts it
    agent.claude("[[edits]] edit the notes").check()
    notes = agent.repo / "notes.txt"
    assert notes.read_text() == "alpha\ngamma\n"  # the CLI really edited it
    import_from(home, "claude", agent.claude_projects)
    server = spawn()
    server.initialize([str(agent.repo)])
    thread = only_thread(server)
    # Filed under the client's workspace folder, as a thread this client started would be.
    assert thread["workspaceFolder"] == str(agent.repo)
    items = items_of(server, thread["threadId"])
    write, edit, bad_edit = [o for o in operations(items, "Write") + operations(items, "Edit")
                             if o["state"] != "started"]  # fmt: skip
    outcomes = (write["state"], edit["state"], bad_edit["state"])
    assert outcomes == ("committed", "committed", "failed")
    assert "String to replace not found" in bad_edit["result"]
    file_edits = [i for i in items if i["type"] == "file_edit"]
    assert [(e["operationId"], e["beforeSha"], e["afterSha"]) for e in file_edits] == [
        (write["operationId"], None, sha("alpha\nbeta\n")),  # created: no file before
        (edit["operationId"], sha("alpha\nbeta\n"), sha("alpha\ngamma\n")),
    ]  # and none for the failed edit
    report = resume(server, thread["threadId"])
    # The run's bypassPermissions comes back, downgraded to asking (and says so).
    permissions = states(report)["permissions"]
    assert permissions["downgradedFrom"] == {"approvalMode": "bypassPermissions"}
    assert permissions["approvalMode"] != "bypassPermissions"
    (latest,) = states(report)["file_history"]["files"]
    assert (latest["path"], latest["diverged"]) == (str(notes), False)
    assert latest["afterSha"] == latest["currentSha"] == sha(notes.read_text())
    ok, failing = [o for o in operations(items, "Bash") if o["state"] != "started"]
    started = {o["operationId"]: o for o in operations(items, "Bash") if o["state"] == "started"}
    assert started[ok["operationId"]]["command"] == "echo hello-out && ls"
    assert (ok["state"], ok["exitCode"], ok["result"]) == (
        "committed", 0, "hello-out\nREADME.md\nnotes.txt",
    )  # fmt: skip
    assert started[failing["operationId"]]["command"] == "echo oops >&2; exit 3"
    assert (failing["state"], failing["exitCode"]) == ("failed", 3)
    assert "oops" in failing["result"]
    shown = sessiond(home, "show", thread["threadId"])
    assert shown.returncode == 0, shown.stderr
    assert "$ echo hello-out && ls" in shown.stdout
    assert "exit 3" in shown.stdout
    assert_nothing_unmapped(agent)


# --- sub-agents ------------------------------------------------------------------------------

PARENT_USAGE = Usage(input_tokens=1200, output_tokens=60)
SUB_USAGE = (
    Usage(input_tokens=3000, output_tokens=100),
    Usage(input_tokens=3100, output_tokens=40),
)
DELEGATE = Scenario({
    "delegate": [
        Reply(calls=(Call("Agent", {"description": "Count the files",
                                    "prompt": "[[sub]] count the files in the repo",
                                    "subagent_type": "general-purpose",
                                    "run_in_background": False}),), usage=PARENT_USAGE),
        Reply(text="The sub-agent counted them.", usage=PARENT_USAGE),
    ],
    "sub": [
        Reply(calls=(Call("Bash", {"command": "ls | wc -l", "description": "count"}),),
              usage=SUB_USAGE[0]),
        Reply(text="There is 1 file.", usage=SUB_USAGE[1]),
    ],
})  # fmt: skip


def delegated(agents: Agents) -> tuple[AgentHome, Run, Path, Path]:
    """A run whose Agent call starts a sub-agent: (home, run, parent and sub-agent files)."""
    agent = agents.start(DELEGATE)
    run = agent.claude("[[delegate]] ask a sub-agent").check()
    parent = next(p for p in agent.transcripts(agent.claude_projects) if "subagents" not in p.parts)
    (child,) = (parent.parent / run.session_id / "subagents").glob("agent-*.jsonl")
    return agent, run, parent, child


def agent_call(parent: Path) -> str:
    """The id of the parent's Agent tool call, as the transcript has it."""
    for line in parent.read_text().splitlines():
        record = json.loads(line)
        for block in (record.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("name") == "Agent":
                return str(block["id"])
    raise AssertionError("no Agent call in the parent transcript")


def assert_child_under_parent(server: ServerProcess, call: str) -> tuple[dict, dict]:
    (parent,) = server.request("thread/list", {})["threads"]  # the child is not top-level
    assert (parent["parentThreadId"], parent["childCount"]) == (None, 1)
    (child,) = server.request("thread/list", {"parentThreadId": parent["threadId"]})["threads"]
    assert child["parentThreadId"] == parent["threadId"]
    assert child["parentOperationId"] == child["origin"]["parentToolCallId"] == call
    assert child["origin"]["parentSessionId"] == parent["origin"]["sessionId"]
    assert child["childCount"] == 0
    return parent, child


@pytest.mark.compat("claude-code", "sub-agents")
def test_a_claude_code_sub_agent_is_a_child_thread_whose_cost_is_the_parents_too(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent, run, parent_file, _ = delegated(agents)
    summary = import_from(home, "claude", agent.claude_projects)
    assert summary["created"] == 2, summary
    server = spawn()
    server.initialize([str(agent.repo)])
    call = agent_call(parent_file)
    parent, child = assert_child_under_parent(server, call)
    # The parent's operation names the thread it started.
    (done,) = [o for o in operations(items_of(server, parent["threadId"]), "Agent")
               if o["state"] == "committed"]  # fmt: skip
    assert (done["operationId"], done["childThreadId"]) == (call, child["threadId"])
    # The child is the sub-agent's own conversation, with its own operations.
    report = resume(server, child["threadId"])
    texts = [m["content"] for m in report["messages"]["items"]]
    assert texts == ["[[sub]] count the files in the repo", "There is 1 file."]
    assert [o["command"] for o in operations(items_of(server, child["threadId"]), "Bash")
            if o["state"] == "started"] == ["ls | wc -l"]  # fmt: skip
    assert report["handoff"]["command"] == ["claude", "--resume", run.session_id]
    # The parent's cost: its own line, the sub-agent's line, and both in the totals, token
    # for token what Claude Code counted for the session.
    cost = states(resume(server, parent["threadId"]))["cost"]
    (usage,) = run.of_type("result")[-1]["modelUsage"].values()
    sub_in = sum(u.input_tokens for u in SUB_USAGE)
    sub_out = sum(u.output_tokens for u in SUB_USAGE)
    assert (cost["own"]["inputTokens"], cost["own"]["outputTokens"]) == (2400, 120)
    line = cost["subagents"]
    assert (line["threads"], line["inputTokens"], line["outputTokens"]) == (1, sub_in, sub_out)
    assert line["items"][0]["threadId"] == child["threadId"]
    assert (cost["inputTokens"], cost["outputTokens"]) == (
        usage["inputTokens"] + usage["cacheReadInputTokens"] + usage["cacheCreationInputTokens"],
        usage["outputTokens"],
    )
    # Shown nested: the child's conversation indented at the call that started it, and the
    # child indented under its parent in the list.
    shown = sessiond(home, "show", parent["threadId"]).stdout
    at = shown.index("Agent committed")
    assert shown.index("        There is 1 file.") > at
    listed = sessiond(home, "list").stdout.splitlines()
    (parent_row,) = [row for row in listed if row.startswith(parent["threadId"])]
    assert listed[listed.index(parent_row) + 1].startswith("  └ " + child["threadId"])
    assert_nothing_unmapped(agent)


@pytest.mark.compat("claude-code", "cost")
def test_the_cost_of_a_session_with_a_sub_agent_is_claude_codes_own_within_one_percent(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent, run, _, _ = delegated(agents)
    import_from(home, "claude", agent.claude_projects)
    server = spawn()
    server.initialize([str(agent.repo)])
    (parent,) = server.request("thread/list", {})["threads"]
    cost = states(resume(server, parent["threadId"]))["cost"]
    theirs = run.of_type("result")[-1]["total_cost_usd"]
    assert cost["subagents"]["usd"] > 0
    assert cost["usd"] == pytest.approx(theirs, rel=0.01)


@pytest.mark.compat("claude-code", "sub-agents")
def test_a_sub_agent_in_the_older_layout_beside_the_session_is_a_child_not_a_session(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    """Claude Code ≤ 2.0 wrote a sub-agent's transcript as `agent-<id>.jsonl` beside the
    session, without a `.meta.json`, and `Task` was the tool's name. HAND-MADE from the
    2.1 run's own files: the sub-agent's transcript moved there and its sidecar dropped
    (the lines are the CLI's, the layout is the older one)."""
    agent, _, parent_file, child_file = delegated(agents)
    legacy = parent_file.parent / child_file.name
    shutil.move(child_file, legacy)
    shutil.rmtree(parent_file.parent / parent_file.stem)
    summary = import_from(home, "claude", agent.claude_projects)
    assert summary["created"] == 2, summary
    server = spawn()
    server.initialize([str(agent.repo)])
    # Its parent's tool call is found in the parent's transcript (no sidecar to say it).
    _, child = assert_child_under_parent(server, agent_call(parent_file))
    assert child["origin"]["path"] == str(legacy)


@pytest.mark.compat("claude-code", "sub-agents")
def test_a_fifo_as_a_sub_agents_sidecar_never_stalls_the_import(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    """The sidecar (`agent-<id>.meta.json`) is read only when it is a small regular file: a
    FIFO there would block the importer forever. The call is then found in the parent."""
    agent, _, parent_file, child_file = delegated(agents)
    sidecar = child_file.with_suffix(".meta.json")
    sidecar.unlink()
    os.mkfifo(sidecar)
    command = [sys.executable, "-m", "server.cli", "--home", str(home), "import", "claude",
               "--from", str(agent.claude_projects), "--json"]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    assert done.returncode == 0, done.stderr  # a read of the FIFO would time out instead
    assert json.loads(done.stdout)["created"] == 2, done.stdout
    server = spawn()
    server.initialize([str(agent.repo)])
    assert_child_under_parent(server, agent_call(parent_file))


@pytest.mark.compat("claude-code", "cost", "compaction", "sub-agents")
def test_a_compaction_costs_what_claude_code_says_and_its_sub_agent_is_counted_once(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    """A `/compact`'s model calls are in no assistant line: only Claude Code's running
    totals (`cost-state`, written when a run ends and restored by a resumed one) count
    them, together with the sub-agents' calls (which the child thread counts). Imported
    after each run, the session costs what Claude Code says it did, the sub-agent once."""
    agent, run, _, _ = delegated(agents)
    import_from(home, "claude", agent.claude_projects)
    compacted = agent.claude("/compact", resume=run.session_id).check()
    again = import_from(home, "claude", agent.claude_projects)  # the appended lines only
    assert (again["created"], again["updated"]) == (0, 1), again
    server = spawn()
    server.initialize([str(agent.repo)])
    parent, child = assert_child_under_parent(server, agent_call(parent_file_of(agent)))
    cost = states(resume(server, parent["threadId"]))["cost"]
    (done,) = compacted.of_type("result")
    (usage,) = done["modelUsage"].values()  # the session's, sub-agent and compaction included
    (compaction,) = done["model_usage_since_last_result"].values()  # the /compact run's calls
    assert (cost["inputTokens"], cost["outputTokens"]) == (
        usage["inputTokens"] + usage["cacheReadInputTokens"] + usage["cacheCreationInputTokens"],
        usage["outputTokens"],
    )
    assert cost["usd"] == pytest.approx(done["total_cost_usd"], rel=0.01)
    # The compaction is a line of its own; the sub-agent's calls, in Claude Code's totals
    # too, are its line only.
    sub_in, sub_out = (
        sum(u.input_tokens for u in SUB_USAGE),
        sum(u.output_tokens for u in SUB_USAGE),
    )
    line = cost["subagents"]
    assert (line["inputTokens"], line["outputTokens"], line["items"][0]["threadId"]) == (
        sub_in, sub_out, child["threadId"])  # fmt: skip
    assert (cost["own"]["inputTokens"], cost["own"]["outputTokens"]) == (2400, 120)
    unrecorded = cost["unrecorded"]
    assert (unrecorded["inputTokens"], unrecorded["outputTokens"]) == (
        compaction["inputTokens"], compaction["outputTokens"])  # fmt: skip
    assert unrecorded["usd"] == pytest.approx(compaction["costUSD"], rel=0.01)
    # Imported again, nothing changes (the totals are not counted twice).
    assert import_from(home, "claude", agent.claude_projects)["unchanged"] == 2
    assert states(resume(server, parent["threadId"]))["cost"] == cost
    # A thread imported before totals were read (its saved parser state has no ledger)
    # takes the next totals as a baseline: the replies it counted are not counted again.
    lines = [orjson.loads(line) for line in parent_file_of(agent).read_bytes().splitlines()]
    first_run = next(n for n, r in enumerate(lines) if r.get("type") == "cost-state") + 1
    before = ClaudeCodeParser()
    for number, record in enumerate(lines[:first_run], 1):
        before.feed(number, record, record.get("timestamp"))
    older = {k: v for k, v in before.state.items() if k != "ledger"}
    after = ClaudeCodeParser(orjson.loads(orjson.dumps(older)))
    later = [item for number, record in enumerate(lines[first_run:], first_run + 1)
             for item in after.feed(number, record, record.get("timestamp"))]  # fmt: skip
    assert [i for i in later if i["type"] in ("cost", "cost_reported")] == []
    assert_nothing_unmapped(agent)


def parent_file_of(agent: AgentHome) -> Path:
    (parent,) = [p for p in agent.transcripts(agent.claude_projects) if "subagents" not in p.parts]
    return parent


# --- sub-agents on both stores ------------------------------------------------------------------


@pytest.mark.compat("claude-code", "sub-agents")
@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
def test_imported_sub_agents_stay_under_their_parent_in_the_shared_store(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess], store_url: str
) -> None:
    agent, _, parent_file, _ = delegated(agents)
    import_from(home, "claude", agent.claude_projects)
    moved = sessiond(home, "migrate", "--to", store_url)
    assert moved.returncode == 0, moved.stdout + moved.stderr
    server = spawn()  # on the PostgreSQL store
    server.initialize([str(agent.repo)])
    parent, child = assert_child_under_parent(server, agent_call(parent_file))
    cost = states(resume(server, parent["threadId"]))["cost"]
    assert cost["subagents"]["items"][0]["threadId"] == child["threadId"]


# --- a resumed run, and a compaction -------------------------------------------------------------

TWO_RUNS = Scenario({
    "first": [
        Reply(calls=(Call("Bash", {"command": "echo first-run", "description": "first"}),)),
        Reply(text="First answer."),
    ],
    "second": [Reply(text="Second answer.")],
})  # fmt: skip


@pytest.mark.compat("claude-code", "resume", "compaction")
def test_a_resumed_claude_code_run_continues_the_same_thread_and_a_compaction_keeps_it_all(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(TWO_RUNS)
    first = agent.claude("[[first]] start").check()
    import_from(home, "claude", agent.claude_projects)
    server = spawn()
    server.initialize([str(agent.repo)])
    thread_id = only_thread(server)["threadId"]
    handoff = resume(server, thread_id)["handoff"]
    assert handoff["command"] == ["claude", "--resume", first.session_id]
    assert handoff["cwd"] == str(agent.repo)
    # The handoff, as sessiond hands it over (headless here): the same session goes on.
    assert agents.model is not None
    before = len(agents.model.main_requests())
    command = [str(agent.bins / "claude"), *handoff["command"][1:], "-p", "[[second]] continue",
               "--output-format", "stream-json", "--verbose",
               "--permission-mode", "bypassPermissions"]  # fmt: skip
    second = agent.run(command, cwd=Path(handoff["cwd"])).check()
    assert second.session_id == first.session_id
    (sent,) = agents.model.main_requests()[before:]
    turns = [(t.role, t.text, t.calls, t.results) for t in sent.turns]
    assert turns == [
        ("user", "[[first]] start", [], []),
        ("assistant", "", ["Bash"], []),
        ("user", "", [], ["first-run"]),
        ("assistant", "First answer.", [], []),
        ("user", "[[second]] continue", [], []),
    ]
    again = import_from(home, "claude", agent.claude_projects)
    assert (again["created"], again["updated"]) == (0, 1), again
    assert only_thread(server)["threadId"] == thread_id
    expected = ["[[first]] start", "First answer.", "[[second]] continue", "Second answer."]
    messages = resume(server, thread_id)["messages"]
    assert [m["content"] for m in messages["items"]] == expected  # the new turn, once
    # A compaction, run headless the way Claude Code 2.1 takes it.
    agent.claude("/compact", resume=first.session_id).check()
    import_from(home, "claude", agent.claude_projects)
    items = items_of(server, thread_id)
    (boundary,) = [i for i in items if i["type"] == "compact_boundary"]
    messages = resume(server, thread_id)["messages"]
    assert messages["boundarySeq"] == boundary["seq"]
    # The next model call starts from the boundary, then Claude Code's summary of what came
    # before it (and what followed).
    after = messages["items"]
    assert after[0]["seq"] == boundary["seq"]
    assert all(m["seq"] > boundary["seq"] for m in after[1:])
    assert after[1]["compactSummary"] is True
    assert "continued from a previous conversation" in after[1]["content"]
    # Nothing before the boundary is lost from the thread.
    kept = [i["content"] for i in items if i["type"] == "message" and i["seq"] < boundary["seq"]]
    assert kept == expected
    assert_nothing_unmapped(agent)
    # Kept after Claude Code deletes it (`cleanupPeriodDays`): the thread stays whole.
    for transcript in agent.transcripts(agent.claude_projects):
        transcript.unlink()
    assert import_from(home, "claude", agent.claude_projects)["sessions"] == 0
    assert items_of(server, thread_id) == items


@pytest.mark.compat("claude-code", "sub-agents")
def test_a_sub_agent_whose_parent_transcript_is_gone_is_listed_not_hidden(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    """Claude Code sometimes leaves a session's folder with its sub-agents' transcripts and
    no main one (anthropics/claude-code#18311: "No conversations found"). The sub-agent's
    thread named a parent that does not exist, so no listing showed it: it is listed at the
    top, and goes under its parent once the parent's transcript is back."""
    agent, run, parent_file, _ = delegated(agents)
    kept = parent_file.read_bytes()
    parent_file.unlink()
    assert import_from(home, "claude", agent.claude_projects)["created"] == 1
    server = spawn()
    server.initialize([str(agent.repo)])
    (orphan,) = server.request("thread/list", {})["threads"]
    assert orphan["origin"]["parentSessionId"] == run.session_id
    texts = [m["content"] for m in resume(server, orphan["threadId"])["messages"]["items"]]
    assert texts == ["[[sub]] count the files in the repo", "There is 1 file."]
    assert orphan["threadId"] in sessiond(home, "list").stdout
    parent_file.write_bytes(kept)  # the main transcript restored (a backup, a sync)
    assert import_from(home, "claude", agent.claude_projects)["created"] == 1
    _, child = assert_child_under_parent(server, agent_call(parent_file))
    assert child["threadId"] == orphan["threadId"]
