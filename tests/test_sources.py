"""The pure source parsers (restore/sources/): Claude Code and Codex lines in, items out."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from restore.agents.claude_code.parser import ClaudeCodeParser, edited_contents
from restore.agents.codex.parser import CodexParser, patch_changes
from restore.agents.parsing import SourceParser
from tests.support.import_fixtures import ClaudeSession, CodexSession


def feed(parser: SourceParser, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for n, record in enumerate(records, 1):
        items += parser.feed(n, record, record.get("timestamp"))
    return items


def lines_of(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def assistant(message_id: str, usage: dict[str, int], text: str = "") -> dict[str, Any]:
    blocks = [{"type": "text", "text": text}] if text else []
    return {
        "type": "assistant",
        "message": {
            "id": message_id,
            "model": "claude-sonnet-4-5",
            "content": blocks,
            "usage": usage,
        },
    }


def costs(items: list[dict[str, Any]]) -> tuple[int, int]:
    spent = [i for i in items if i["type"] == "cost"]
    return sum(i["inputTokens"] for i in spent), sum(i["outputTokens"] for i in spent)


def test_a_streamed_claude_reply_counts_its_tokens_once() -> None:
    # Claude Code writes one line per content block of a reply, each repeating the reply's
    # usage so far: the sum must be the reply's final usage, not three times it.
    growing = [
        assistant(
            "msg_1", {"input_tokens": 10, "cache_read_input_tokens": 500, "output_tokens": 1}
        ),
        assistant(
            "msg_1", {"input_tokens": 10, "cache_read_input_tokens": 500, "output_tokens": 40}, "hi"
        ),
        assistant(
            "msg_1", {"input_tokens": 10, "cache_read_input_tokens": 500, "output_tokens": 90}
        ),
        assistant("msg_2", {"input_tokens": 3, "output_tokens": 7}),
    ]
    assert costs(feed(ClaudeCodeParser(), growing)) == (510 + 3, 90 + 7)


def test_a_reply_written_again_by_a_resumed_session_is_not_counted_again() -> None:
    reply = assistant("msg_1", {"input_tokens": 100, "output_tokens": 10}, "done")
    other = assistant("msg_2", {"input_tokens": 5, "output_tokens": 5}, "next")
    assert costs(feed(ClaudeCodeParser(), [reply, other, reply])) == (105, 15)


def test_known_models_are_priced_and_unknown_ones_count_tokens_only() -> None:
    items = feed(
        ClaudeCodeParser(),
        [
            assistant("m1", {"input_tokens": 100_000, "output_tokens": 0}),
            {
                "type": "assistant",
                "message": {
                    "id": "m2",
                    "model": "house-model-7",
                    "content": [],
                    "usage": {"input_tokens": 500, "output_tokens": 5},
                },
            },
        ],
    )
    priced, unpriced = [i for i in items if i["type"] == "cost"]
    # claude-sonnet-4: $3 / MTok input (a prompt over 200k tokens is priced higher)
    assert (priced["usd"], priced["priced"]) == (0.3, True)
    assert (unpriced["usd"], unpriced["priced"], unpriced["inputTokens"]) == (0.0, False, 500)


def test_an_edit_tools_result_gives_the_file_before_and_after() -> None:
    original = "a = 1\nb = 1\n"
    edit = {"oldString": "= 1", "newString": "= 2", "originalFile": original, "replaceAll": True}
    assert edited_contents("Edit", edit) == (original, "a = 2\nb = 2\n", True)
    multi = {
        "originalFileContents": original,
        "edits": [{"old_string": "a", "new_string": "x"}, {"old_string": "b", "new_string": "y"}],
    }
    assert edited_contents("MultiEdit", multi) == (original, "x = 1\ny = 1\n", True)
    assert edited_contents("Write", {"type": "create", "content": "new\n"}) == (None, "new\n", True)
    # Older versions recorded no original: the contents are unknown, not guessed.
    assert edited_contents("Edit", {"oldString": "a", "newString": "b"}) == (None, None, False)
    assert edited_contents("Edit", {**edit, "oldString": "absent"})[2] is False


def test_claude_edits_todos_and_tool_outcomes_become_items(tmp_path: Path) -> None:
    target = tmp_path / "app.py"
    target.write_text("total = round(x)\n")
    session = ClaudeSession(tmp_path / "projects", tmp_path, "main")
    session.user("Fix rounding")
    session.todo_write([("Find the bug", "completed"), ("Fix it", "in_progress")])
    session.edit(target, "round(x)", "round(x, 2)")
    session.bash("pytest", "1 passed")
    items = feed(ClaudeCodeParser(), lines_of(session.data()))
    (todos,) = [i for i in items if i["type"] == "todos"]
    assert [(t["content"], t["status"]) for t in todos["items"]] == [
        ("Find the bug", "completed"),
        ("Fix it", "in_progress"),
    ]
    (edit,) = [i for i in items if i["type"] == "file_edit"]
    assert edit["path"] == str(target) and edit["contentKnown"] is True
    assert edit["afterSha"] == hashlib.sha256(target.read_bytes()).hexdigest()
    operations = [(i["tool"], i["state"]) for i in items if i["type"] == "operation"]
    assert operations == [
        ("TodoWrite", "started"),
        ("TodoWrite", "committed"),
        ("Edit", "started"),
        ("Edit", "committed"),
        ("Bash", "started"),
        ("Bash", "committed"),
    ]
    assert [i["approvalMode"] for i in items if i["type"] == "permissions"] == ["acceptEdits"]


def test_item_ids_name_their_source_line_and_turns_their_prompt() -> None:
    records = [
        {"type": "user", "uuid": "u1", "message": {"content": "first"}},
        assistant("m1", {"input_tokens": 1, "output_tokens": 1}, "reply"),
        {"type": "user", "uuid": "u2", "message": {"content": "second"}},
    ]
    items = feed(ClaudeCodeParser(), records)
    assert [(i["id"], i["type"], i.get("turnId")) for i in items] == [
        ("L1", "message", "u1"),
        ("L2", "model_override", "u1"),
        ("L2.1", "message", "u1"),
        ("L2.2", "cost", "u1"),
        ("L3", "message", "u2"),
    ]
    assert feed(ClaudeCodeParser(), records) == items  # the same lines, the same items


def test_titles_prefer_the_agents_own_over_the_first_prompt() -> None:
    wrapped = (
        "<command-message>init</command-message>\n<system-reminder>x</system-reminder>\nSet up CI"
    )
    parser = ClaudeCodeParser()
    feed(parser, [{"type": "user", "uuid": "u", "message": {"content": wrapped}}])
    assert parser.title == "Set up CI"
    feed(parser, [{"type": "summary", "summary": "CI setup"}])
    assert parser.title == "CI setup"
    feed(parser, [{"type": "custom-title", "customTitle": "My CI"}])
    assert parser.title == "My CI"


def test_codex_token_totals_become_what_each_report_added(tmp_path: Path) -> None:
    session = CodexSession(tmp_path / "sessions", tmp_path, "main", "0" * 40)
    session.user("hi")
    session.say("one", tokens=(1000, 10))
    session.lines.append(session.lines[-1])  # Codex repeats a report (rate limits changed)
    session.say("two", tokens=(500, 5))
    items = feed(CodexParser(), lines_of(session.data()))
    assert costs(items) == (1500, 15)
    assert {i["model"] for i in items if i["type"] == "cost"} == {"gpt-5-codex"}


def test_codex_plans_patches_policies_and_injected_context(tmp_path: Path) -> None:
    session = CodexSession(
        tmp_path / "sessions",
        tmp_path,
        "feature",
        "a" * 40,
        approval="never",
        sandbox="danger-full-access",
    )
    session.user("Write the changelog")
    session.plan([("Draft", "completed"), ("Review", "pending")])
    session.add_file("CHANGELOG.md", "# Changes\n")
    records = lines_of(session.data())
    injected = {
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "<environment_context>x</environment_context>"}
            ],
        },
    }
    parser = CodexParser()
    items = feed(parser, [records[0], injected, *records[1:]])
    assert [i["content"] for i in items if i["type"] == "message"] == ["Write the changelog"]
    (todos,) = [i for i in items if i["type"] == "todos"]
    assert [t["content"] for t in todos["items"]] == ["Draft", "Review"]
    (edit,) = [i for i in items if i["type"] == "file_edit"]
    assert edit["path"] == str(tmp_path / "CHANGELOG.md")
    assert edit["afterSha"] == hashlib.sha256(b"# Changes\n").hexdigest()
    assert [(i["approvalMode"], i["sandbox"]) for i in items if i["type"] == "permissions"] == [
        ("never", "danger-full-access")
    ]
    assert (parser.state["cwd"], parser.state["branch"]) == (str(tmp_path), "feature")


def test_apply_patch_knows_added_and_deleted_files_but_not_diffs() -> None:
    patch = (
        "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** Update File: b.py\n@@\n-x\n+y\n"
        "*** Delete File: c\n*** Update File: d\n*** Move to: e\n@@\n-1\n+2\n*** End Patch\n"
    )
    assert patch_changes(patch) == [
        ("a.txt", "one\ntwo\n", True),
        ("b.py", None, False),
        ("c", None, True),
        ("d", None, True),
        ("e", None, False),
    ]


def _sessions(tmp: Path) -> list[tuple[type[SourceParser], list[dict[str, Any]]]]:
    (tmp / "f.txt").write_text("v1\n")
    claude = ClaudeSession(tmp / "projects", tmp, "main")
    claude.user("Start")
    claude.say("Working", tokens=(5, 50, 100))
    claude.todo_write([("One", "pending")])
    claude.edit(tmp / "f.txt", "v1", "v2")
    claude.custom_title("Named")
    claude.say("Done")
    codex = CodexSession(tmp / "sessions", tmp, "main", "b" * 40)
    codex.user("Start")
    codex.plan([("One", "pending")])
    codex.add_file("g.txt", "g\n")
    codex.say("Done")
    codex.user("Again")
    codex.say("Done again")
    return [(ClaudeCodeParser, lines_of(claude.data())), (CodexParser, lines_of(codex.data()))]


@settings(max_examples=30, deadline=None)
@given(cut=st.integers(min_value=0, max_value=40), which=st.integers(min_value=0, max_value=1))
def test_continuing_from_a_saved_state_gives_the_items_of_one_pass(
    tmp_path_factory: Any, cut: int, which: int
) -> None:
    # What an incremental import does: parse part of a file, keep the state as JSON, parse
    # the rest later. It must give exactly the items of a single pass.
    parser_type, records = _sessions(tmp_path_factory.mktemp("s"))[which]
    cut = min(cut, len(records))
    whole = feed(parser_type(), records)
    first = parser_type()
    items = feed(first, records[:cut])
    saved = orjson.loads(orjson.dumps(first.state))
    later = parser_type(saved)
    for n, record in enumerate(records[cut:], cut + 1):
        items += later.feed(n, record, record.get("timestamp"))
    assert items == whole
    assert later.title == parser_type(feed_state(parser_type, records)).title


ADDED_SINCE_THE_FIRST_IMPORTS = {
    ClaudeCodeParser: ("tasks", "calls", "parent", "conversation", "ledger"),
    CodexParser: ("agentPath", "exec", "cells", "contents"),
}
"""State keys the parsers keep that the first releases with imports (379995f, 05232c5)
did not save in their checkpoints (tests/fixtures/upgrades/embedded-index3, -index4)."""


@pytest.mark.parametrize("which", [0, 1])
def test_a_state_saved_by_an_earlier_release_goes_on(tmp_path: Path, which: int) -> None:
    parser_type, records = _sessions(tmp_path)[which]
    cut = len(records) // 2
    first = parser_type()
    feed(first, records[:cut])
    saved = orjson.loads(orjson.dumps(first.state))
    for key in ADDED_SINCE_THE_FIRST_IMPORTS[parser_type]:
        del saved[key]
    later = parser_type(saved)
    items = [later.feed(n, r, r.get("timestamp")) for n, r in enumerate(records[cut:], cut + 1)]
    whole = feed(parser_type(), records)
    said = [i for i in whole if i["type"] == "message" and int(i["id"][1:].split(".")[0]) > cut]
    assert [i for page in items for i in page if i["type"] == "message"] == said


def feed_state(parser_type: type[SourceParser], records: list[dict[str, Any]]) -> dict[str, Any]:
    parser = parser_type()
    feed(parser, records)
    return parser.state


def test_a_handoff_is_offered_only_for_plain_session_ids() -> None:
    from restore.agents.registry import handoff_command

    session = "0d3c5f0e-5b7a-4e57-9c3f-1f2d3e4a5b6c"
    assert handoff_command("claude-code", session) == ["claude", "--resume", session]
    assert handoff_command("codex", session) == ["codex", "resume", session]
    assert handoff_command("gemini", session) == ["gemini", "--resume", session]
    for crafted in ("--dangerously-skip-permissions", "$(touch pwned)", "a b", "", "x;y"):
        assert handoff_command("claude-code", crafted) is None
    assert handoff_command("acp", session) is None
