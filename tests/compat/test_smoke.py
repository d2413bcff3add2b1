"""The loop every compatibility test builds on, per agent: a real CLI answers a text turn
from the mock model, writes its transcript, and sessiond imports it as a thread with the
conversation, cwd, branch and model the CLI recorded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agents.clis import BRANCH
from tests.agents.mock_model import Reply, Scenario
from tests.compat.conftest import Agents, import_from, resume, states
from tests.support.rpc_client import ServerProcess

HELLO = Scenario({"hello": [Reply(text="Hello from the mock model.")]})


@pytest.mark.compat("claude-code", "messages", "model")
def test_a_claude_code_text_turn_is_imported_with_its_cwd_branch_and_model(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(HELLO)
    run = agent.claude("[[hello]] say hello").check()
    summary = import_from(home, "claude", agent.claude_projects)
    assert summary["created"] == 1, summary
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    assert thread["origin"]["sessionId"] == run.session_id
    assert (thread["cwd"], thread["branch"]) == (str(agent.repo), BRANCH)
    report = resume(server, thread["threadId"])
    texts = [m["content"] for m in report["messages"]["items"]]
    assert texts == ["[[hello]] say hello", "Hello from the mock model."]
    assert states(report)["model_override"]["model"] == agents.model.main_requests()[0].model


@pytest.mark.compat("codex", "messages", "model")
def test_a_codex_text_turn_is_imported_with_its_cwd_branch_and_model(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(HELLO)
    run = agent.codex("[[hello]] say hello").check()
    summary = import_from(home, "codex", agent.codex_sessions)
    assert summary["created"] == 1, summary
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    assert thread["origin"]["sessionId"] == run.session_id
    assert (thread["cwd"], thread["branch"]) == (str(agent.repo), BRANCH)
    report = resume(server, thread["threadId"])
    texts = [m["content"] for m in report["messages"]["items"]]
    assert texts == ["[[hello]] say hello", "Hello from the mock model."]
    assert states(report)["model_override"]["model"] == agents.model.main_requests()[0].model


CUT = Scenario({"cut": [Reply(text="the log ends in half an emoji: \ud83d then more")]})
"""A model's answer holding a lone surrogate, what a cut at a UTF-16 offset leaves (a
truncated tool output, a broken stream; anthropics/claude-code#69927). Node's
JSON.stringify writes it into the transcript as the escape `\\ud83d`."""


@pytest.mark.compat("claude-code", "messages")
def test_a_claude_code_answer_holding_half_an_emoji_is_imported_not_skipped(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(CUT)
    agent.claude("[[cut]] show the log").check()
    [transcript] = agent.transcripts(agent.claude_projects)
    assert b"half an emoji: \\ud83d then" in transcript.read_bytes()  # as Claude Code wrote it
    summary = import_from(home, "claude", agent.claude_projects)
    assert (summary["skippedLines"], summary["repairedLines"]) == (0, 1), summary
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    texts = [m["content"] for m in resume(server, thread["threadId"])["messages"]["items"]]
    assert texts == ["[[cut]] show the log", "the log ends in half an emoji: \ufffd then more"]


@pytest.mark.compat("gemini", "messages")
def test_a_gemini_cli_answer_holding_half_an_emoji_is_imported_not_skipped(
    agents: Agents, home: Path, spawn: Callable[..., ServerProcess]
) -> None:
    agent = agents.start(CUT)
    agent.gemini("[[cut]] show the log").check()
    summary = import_from(home, "gemini", agent.gemini_tmp)
    assert summary["skippedLines"] == 0 and summary["repairedLines"] >= 1, summary
    server = spawn()
    server.initialize([str(agent.repo)])
    (thread,) = server.request("thread/list", {})["threads"]
    texts = [m["content"] for m in resume(server, thread["threadId"])["messages"]["items"]]
    assert texts == ["[[cut]] show the log", "the log ends in half an emoji: \ufffd then more"]
