"""What a person remembers of a tool is searchable: a word of a tool's output (a `tool`
message, an operation's result, an ACP call's output) or of a call's arguments (its
command, an ACP `rawInput`, an imported call's input) is found at its record, with the
`role` filter telling calls (`tool`) from output (`output`), on both stores, through a
real server over its pipe and `sessiond search`; an imported session the real Gemini CLI
wrote is found by its calls' arguments and output; every agent's parser records a call's
arguments as that agent writes them; and what redaction removed is never indexed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from restore.agents.claude_code.parser import ClaudeCodeParser
from restore.agents.codex.parser import CodexParser
from restore.agents.copilot.parser import CopilotParser
from restore.agents.gemini.parser import GeminiParser
from restore.agents.kilo import KiloParser
from restore.agents.opencode.parser import OpenCodeParser
from restore.agents.parsing import SourceParser
from restore.agents.pi.parser import PiParser
from restore.agents.qwen_code.parser import QwenCodeParser
from restore.search.text import searchable
from restore.sources import acp as acp_source
from tests.conftest import BOTH_STORES
from tests.faults.helpers import record, start
from tests.security.test_redaction import SECRETS
from tests.support.items import message
from tests.support.rpc_client import ServerProcess
from tests.test_gemini_store import LEGACY
from tests.test_gemini_store import store as gemini_store
from tests.test_postgres import sessiond_cli

OPERATION = {"type": "operation", "tool": "shell", "effect": "side_effect"}


def hits(server: ServerProcess, query: str, **params: Any) -> list[tuple[str, int, str]]:
    found = server.request("thread/search", {"query": query, **params})["hits"]
    return [(hit["threadId"], hit["seq"], hit["role"]) for hit in found]


@BOTH_STORES
def test_a_word_of_a_tools_output_or_a_calls_arguments_is_found_at_its_record(
    server: ServerProcess, tmp_path: Path, store_url: str | None, home: Path
) -> None:
    tid, sid = start(server, tmp_path / "w", title="The flaky build")
    items = [
        message("run the payment tests please"),
        {**OPERATION, "operationId": "c1", "state": "started",
         "command": "grep -rn quokkabrine src/",
         "input": {"command": "grep -rn quokkabrine src/", "description": "find tardigravel"}},
        {**OPERATION, "operationId": "c1", "state": "failed", "resultPersisted": True,
         "result": "E   KeyError: 'zarquonite'\nFAILED tests/test_pay.py::test_round"},
        {"type": "message", "role": "tool",
         "content": "Traceback (most recent call last):\n  File \"/srv/vorpalix/app.py\""},
        {**OPERATION, "operationId": "acp:t1", "tool": "read", "state": "planned",
         "title": "Read config", "rawInput": {"path": "/etc/frobnium.toml", "limit": 20}},
        {**OPERATION, "operationId": "acp:t1", "tool": "read", "state": "committed",
         "title": "Read config", "rawOutput": {"stdout": "glimmerquux = 1"},
         "content": [{"type": "content", "content": {"type": "text", "text": "blorptastic"}}]},
    ]  # fmt: skip
    first = record(server, tid, sid, *items)["firstSeq"]
    seq = {n: first + n for n in range(len(items))}
    for word, at, role in [
        ("quokkabrine", 1, "tool"),  # a command
        ("tardigravel", 1, "tool"),  # an imported-shape call's input
        ("zarquonite", 2, "output"),  # an operation's result
        ("vorpalix", 3, "output"),  # a tool message
        ("frobnium", 4, "tool"),  # an ACP call's rawInput
        ("glimmerquux", 5, "output"),  # an ACP call's rawOutput
        ("blorptastic", 5, "output"),  # an ACP call's text content
    ]:
        assert hits(server, word) == [(tid, seq[at], role)], word
        assert hits(server, word, role=role) == [(tid, seq[at], role)], word
        other = "output" if role == "tool" else "tool"
        assert hits(server, word, role=other) == [], word
    [hit] = server.request("thread/search", {"query": "zarquonite"})["hits"]
    assert [hit["snippet"][a:b] for a, b in hit["highlights"]] == ["zarquonite"]
    assert "KeyError" in hit["snippet"]
    # Only the output, of every tool, for a word both a call and its output have.
    assert {h[2] for h in hits(server, "read config")} == {"tool", "output"}
    assert hits(server, "read config", role="output") == [(tid, seq[5], "output")]
    assert hits(server, '"test_pay.py test_round"', role="output") == [(tid, seq[2], "output")]
    # `sessiond search --role output` as a person types it, on the same store.
    shared = ["--store", store_url] if store_url else []
    done = sessiond_cli("--home", str(home), *shared, "search", "vorpalix", "--role", "output",
                        "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    assert (json.loads(line)["seq"], json.loads(line)["role"]) == (seq[3], "output")
    missed = sessiond_cli("--home", str(home), *shared, "search", "vorpalix", "--role", "tool")
    assert missed.returncode == 1 and missed.stdout == ""


@BOTH_STORES
def test_what_redaction_removed_from_a_tools_output_or_arguments_is_never_indexed(
    server: ServerProcess, tmp_path: Path, store_url: str | None, home: Path
) -> None:
    """The store indexes what it stores, and redaction ran before it stored anything."""
    secret, planted = SECRETS["github-pat"]
    tail = secret.removeprefix("ghp_")
    tid, sid = start(server, tmp_path / "w")
    first = record(server, tid, sid,
        {**OPERATION, "operationId": "s1", "state": "started", "command": "env | grep gh",
         "input": {"env": {"GITHUB_TOKEN": secret}, "note": "wampuscat deploy"}},
        {**OPERATION, "operationId": "s1", "state": "committed", "resultPersisted": True,
         "result": f"wampuscat says {planted}"},
        {"type": "message", "role": "tool", "content": f"wampuscat again: {planted}"},
    )["firstSeq"]  # fmt: skip
    assert {h[1] for h in hits(server, "wampuscat")} == {first, first + 1, first + 2}
    assert hits(server, tail) == [] and hits(server, "ghp") == []
    for hit in server.request("thread/search", {"query": "wampuscat"})["hits"]:
        assert tail not in hit["snippet"]
    if store_url is None:  # no byte of it in the index file (nor its journal)
        for path in home.rglob("*.sqlite3*"):
            assert tail.encode() not in path.read_bytes(), path
        with sqlite3.connect(next(home.rglob("index.sqlite3"))) as index:
            texts = [row[0] for row in index.execute("SELECT text FROM search_docs")]
        assert len(texts) >= 3 and not any(tail in text for text in texts)
    else:  # nor in the searchable text PostgreSQL computed from the stored rows
        with psycopg.connect(store_url) as conn:
            rows = conn.execute(
                "SELECT sessiond_search_text(line), search_vector::text FROM sessiond_items"
            ).fetchall()
        assert any("wampuscat" in (text or "") for text, _ in rows)
        assert not any(tail.lower() in f"{text} {vector}".lower() for text, vector in rows)


@BOTH_STORES
def test_a_real_gemini_sessions_calls_are_found_by_their_arguments_and_output(
    tmp_path: Path, store_url: str | None, home: Path
) -> None:
    """The session the real gemini-cli 0.38.2 wrote (tests/compat/fixtures/): its failed
    `replace` (old_string "NOT THERE") and `echo hi`'s output, imported and searched."""
    gemini_home, repo = tmp_path / "gemini-home", tmp_path / "repo"
    repo.mkdir()
    gemini_store(gemini_home, repo)
    shared = ["--store", store_url] if store_url else []
    env = {"GEMINI_CLI_HOME": str(gemini_home)}
    imported = sessiond_cli("--home", str(home), *shared, "import", "gemini", env=env)
    assert imported.returncode == 0, imported.stderr

    def search(*args: str) -> list[dict[str, Any]]:
        done = sessiond_cli("--home", str(home), *shared, "search", *args, "--json")
        assert done.returncode in (0, 1), done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    [call] = search('"NOT THERE"', "--role", "tool", "--agent", "gemini")
    [failed] = search('"0 occurrences found"', "--role", "output")
    assert failed["seq"] > call["seq"] and failed["threadId"] == call["threadId"]
    [shell] = search("PGID", "--role", "output")
    assert "Process Group PGID" in shell["snippet"]
    assert [h["role"] for h in search('"say hi"')] == ["tool"]  # the call's description


