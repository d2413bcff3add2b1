"""Codex 0.171 against the mock model, each rollout it writes imported by a real `sessiond
import codex` and read back through a real server: edits (code mode's nested
`tools.apply_patch`, the classic `apply_patch` tool, a patch that fails), shell commands,
a resumed run, a compaction, a sub-agent, and the older `shell` apply_patch shape.

Every import must report nothing unmapped but what CodexParser.IGNORED lists."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from genai_prices import Usage as GenaiUsage
from genai_prices import calc_price

from restore.agents.identity import thread_id_for
from tests.agents.clis import AgentHome
from tests.agents.mock_model import Call, Reply, Request, Scenario, Usage
from tests.agents.tui import Terminal
from tests.compat.conftest import Agents, import_from, resume, states
from tests.support.leftovers import started_during
from tests.support.processes import command_line
from tests.support.rpc_client import ServerProcess
from tests.support.wait import eventually
from tests.test_cli import sessiond

CLASSIC = "gpt-5.5"
"""The model that gets Codex's classic tools (`exec_command`, the `apply_patch` custom
tool); the default model runs in code mode (one `exec` tool)."""


def patch(*body: str) -> str:
    return "*** Begin Patch\n" + "".join(body) + "*** End Patch\n"


ADD = patch("*** Add File: notes.txt\n+one\n+two\n")
UPDATE = patch("*** Update File: notes.txt\n@@\n one\n-two\n+three\n")
MOVE = patch("*** Update File: notes.txt\n*** Move to: docs/notes.md\n@@\n one\n-three\n+four\n")
ADD_SCRATCH = patch("*** Add File: scratch.txt\n+temporary\n")
DELETE_SCRATCH = patch("*** Delete File: scratch.txt\n")
WRITE_FAILS = patch("*** Add File: README.md/inside-a-file.txt\n+never written\n")
"""Passes Codex's verification, then fails to write (README.md is a file): FileChange
`status: failed`, output "Exit code: 1 … Failed to write file"."""
VERIFY_FAILS = patch("*** Update File: missing.txt\n@@\n-a\n+b\n")
"""Refused before any write: "apply_patch verification failed", no FileChange at all."""


def in_exec(tool: str, argument: str | dict[str, Any]) -> Call:
    """A code-mode `exec` call whose JavaScript calls one nested tool."""
    literal = json.dumps(argument)
    return Call("exec", f"const r = await tools.{tool}({literal}); text(JSON.stringify(r));")


def edit_steps(code_mode: bool) -> list[Reply]:
    def edit(text: str) -> Reply:
        call = in_exec("apply_patch", text) if code_mode else Call("apply_patch", text)
        return Reply(calls=(call,))

    return [edit(p) for p in (ADD, UPDATE, MOVE, ADD_SCRATCH, DELETE_SCRATCH, WRITE_FAILS,
                              VERIFY_FAILS)] + [Reply(text="Edited.")]  # fmt: skip


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rollouts(agent: AgentHome) -> list[Path]:
    return agent.transcripts(agent.codex_sessions)


def import_codex(home: Path, agent: AgentHome) -> dict[str, Any]:
    """A real `sessiond import codex`: every record type, event, item and tool the rollouts
    hold is mapped or on the parser's commented IGNORED list (the summary's `unmapped`)."""
    summary = import_from(home, "codex", agent.codex_sessions)
    assert (summary["problems"], summary["unmapped"]) == ([], {}), summary
    return summary


def imported(
    agent: AgentHome, home: Path, spawn: Callable[..., ServerProcess]
) -> tuple[ServerProcess, list[dict[str, Any]]]:
    """Import the agent's rollouts; a server on the repo and its thread list."""
    import_codex(home, agent)
    server = spawn()
    server.initialize([str(agent.repo)])
    return server, server.request("thread/list", {})["threads"]


def read(server: ServerProcess, thread_id: str) -> list[dict[str, Any]]:
    return server.request("thread/read", {"threadId": thread_id, "limit": 10_000})["items"]


