"""Agents delete their own sessions: Claude Code those older than `cleanupPeriodDays` (30
by default, at startup, without a word), Gemini CLI those older than its
`sessionRetention.maxAge` (30d, on by default), Qwen Code its background sub-agents'
transcripts after `general.cleanupPeriodDays`. `sessiond doctor` names each agent whose
setting will delete sessions sessiond has not imported yet, with the setting and the count;
once imported, they are kept whatever the agent deletes (each agent's compatibility test
deletes a session the real CLI wrote and finds its thread whole)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.rpc_client import REPO

DAY = 86_400


def sessiond(home: Path, user: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A real `sessiond` whose user (HOME, where the agents keep their sessions) is `user`."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(user)}
    for name in ("CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "QWEN_HOME", "QWEN_RUNTIME_DIR"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "server.cli", "--home", str(home), *args],
                          cwd=REPO, capture_output=True, text=True, env=env)  # fmt: skip


def claude_session(user: Path, repo: Path, session: str, age_days: float) -> Path:
    folder = user / ".claude" / "projects" / "".join(c if c.isalnum() else "-" for c in str(repo))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session}.jsonl"
    line = {"type": "user", "uuid": f"u-{session}", "parentUuid": None, "sessionId": session,
            "cwd": str(repo), "timestamp": "2026-03-10T12:00:00.000Z",
            "message": {"role": "user", "content": f"hello from {session}"}}  # fmt: skip
    path.write_text(json.dumps(line) + "\n")
    at = time.time() - age_days * DAY
    os.utime(path, (at, at))
    return path


def retention_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if " deletes " in line]


def test_doctor_names_claude_code_with_its_setting_and_what_is_not_imported_yet(
    home: Path, tmp_path: Path
) -> None:
    user, repo = tmp_path / "user", tmp_path / "repo"
    repo.mkdir()
    (user / ".claude").mkdir(parents=True)
    settings = user / ".claude" / "settings.json"
    settings.write_text(json.dumps({"cleanupPeriodDays": 10}))
    claude_session(user, repo, "0d3c5f0e-5b7a-4e57-9c3f-1f2d3e4a5b6c", age_days=8)
    claude_session(user, repo, "7f1e2d3c-4b5a-4968-8776-655443322110", age_days=1)
    (line,) = retention_lines(sessiond(home, user, "doctor"))
    assert line == (
        f"Claude Code: cleanupPeriodDays = 10 ({settings}) deletes sessions older than 10 "
        "days; 2 sessions not imported yet (1 within 7 days of it): `sessiond import claude` "
        "(or `serve --follow claude`) keeps them"
    )
    imported = sessiond(home, user, "import", "claude", "--json")
    assert json.loads(imported.stdout)["created"] == 2
    assert retention_lines(sessiond(home, user, "doctor")) == []  # kept now
    settings.write_text("not json")  # Claude Code's default applies: 30 days
    claude_session(user, repo, "891dd06b-6547-4859-aa58-e9adc5a74de2", age_days=0)
    (line,) = retention_lines(sessiond(home, user, "doctor"))
    assert "cleanupPeriodDays = 30" in line and "1 session not imported yet (0 within" in line


def test_doctor_names_gemini_by_default_and_not_once_its_retention_is_off(
    home: Path, tmp_path: Path
) -> None:
    user = tmp_path / "user"
    chats = user / ".gemini" / "tmp" / "repo" / "chats"
    chats.mkdir(parents=True)
    header = {"sessionId": "891dd06b-6547-4859-aa58-e9adc5a74de2", "projectHash": "x",
              "startTime": "2026-03-10T12:00:00.000Z", "lastUpdated": "2026-03-10T12:00:00.000Z",
              "kind": "main"}  # fmt: skip
    (chats / "session-2026-03-10T12-00-891dd06b.jsonl").write_text(json.dumps(header) + "\n")
    (line,) = retention_lines(sessiond(home, user, "doctor"))
    assert line.startswith("Gemini CLI: general.sessionRetention.maxAge = 30d (")
    assert "1 session not imported yet" in line
    (user / ".gemini" / "settings.json").write_text(json.dumps(
        {"general": {"sessionRetention": {"enabled": False}}}))  # fmt: skip
    assert retention_lines(sessiond(home, user, "doctor")) == []


def test_doctor_counts_only_the_sub_agents_qwen_code_deletes(home: Path, tmp_path: Path) -> None:
    user = tmp_path / "user"
    project = user / ".qwen" / "projects" / "-work-repo"
    (project / "chats").mkdir(parents=True)
    (project / "subagents" / "s1").mkdir(parents=True)
    (project / "chats" / "s1.jsonl").write_text("{}\n")
    (project / "subagents" / "s1" / "agent-general-purpose-call_1.jsonl").write_text("{}\n")
    (line,) = retention_lines(sessiond(home, user, "doctor"))
    assert line.startswith("Qwen Code: general.cleanupPeriodDays = 30 (")
    assert "deletes sub-agents' transcripts older than 30 days; 1 session not imported" in line