def feed(parser: SourceParser, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for n, entry in enumerate(records, 1):
        items += parser.feed(n, entry, "2026-12-01T10:00:00Z")
    return items


ARGS = {"pattern": "snorkelwhale", "path": "src"}
TOOL_CALLS: dict[str, tuple[type[SourceParser], dict[str, Any]]] = {
    "claude-code": (ClaudeCodeParser, {
        "type": "assistant", "uuid": "a1", "message": {"model": "claude-sonnet-4-5",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "Grep", "input": ARGS}]}}),
    "codex": (CodexParser, {
        "type": "response_item", "payload": {"type": "function_call", "name": "grep",
        "arguments": json.dumps(ARGS), "call_id": "call_1"}}),
    "codex-freeform": (CodexParser, {
        "type": "response_item", "payload": {"type": "custom_tool_call", "name": "apply_patch",
        "input": "*** Begin Patch\n*** Add File: snorkelwhale.py", "call_id": "call_2"}}),
    "qwen-code": (QwenCodeParser, {
        "type": "assistant", "uuid": "q1", "message": {"parts": [
            {"functionCall": {"id": "q1", "name": "grep_search", "args": ARGS}}]}}),
    "copilot": (CopilotParser, {
        "type": "assistant.message", "data": {"toolRequests": [
            {"toolCallId": "p1", "name": "grep", "arguments": ARGS}]}}),
    "pi": (PiParser, {
        "type": "message", "id": "e1", "parentId": None, "message": {"role": "assistant",
        "content": [{"type": "toolCall", "id": "t1", "name": "grep", "arguments": ARGS}]}}),
    "opencode": (OpenCodeParser, {
        "type": "part", "kind": "tool", "tool": "grep", "callID": "o1", "messageID": "m1",
        "state": {"status": "running", "input": ARGS}}),
    "kilo": (KiloParser, {
        "type": "part", "kind": "tool", "tool": "grep", "callID": "k1", "messageID": "m1",
        "state": {"status": "running", "input": ARGS}}),
}  # fmt: skip