def of_type(items: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [item for item in items if item["type"] == kind]


def final_ops(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each operation's last item (its outcome), by operation id."""
    return {op["operationId"]: op for op in of_type(items, "operation")}


@pytest.mark.compat("codex", "edits")
@pytest.mark.parametrize("code_mode", [True, False], ids=["code-mode", "classic-tools"])
def test_file_changes_are_the_edits_and_a_failed_patch_edits_nothing(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess], code_mode: bool
) -> None:
    agent = agents.start(Scenario({"edit": edit_steps(code_mode)}))
    if not code_mode:
        agent.write_codex_config(model=CLASSIC)
    agent.codex("[[edit]] add, update, move, delete, then two patches that fail").check()
    repo = agent.repo
    assert (repo / "docs/notes.md").read_text() == "one\nfour\n"  # what Codex really did
    assert not (repo / "notes.txt").exists() and not (repo / "scratch.txt").exists()

    server, (thread,) = imported(agent, home, spawn)
    items = read(server, thread["threadId"])
    edits = [(Path(e["path"]).relative_to(repo).as_posix(), e["change"])
             for e in of_type(items, "file_edit")]  # fmt: skip
    assert edits == [
        ("notes.txt", "add"),
        ("notes.txt", "update"),
        ("notes.txt", "move"),
        ("docs/notes.md", "move"),
        ("scratch.txt", "add"),
        ("scratch.txt", "delete"),
    ]  # nothing for README.md/inside-a-file.txt or missing.txt
    by_path = {(e["path"], e["change"]): e for e in of_type(items, "file_edit")}
    update = by_path[(str(repo / "notes.txt"), "update")]
    assert update["diff"] == "@@ -1,2 +1,2 @@\n one\n-two\n+three\n"
    moved = by_path[(str(repo / "docs/notes.md"), "move")]
    assert moved["movedFrom"] == str(repo / "notes.txt")
    assert moved["afterSha"] == sha(repo / "docs/notes.md")  # derived from the diffs

    ops = final_ops(items)
    patches = [op for op in ops.values() if op["tool"] == "apply_patch"]
    if code_mode:  # each nested call is an operation under its `exec`
        execs = [op for op in ops.values() if op["tool"] == "exec"]
        scripts = [op["input"] for op in of_type(items, "operation")
                   if op["tool"] == "exec" and op["state"] == "started"]  # fmt: skip
        assert len(scripts) == 7 and "tools.apply_patch(" in scripts[0]
        assert {op["parentOperationId"] for op in patches} <= {op["operationId"] for op in execs}
        assert [op["state"] for op in execs] == ["committed"] * 5 + ["failed"] * 2  # they threw
        assert "verification failed" in execs[-1]["result"]
        assert [op["state"] for op in patches] == ["committed"] * 5 + ["failed"]
    else:
        assert [op["state"] for op in patches] == ["committed"] * 5 + ["failed"] * 2
        assert patches[5]["exitCode"] == 1
    assert "Failed to write file" in patches[5]["result"]

    report = resume(server, thread["threadId"])
    assert states(report)["operations"]["open"] == []
    files = {Path(f["path"]).relative_to(repo).as_posix(): f
             for f in states(report)["file_history"]["files"]}  # fmt: skip
    assert set(files) == {"notes.txt", "docs/notes.md", "scratch.txt"}
    assert files["docs/notes.md"]["afterSha"] == sha(repo / "docs/notes.md")
    assert [f["diverged"] for f in files.values()] == [False, False, False]


@pytest.mark.compat("codex", "cost")
@pytest.mark.parametrize("code_mode", [True, False], ids=["code-mode", "classic-tools"])
def test_a_shell_command_is_an_operation_with_its_command_exit_code_and_output(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess], code_mode: bool
) -> None:
    commands = ["echo hello-from-the-shell", "echo about-to-fail; exit 3"]
    steps = [Reply(calls=(in_exec("exec_command", {"cmd": c}) if code_mode
                          else Call("exec_command", {"cmd": c}),)) for c in commands]  # fmt: skip
    agent = agents.start(Scenario({"shell": [*steps, Reply(text="Ran them.")]}))
    if not code_mode:
        agent.write_codex_config(model=CLASSIC)
    run = agent.codex("[[shell]] run two commands").check()

    server, (thread,) = imported(agent, home, spawn)
    ops = [op for op in final_ops(read(server, thread["threadId"])).values()
           if op["tool"] == "exec_command"]  # fmt: skip
    assert [(op["command"], op["exitCode"], op["state"]) for op in ops] == [
        (commands[0], 0, "committed"), (commands[1], 3, "failed"),
    ]  # fmt: skip
    assert "hello-from-the-shell" in ops[0]["result"] and "about-to-fail" in ops[1]["result"]
    (usage,) = [event["usage"] for event in run.of_type("turn.completed")]  # Codex's own count
    cost = states(resume(server, thread["threadId"]))["cost"]
    assert (cost["inputTokens"], cost["outputTokens"]) == (
        usage["input_tokens"], usage["output_tokens"],
    )  # fmt: skip


