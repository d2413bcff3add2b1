"""Agent transcripts that grow the way the agents write them: Claude Code, Codex and Gemini
CLI sessions in their stores under one fake home, each turn appended to the file (never
rewritten), for the tests that import a session again and again as it grows
(tests/sequences/).

Claude Code and Codex lines come from tests/support/import_fixtures.py (Claude Code 2.x's
lines; Codex rollouts `codex app-server` accepts). Gemini CLI lines follow what its
`ChatRecordingService` appends to `chats/session-*.jsonl` (the metadata first, then the
primed history, `<session_context>` naming the workspace; each message, then `{"$set":
{"lastUpdated"}}`; a reply written again whole once its tokens arrive), with the fields
of the session the real 0.38.2 wrote
(tests/compat/fixtures/).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tests.support.import_fixtures import EPOCH, ClaudeSession, CodexSession

AGENTS = ("claude", "codex", "gemini")
"""The names `sessiond import` takes."""
ORIGIN = {"claude": "claude-code", "codex": "codex", "gemini": "gemini"}
"""Each one's `origin.agent`."""


def environment(root: Path) -> dict[str, str]:
    """Where each agent keeps its sessions under `root`: the variables both `sessiond
    import` and `serve --follow` read."""
    return {
        "CLAUDE_CONFIG_DIR": str(root / "claude"),
        "CODEX_HOME": str(root / "codex"),
        "GEMINI_CLI_HOME": str(root / "gemini"),
    }


def _iso(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


class GeminiSession:
    """One Gemini CLI session file (`.gemini/tmp/<project>/chats/session-*.jsonl`)."""

    MODEL = "gemini-3-flash-preview"

    def __init__(self, gemini_home: Path, cwd: Path, *, started: datetime = EPOCH) -> None:
        self.session_id = str(uuid.uuid4())
        self.clock = started
        project = gemini_home / ".gemini" / "tmp" / cwd.name
        project.mkdir(parents=True, exist_ok=True)
        (project / ".project_root").write_text(str(cwd))  # as Gemini CLI marks a project
        stamp = f"{started:%Y-%m-%dT%H-%M}"
        self.path = project / "chats" / f"session-{stamp}-{self.session_id[:8]}.jsonl"
        self.lines: list[bytes] = []
        self._record(
            {
                "sessionId": self.session_id,
                "projectHash": hashlib.sha256(str(cwd).encode()).hexdigest(),
                "startTime": _iso(started),
                "lastUpdated": _iso(started),
                "kind": "main",
            }
        )
        # At startup the history the model is primed with, where the session runs in it.
        context = (
            "<session_context>\nThis is the Gemini CLI. We are setting up the context for our"
            f" chat.\nMy operating system is: linux\n- **Workspace Directories:**\n  - {cwd}\n"
            "- **Directory Structure:**\n\n</session_context>"
        )
        primed = {"id": str(uuid.uuid4()), "timestamp": _iso(started), "type": "user",
                  "content": [{"text": context}]}  # fmt: skip
        self._record({"$set": {"messages": [primed]}})

    def _record(self, record: dict[str, Any]) -> None:
        self.lines.append(orjson.dumps(record) + b"\n")

    def _message(self, kind: str, content: Any, **extra: Any) -> dict[str, Any]:
        self.clock += timedelta(seconds=3)
        message = {"id": str(uuid.uuid4()), "timestamp": _iso(self.clock), "type": kind,
                   "content": content, **extra}  # fmt: skip
        self._record(message)
        self._record({"$set": {"lastUpdated": _iso(self.clock)}})
        return message

    def user(self, text: str) -> None:
        self._message("user", [{"text": text}])

    def say(self, text: str) -> None:
        reply = self._message("gemini", text, thoughts=[], tokens=None, model=self.MODEL)
        tokens = {"input": 1200, "output": 60, "cached": 0, "thoughts": 0, "tool": 0,
                  "total": 1260}  # fmt: skip
        self._record({**reply, "tokens": tokens})  # the same message, whole, with its tokens


Source = ClaudeSession | CodexSession | GeminiSession


class Transcript:
    """A session an agent is writing: turns are appended to its file as they happen."""

    def __init__(self, agent: str, root: Path, cwd: Path, number: int) -> None:
        self.agent = agent
        started = EPOCH + timedelta(hours=number)  # one clock per session: distinct names
        self.source: Source
        if agent == "claude":
            self.source = ClaudeSession(root / "claude" / "projects", cwd, "main",
                                        started=started)  # fmt: skip
        elif agent == "codex":
            self.source = CodexSession(root / "codex" / "sessions", cwd, "main", "0" * 40,
                                       started=started)  # fmt: skip
        else:
            self.source = GeminiSession(root / "gemini", cwd, started=started)
        self.messages: list[tuple[str, str]] = []
        """(role, text) of every message written so far, in order."""
        self._flushed = 0

    @property
    def session_id(self) -> str:
        return self.source.session_id

    @property
    def path(self) -> Path:
        return self.source.path

    def turn(self, asked: str, answered: str) -> None:
        """The person asks, the agent answers: both appended to the file."""
        self.source.user(asked)
        self.source.say(answered)
        self.messages += [("user", asked), ("assistant", answered)]
        self.source.path.parent.mkdir(parents=True, exist_ok=True)
        with self.source.path.open("ab") as out:
            out.write(b"".join(self.source.lines[self._flushed :]))
        self._flushed = len(self.source.lines)