@pytest.mark.parametrize("agent", list(TOOL_CALLS))
def test_every_agents_tool_call_keeps_its_arguments_searchable(agent: str) -> None:
    """Each agent's tool call, in the shape that agent writes it: the started operation
    carries its arguments as given (`input`), and they are its searchable text."""
    parser_type, entry = TOOL_CALLS[agent]
    [started] = [i for i in feed(parser_type(), [entry]) if i.get("type") == "operation"]
    given = entry["payload"]["input"] if agent == "codex-freeform" else ARGS
    assert started["input"] in (given, {"input": given})
    role, text = searchable(started) or ("", "")
    assert role == "tool" and "snorkelwhale" in text


def test_a_real_gemini_sessions_calls_keep_their_arguments() -> None:
    """The real gemini-cli 0.38.2 document: every call's `args`, as Gemini wrote them."""
    document = json.loads(LEGACY.read_text())
    items = feed(GeminiParser(), [document])
    started = {i["operationId"]: i for i in items if i.get("type") == "operation"
               and i["state"] == "started"}  # fmt: skip
    written = {c["id"]: c["args"] for m in document["messages"] for c in m.get("toolCalls") or []}
    assert {k: v["input"] for k, v in started.items()} == written


def test_a_huge_argument_is_kept_bounded() -> None:
    """A call writing a 5 MB file keeps a preview of its arguments, as results are kept."""
    content = "spelunkrat " + "x" * 5_000_000
    entry = {"type": "assistant", "uuid": "a1", "message": {"content": [
        {"type": "tool_use", "id": "toolu_9", "name": "Write",
         "input": {"file_path": "/r/big.txt", "content": content}}]}}  # fmt: skip
    [started] = [i for i in feed(ClaudeCodeParser(), [entry]) if i.get("type") == "operation"]
    assert len(json.dumps(started["input"])) < 3_000
    assert started["input"]["file_path"] == "/r/big.txt"
    assert started["input"]["content"].startswith("spelunkrat ")
    assert "spelunkrat" in (searchable(started) or ("", ""))[1]


def test_an_acp_tool_calls_raw_input_and_output_are_on_its_operations_once() -> None:
    """`sessiond acp`'s recorder: the call's `rawInput` on the first operation item after
    it arrived (even in an update that moved no state), its `rawOutput` on the outcome."""
    recorder = acp_source.ThreadRecorder("22222222-2222-2222-2222-222222222222")
    steps = [
        recorder.begin_turn("turn-1", [{"type": "text", "text": "check the config"}]),
        recorder.update({"update": {"sessionUpdate": "tool_call", "toolCallId": "c1",
                                    "title": "Read", "kind": "read", "status": "pending"}}),
        recorder.update({"update": {"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                                    "rawInput": {"path": "/etc/hoopoe.toml"}}}),
        recorder.update({"update": {"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                                    "status": "in_progress"}}),
        recorder.update({"update": {"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                                    "status": "completed", "rawOutput": {"text": "nightjar"},
                                    "content": [{"type": "content", "content": {
                                        "type": "text", "text": "nightjar = 1"}}]}}),
    ]  # fmt: skip
    operations = [i for s in steps for i in s.items if i.get("type") == "operation"]
    assert [(o["state"], o.get("rawInput"), o.get("rawOutput")) for o in operations] == [
        ("planned", None, None),
        ("started", {"path": "/etc/hoopoe.toml"}, None),
        ("committed", None, {"text": "nightjar"}),
    ]
    assert [searchable(o) for o in operations] == [
        ("tool", "Read"),
        ("tool", "Read\n/etc/hoopoe.toml"),
        ("output", "Read\nnightjar\nnightjar = 1"),
    ]