@pytest.mark.compat("codex")
def test_a_code_mode_script_that_outlives_its_yield_is_finished_by_its_wait(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    """An `exec` still running at its yield time answers `Script running with cell ID N`;
    its nested command ends during the model's `wait {cell_id: N}`, which answers the
    script's result: the exec stays open until then, and the command is under it."""
    script = ('// @exec: {"yield_time_ms": 300}\nnotify("started");\n'
              'const r = await tools.exec_command({cmd: "sleep 2; echo late-output; exit 4"});\n'
              "text(JSON.stringify(r));")  # fmt: skip

    def steps(request: Request) -> Reply:
        if not request.tools or request.scenario() != "yield":
            return Reply(text="Done.")
        running = [r for r in request.results() if r.startswith("Script running with cell ID")]
        if request.round() == 0:
            return Reply(calls=(Call("exec", script),))
        if request.round() == 1 and running:
            cell = running[0].split()[5]
            return Reply(calls=(Call("wait", {"cell_id": cell, "yield_time_ms": 20_000}),))
        return Reply(text="It finished.")

    agent = agents.start(steps)
    agent.codex("[[yield]] run something slow").check()
    server, (thread,) = imported(agent, home, spawn)
    items = read(server, thread["threadId"])
    ops = final_ops(items)
    (exec_id,) = [op_id for op_id, op in ops.items() if op["tool"] == "exec"]
    (command,) = [op for op in ops.values() if op["tool"] == "exec_command"]
    assert (command["command"], command["exitCode"], command["state"]) == (
        "sleep 2; echo late-output; exit 4", 4, "failed",
    )  # fmt: skip
    assert command["parentOperationId"] == exec_id
    assert ops[exec_id]["state"] == "committed" and "late-output" in ops[exec_id]["result"]
    exec_states = [i["state"] for i in of_type(items, "operation") if i["operationId"] == exec_id]
    assert exec_states == ["started", "committed"]  # not closed by "Script running"
    assert states(resume(server, thread["threadId"]))["operations"]["open"] == []


def older_shell_lines(repo: Path) -> str:
    """THE OLDER FORMAT (Codex 0.4x), hand-made: no current CLI writes it. Those versions
    had no apply_patch tool of their own: the model sent every edit through the `shell`
    tool as `{"command": ["apply_patch", "*** Begin Patch…"]}` (openai/codex
    codex-rs/core/prompt.md: "Use the `apply_patch` tool to edit files …:
    {"command":["apply_patch","*** Begin Patch\\n*** Update File: …"]}"), or as a `bash -lc`
    heredoc; Codex found the patch in the shell command
    (`maybe_parse_apply_patch_verified(&params.command, …)`) and answered with its legacy
    JSON, `{"output": …, "metadata": {"exit_code": N, "duration_seconds": …}}`
    (`format_exec_output_apply_patch`; both in codex-rs/core/src/tools/mod.rs). It wrote
    no patch events."""
    heredoc = (
        "apply_patch <<'EOF'\n"
        + patch("*** Update File: README.md\n@@\n-# compat\n+# compat, patched\n")
        + "EOF"
    )
    calls = [
        ("call_old_1", {"command": ["apply_patch", patch("*** Add File: hello.txt\n+Hello, "
                                                         "world!\n")], "workdir": str(repo)},
         "Success. Updated the following files:\nA hello.txt\n", 0),
        ("call_old_2", {"command": ["bash", "-lc", heredoc]},
         "Success. Updated the following files:\nM README.md\n", 0),
        ("call_old_3", {"command": ["apply_patch", patch("*** Add File: README.md/x.txt\n+x\n")]},
         "Failed to write file README.md/x.txt\n", 1),
    ]  # fmt: skip
    lines = []
    for n, (call_id, arguments, output, code) in enumerate(calls):
        legacy = {"output": output, "metadata": {"exit_code": code, "duration_seconds": 0.0}}
        payloads = [
            {"type": "function_call", "name": "shell", "arguments": json.dumps(arguments),
             "call_id": call_id},
            {"type": "function_call_output", "call_id": call_id, "output": json.dumps(legacy)},
        ]  # fmt: skip
        for k, payload in enumerate(payloads):
            ts = f"2025-08-20T10:00:0{2 * n + k}.000Z"
            lines.append(json.dumps({"timestamp": ts, "type": "response_item", "payload": payload}))
    return "\n".join(lines) + "\n"


@pytest.mark.compat("codex")  # an older shape: no cell of 0.171
def test_an_older_shell_apply_patch_is_a_file_edit_and_a_failed_one_is_not(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({}))
    agent.codex("Say hello.").check()  # a real rollout, then the older lines after it
    (rollout,) = rollouts(agent)
    with rollout.open("a") as out:
        out.write(older_shell_lines(agent.repo))

    server, (thread,) = imported(agent, home, spawn)
    items = read(server, thread["threadId"])
    edits = [(e["path"], e["operationId"], e["contentKnown"]) for e in of_type(items, "file_edit")]
    assert edits == [
        (str(agent.repo / "hello.txt"), "call_old_1", True),
        (str(agent.repo / "README.md"), "call_old_2", False),  # a diff alone: result unknown
    ]
    (added,) = [e for e in of_type(items, "file_edit") if e["path"].endswith("hello.txt")]
    assert added["afterSha"] == hashlib.sha256(b"Hello, world!\n").hexdigest()
    ops = final_ops(items)
    assert [(ops[c]["state"], ops[c]["exitCode"]) for c in ("call_old_1", "call_old_3")] == [
        ("committed", 0), ("failed", 1),
    ]  # fmt: skip
    assert ops["call_old_3"]["result"] == "Failed to write file README.md/x.txt\n"


@pytest.mark.compat("codex", "resume")
def test_codex_exec_resume_continues_and_a_reimport_adds_the_new_turn_once(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(Scenario({
        "one": [Reply(calls=(in_exec("exec_command", {"cmd": "echo first-output"}),)),
                Reply(text="First answer.")],
        "two": [Reply(text="Second answer.")],
    }))  # fmt: skip
    session = agent.codex("[[one]] first prompt").check().session_id
    first = import_codex(home, agent)
    assert first["created"] == 1
    before = len(agents.model.main_requests())

    assert agent.codex("[[two]] second prompt", resume=session).check().session_id == session
    resumed = agents.model.main_requests()[before]  # the earlier turns went back to the model
    assert resumed.user_texts() == ["[[one]] first prompt", "[[two]] second prompt"]
    assert [t.calls for t in resumed.turns if t.calls] == [["exec"]]
    assert any("first-output" in result for t in resumed.turns for result in t.results)
    assert "First answer." in [t.text for t in resumed.turns if t.role == "assistant"]

    grown = import_codex(home, agent)
    assert (grown["created"], grown["updated"]) == (0, 1)
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]  # the same thread, grown
    assert thread["origin"]["sessionId"] == session
    items = read(server, thread["threadId"])
    assert len({i["id"] for i in items}) == len(items)
    assert [m["content"] for m in of_type(items, "message")] == [
        "[[one]] first prompt", "First answer.", "[[two]] second prompt", "Second answer.",
    ]  # fmt: skip
    again = import_codex(home, agent)
    assert (again["updated"], again["created"], again["items"]) == (0, 0, 0)
    for rollout in rollouts(agent):  # kept after the rollout is deleted
        rollout.unlink()
    assert import_codex(home, agent)["sessions"] == 0
    assert read(server, thread["threadId"]) == items

    report = resume(server, thread["threadId"])  # the handoff is this CLI's own resume
    handoff = report["handoff"]
    assert (handoff["command"], handoff["cwd"]) == (["codex", "resume", session], str(agent.repo))
    usage = subprocess.run([str(agent.bins / "codex"), handoff["command"][1], "--help"],
                           capture_output=True, text=True, env=agent.env(), check=True)  # fmt: skip
    assert "Usage: codex resume [OPTIONS] [SESSION_ID] [PROMPT]" in usage.stdout


@pytest.mark.compat("codex", "resume")
def test_resume_in_codex_runs_its_terminal_ui_on_the_session_and_the_new_turn_comes_back(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess], request: pytest.FixtureRequest
) -> None:
    """What Resume in Codex does for a person: the handoff's command, run as it is in its
    cwd in a terminal, opens Codex's own UI on the imported session (its history shown and
    sent back to the model with the next prompt typed there), and the turn it adds is
    imported into the same thread. Once the UI is closed no Codex process is left: Codex
    0.171's UI started an app-server daemon and its updater that outlived it (and later
    looked for updates online), so it runs without one; and the one name it calls at every
    start whatever its settings is 127.0.0.1 in its own /etc/hosts (tests/agents/clis.py)."""
    agent = agents.start(Scenario({"one": [Reply(text="First answer.")],
                                   "two": [Reply(text="Second answer.")]}))  # fmt: skip
    session = agent.codex("[[one]] first prompt").check().session_id
    assert import_codex(home, agent)["created"] == 1
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    handoff = resume(server, thread["threadId"])["handoff"]
    assert (handoff["command"], handoff["cwd"]) == (["codex", "resume", session], str(agent.repo))
    # A person resuming in their repository has trusted it once (Codex's UI asks; exec not).
    config = agent.codex_home / "config.toml"
    trusted = f'\n[projects."{agent.repo}"]\ntrust_level = "trusted"\n'
    config.write_text(config.read_text() + trusted)

    program, *args = handoff["command"]
    ui = Terminal(agent.own_hosts([str(agent.bins / program), *args]), Path(handoff["cwd"]),
                  agent.env(TERM="xterm-256color"))  # fmt: skip
    try:
        ui.wait_for(lambda: "First answer." in ui.text(), "the session's history on screen")
        ui.wait_for(lambda: "Ask Codex" in ui.text(), "its prompt ready")
        ui.type("[[two]] second prompt\r")
        texts = ["[[one]] first prompt", "[[two]] second prompt"]
        ui.wait_for(lambda: any(r.user_texts() == texts for r in agents.model.main_requests()),
                    "the resumed history sent to the model with the new prompt")  # fmt: skip
        ui.wait_for(lambda: "Second answer." in ui.text(), "the answer on screen")
        rollouts = agent.transcripts(agent.codex_sessions)
        ui.wait_for(lambda: any("Second answer." in p.read_text() for p in rollouts),
                    "the new turn in the session's rollout")  # fmt: skip
    finally:
        ui.close()

    def codex_left() -> list[str]:
        found = [command_line(p.pid) for p in started_during(request.node.nodeid)]
        return [line for line in found if "codex" in Path(line.split(" ", 1)[0]).name]

    left = codex_left()
    eventually(lambda: not codex_left(), f"every Codex process gone with its UI: {left}")
    assert len(rollouts) == 1  # resumed, not a new session
    assert import_codex(home, agent)["updated"] == 1
    (grown,) = server.request("thread/list", {})["threads"]
    assert grown["threadId"] == thread["threadId"]
    assert [m["content"] for m in of_type(read(server, grown["threadId"]), "message")] == [
        "[[one]] first prompt", "First answer.", "[[two]] second prompt", "Second answer.",
    ]  # fmt: skip


