"""`sessiond acp` hands a SessionStart hook's additionalContext to AGENT: the real chain
(the SDK's client → a real `sessiond acp` → tests/support/acp_agent.py) with a real user-level hook
(tests/support/hook_program.py) configured in the test's config home."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from tests.support.acp_editor import agent_log, fake_agent, sessiond_acp
from tests.test_acp import text, thread_items

HOOK = Path(__file__).with_name("support") / "hook_program.py"


def configure(tmp_path: Path, *hooks: tuple[str, str, float | None]) -> Path:
    """User-level SessionStart hooks `(name, mode + args, timeout)`; returns their log."""
    log = tmp_path / "hooks.jsonl"
    commands = []
    for name, mode, timeout in hooks:
        command: dict[str, Any] = {
            "type": "command",
            "name": name,
            "command": f"{sys.executable} {HOOK} {log} {mode}",
        }
        if timeout is not None:
            command["timeout"] = timeout
        commands.append(command)
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config" / "hooks.json").write_text(
        json.dumps({"SessionStart": [{"matcher": "startup|resume", "hooks": commands}]})
    )
    return log


def prompts_agent_got(state: Path) -> list[list[str]]:
    """The text blocks of every prompt AGENT received, in order."""
    return [
        [block["text"] for block in entry["params"]["prompt"]]
        for entry in agent_log(state)
        if entry["event"] == "session/prompt"
    ]


async def test_a_hooks_context_reaches_agent_in_the_first_prompt_once_and_again_after_load(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    # The hook answers 0.5 s after the session started: the first prompt comes before that.
    configure(tmp_path, ("notes", "slow-context 0.5", None))
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        first = await run.conn.prompt(session_id=session, prompt=text("first"))
        second = await run.conn.prompt(session_id=session, prompt=text("second"))
        shown = run.editor.texts()
    got = prompts_agent_got(state)
    assert len(got) == 2 and got[0][1:] == ["first"] and got[1] == ["second"]
    context = got[0][0]
    assert f"context for {session} (startup)" in context
    assert 'name="hook:SessionStart:notes"' in context
    assert first.field_meta["sessiond"]["context"] == ["hook:SessionStart:notes"]
    assert second.field_meta is None or "sessiond" not in second.field_meta
    assert shown == ["echo: first", "echo: second"]  # the editor never sees the context

    items = thread_items(home, session)
    section = next(i for i in items if i["type"] == "prompt_section")
    starts = [i for i in items if i["type"] == "turn" and i["phase"] == "started"]
    assert section["seq"] < starts[0]["seq"]  # the prompt waited for the hook
    assert starts[0]["agentContext"] == [{"type": "text", "text": context}]
    assert starts[0]["promptSections"] == ["hook:SessionStart:notes"]
    assert "agentContext" not in starts[1]
    users = [i["content"] for i in items if i["type"] == "message" and i["role"] == "user"]
    assert users == [text("first"), text("second")]  # the user's words only

    async with sessiond_acp(home, fake_agent(state)) as run:
        await run.conn.load_session(cwd=str(repo), session_id=session)
        replayed = run.editor.texts()
        await run.conn.prompt(session_id=session, prompt=text("third"))
        await run.conn.prompt(session_id=session, prompt=text("fourth"))
    assert replayed == ["first", "echo: first", "second", "echo: second"]
    got = prompts_agent_got(state)[2:]
    assert got[0][1:] == ["third"] and got[1] == ["fourth"]
    assert f"context for {session} (resume)" in got[0][0]
    assert "(startup)" not in got[0][0]


async def test_a_prompt_goes_through_without_the_context_of_a_hook_that_fails_or_times_out(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    configure(tmp_path, ("stuck", "sleep 30", 1), ("broken", "exit1", None))
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state)) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        answer = await run.conn.prompt(session_id=session, prompt=text("hello"))
    assert answer.stop_reason == "end_turn"
    assert prompts_agent_got(state) == [["hello"]]
    items = thread_items(home, session)
    ends = {
        i["hook"]: i
        for i in items
        if i["type"] == "lifecycle" and i["status"] != "started" and "hook" in i
    }
    assert (ends["stuck"]["status"], ends["broken"]["status"]) == ("timed_out", "failed")
    start = next(i for i in items if i["type"] == "turn")
    assert ends["stuck"]["seq"] < start["seq"]  # waited for the hook's timeout, no longer
    assert "agentContext" not in start
    assert not any(i["type"] == "prompt_section" for i in items)


async def test_a_new_agent_session_after_agent_died_gets_the_hooks_context_again(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    """AGENT cannot resume or load: its new session is primed with the history, and the
    context its lost session had goes with it (once)."""
    repo = make_repo("repo")
    configure(tmp_path, ("notes", "context", None))
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state, caps="none")) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=text("first"))
        with pytest.raises(RequestError):
            await run.conn.prompt(session_id=session, prompt=text("die"))
        await run.conn.prompt(session_id=session, prompt=text("again"))
        await run.conn.prompt(session_id=session, prompt=text("once more"))
    got = prompts_agent_got(state)
    assert [blocks[-1] for blocks in got] == ["first", "die", "again", "once more"]
    context = got[0][0]
    assert f"context for {session} (startup)" in context
    assert got[1] == ["die"]
    prime = got[2][0]  # the history, then the context, then the user's words
    assert "<user>\nfirst\n</user>" in prime and "echo: first" in prime
    assert got[2][1:] == [context, "again"]
    assert got[3] == ["once more"]