COMPACT_PROMPT = "You are performing a CONTEXT CHECKPOINT COMPACTION"
SUMMARY = "Checkpoint: ran `echo before-compaction`; next, report back."


@pytest.mark.compat("codex", "compaction")
def test_a_headless_auto_compaction_imports_as_a_boundary_and_loses_nothing(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    """`codex exec` compacts by itself once the usage passes
    `model_auto_compact_token_limit`: it asks the model for a handoff summary, then goes
    on from the summary in the same turn."""
    steps = Scenario({"compact": [
        Reply(calls=(in_exec("exec_command", {"cmd": "echo before-compaction"}),),
              usage=Usage(input_tokens=90_000, output_tokens=100)),
    ]})  # fmt: skip

    def script(request: Request) -> Reply:
        last = request.last_user_text()
        if last.startswith(COMPACT_PROMPT):
            return Reply(text=SUMMARY)
        if SUMMARY in last:  # the turn goes on from the summary
            return Reply(text="After the compaction.")
        return steps(request)

    agent = agents.start(script)
    config = agent.codex_home / "config.toml"
    config.write_text("model_auto_compact_token_limit = 5000\n" + config.read_text())
    agent.codex("[[compact]] run a command").check()
    assert any(r.last_user_text().startswith(COMPACT_PROMPT) for r in agents.model.requests)

    server, (thread,) = imported(agent, home, spawn)
    items = read(server, thread["threadId"])
    kinds = ("message", "compact_boundary", "operation")
    flow = [(i["type"], i.get("content") or i.get("summary") or i.get("tool"))
            for i in items if i["type"] in kinds]  # fmt: skip
    (boundary,) = [n for n, (kind, _) in enumerate(flow) if kind == "compact_boundary"]
    assert SUMMARY in flow[boundary][1]
    assert ("message", "[[compact]] run a command") in flow[:boundary]  # nothing lost
    assert ("operation", "exec_command") in flow[:boundary]
    assert flow[boundary + 1 :] == [("message", "After the compaction.")]
    report = resume(server, thread["threadId"])  # resume starts from the summary
    assert [m.get("content") or m.get("summary") for m in report["messages"]["items"]] == [
        flow[boundary][1], "After the compaction.",
    ]  # fmt: skip


def delegation(code_mode: bool) -> Scenario:
    """The parent spawns `helper` (`collaboration.spawn_agent`), waits for it, answers; the
    helper runs one command and answers. Each model call has its own usage."""
    count = in_exec("exec_command", {"cmd": "ls | wc -l"}) if code_mode else (
        Call("exec_command", {"cmd": "ls | wc -l"}))  # fmt: skip
    return Scenario({
        "parent": [
            Reply(calls=(Call("spawn_agent", {"task_name": "helper", "fork_turns": "none",
                                              "message": "[[child]] count the files"},
                              namespace="collaboration"),),
                  usage=Usage(input_tokens=1000, output_tokens=50)),
            Reply(calls=(Call("wait_agent", {"timeout_ms": 10_000}, namespace="collaboration"),),
                  usage=Usage(input_tokens=1100, output_tokens=30, cache_read_tokens=800)),
            Reply(text="The helper is done.", usage=Usage(input_tokens=1200, output_tokens=20)),
        ],
        "child": [Reply(calls=(count,), usage=Usage(input_tokens=700, output_tokens=40)),
                  Reply(text="Two files.",
                        usage=Usage(input_tokens=800, output_tokens=10, cache_read_tokens=600))],
    })  # fmt: skip


def codex_usage(rollout: Path) -> dict[str, int]:
    """A thread's usage as Codex itself counts it: its rollout's last running total."""
    totals = [line["payload"]["info"]["total_token_usage"]
              for line in map(json.loads, rollout.read_text().splitlines())
              if line["type"] == "event_msg" and line["payload"].get("type") == "token_count"
              and line["payload"].get("info")]  # fmt: skip
    return totals[-1]


def priced(model: str, usage: dict[str, int]) -> float:
    """What genai-prices itself says Codex's reported usage costs (no sessiond code)."""
    cached = usage["cached_input_tokens"]
    tokens = GenaiUsage(input_tokens=usage["input_tokens"], cache_read_tokens=cached,
                        output_tokens=usage["output_tokens"])  # fmt: skip
    return float(calc_price(tokens, model, provider_id="openai").total_price)


@pytest.mark.compat("codex", "sub-agents", "cost")
@pytest.mark.parametrize("code_mode", [True, False], ids=["default-model", "gpt-5.5"])
def test_a_sub_agent_is_a_child_thread_under_the_spawn_call_and_in_the_parents_cost(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess], code_mode: bool
) -> None:
    """Codex multi-agent v2: `collaboration.spawn_agent` starts a sub-agent thread with a
    rollout of its own; its session_meta names the parent (`parent_thread_id`,
    `source.subagent.thread_spawn`), and the parent's rollout names the child and the call
    (`SubAgentActivity {id: <spawn call id>, agent_thread_id}`). The default model gets the
    multi-agent tools by default; gpt-5.5 (which genai-prices prices) with the
    `multi_agent_v2` feature."""
    agent = agents.start(delegation(code_mode))
    if not code_mode:
        agent.write_codex_config(model=CLASSIC, multi_agent_v2=True)
    run = agent.codex("[[parent]] delegate a count").check()
    parent_id = run.session_id
    files = {json.loads(p.read_text().splitlines()[0])["payload"]["id"]: p for p in rollouts(agent)}
    (child_id,) = set(files) - {parent_id}
    child_meta = json.loads(files[child_id].read_text().splitlines()[0])["payload"]
    assert child_meta["source"]["subagent"]["thread_spawn"]["parent_thread_id"] == parent_id
    (spawn_call,) = [line["payload"]["call_id"]
                     for line in map(json.loads, files[parent_id].read_text().splitlines())
                     if line["payload"].get("name") == "spawn_agent"]  # fmt: skip

    server, threads = imported(agent, home, spawn)
    (parent,) = threads  # the child is not a top-level thread
    assert (parent["threadId"], parent["childCount"]) == (thread_id_for("codex", parent_id, 1), 1)
    (child,) = server.request("thread/list", {"parentThreadId": parent["threadId"]})["threads"]
    assert child["threadId"] == thread_id_for("codex", child_id, 1)
    assert child["parentOperationId"] == child["origin"]["parentToolCallId"] == spawn_call
    assert child["origin"]["parentSessionId"] == parent_id
    parent_items = read(server, parent["threadId"])
    spawned = final_ops(parent_items)[spawn_call]
    assert (spawned["state"], spawned["childSessionId"]) == ("committed", child_id)
    assert (spawned["childThreadId"], spawned["agentPath"]) == (child["threadId"], "/root/helper")
    child_items = read(server, child["threadId"])
    (task,) = [m for m in of_type(child_items, "message") if m["role"] == "user"]
    assert (task["fromAgent"], task["toAgent"]) == ("/root", "/root/helper")
    assert [m["content"] for m in of_type(child_items, "message")][-1] == "Two files."
    answers = [m for m in of_type(parent_items, "message") if m.get("fromAgent")]
    assert [(m["fromAgent"], "FINAL_ANSWER" in m["content"]) for m in answers] == [
        ("/root/helper", True)
    ]
    # The parent's cost: its own, the sub-agent's line, both in the total, token for token
    # what Codex counted (the run's own usage is the parent's; the child's is its rollout's).
    cost = states(resume(server, parent["threadId"]))["cost"]
    (own,) = [event["usage"] for event in run.of_type("turn.completed")]
    theirs = codex_usage(files[child_id])
    assert (cost["own"]["inputTokens"], cost["own"]["outputTokens"]) == (
        own["input_tokens"], own["output_tokens"])  # fmt: skip
    line = cost["subagents"]
    assert (line["threads"], line["missing"], line["items"][0]["threadId"]) == (
        1, 0, child["threadId"])  # fmt: skip
    assert (line["inputTokens"], line["outputTokens"]) == (
        theirs["input_tokens"], theirs["output_tokens"])  # fmt: skip
    assert (cost["inputTokens"], cost["outputTokens"]) == (
        own["input_tokens"] + theirs["input_tokens"], own["output_tokens"] + theirs["output_tokens"]
    )  # fmt: skip
    shown = sessiond(home, "show", parent["threadId"]).stdout.splitlines()
    if code_mode:  # Codex's default model is not on genai-prices' list: tokens only
        assert cost["byModel"]["gpt-6.2-sol"]["priced"] is False
        assert cost["usd"] == 0
        # Unpriced, not free: `sessiond show` once said "$0.0000" for every such call.
        assert shown[-1].endswith("cost unknown: no known price for its model")
        assert not any("$0.0000 (thread so far" in line for line in shown)
    else:
        assert line["usd"] > 0
        assert cost["usd"] == pytest.approx(priced(CLASSIC, own) + priced(CLASSIC, theirs))
        assert shown[-1].endswith(f"${cost['usd']:.4f} spent (sub-agents ${line['usd']:.4f})")


@pytest.mark.compat("codex", "todos", "permissions")
def test_goals_are_the_todo_list_and_a_bypass_comes_back_downgraded(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    """Codex 0.171 plans with goals (create_goal / update_goal; update_plan is gone from
    `codex exec`): each goal is a todo with its status. An update_plan Codex refuses
    (`unsupported call`) is a failed call and no plan (it once replaced the goals). The run
    bypasses approvals and the sandbox, which a resume never restores silently."""
    steps = [
        Reply(calls=(Call("create_goal", {"objective": "Ship the parser"}),)),
        Reply(calls=(Call("get_goal", {}),)),
        Reply(calls=(Call("update_goal", {"status": "complete"}),)),
        Reply(calls=(Call("create_goal", {"objective": "Write the docs"}),)),
        Reply(
            calls=(
                Call(
                    "update_plan",
                    {"plan": [{"step": "A plan it refused", "status": "in_progress"}]},
                ),
            )
        ),
        Reply(text="Two goals."),
    ]
    agent = agents.start(Scenario({"goals": steps}))
    agent.write_codex_config(model=CLASSIC)
    run = agent.codex("[[goals]] set the goals").check()
    summary = import_from(home, "codex", agent.codex_sessions)
    assert summary["unmapped"] == {}, summary["unmapped"]
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    assert thread["origin"]["sessionId"] == run.session_id
    report = resume(server, thread["threadId"])
    todos = states(report)["todos"]["items"]
    assert [(t["content"], t["status"]) for t in todos] == [
        ("Ship the parser", "completed"),
        ("Write the docs", "in_progress"),
    ]
    items = read(server, thread["threadId"])
    # Codex restates each goal's objective as an output that answers no call (no call id):
    # it was an `unknown` operation, and the unmapped report said nothing.
    assert [i for i in items if i["type"] == "operation" and i["tool"] == "unknown"] == []
    (plan,) = [i for i in items if i["type"] == "operation" and i["tool"] == "update_plan"
               and i["state"] != "started"]  # fmt: skip
    assert plan["state"] == "failed" and "unsupported call" in plan["result"]
    permissions = states(report)["permissions"]
    assert permissions["downgradedFrom"]["approvalMode"] == "never"
    assert permissions["downgradedFrom"].get("sandbox") == "danger-full-access"
    assert permissions["sandbox"] != "danger-full-access"
