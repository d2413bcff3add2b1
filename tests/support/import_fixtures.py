"""Claude Code transcripts and Codex rollouts in their real on-disk formats, for the import
tests and the import bench, with what sessiond must restore from each.

Claude Code lines follow the transcripts Claude Code 2.x writes (user/assistant lines
with uuid/parentUuid, cwd, gitBranch, message.model/usage, tool_use blocks and their
tool_result + toolUseResult, permission-mode, summary and custom-title lines). Codex
rollouts are built with bench/codex_peer.py's line builders, whose files `codex
app-server` 0.171 accepts (tests/test_import_codex_peer.py checks that against the real
binary when it is installed).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from bench import codex_peer

EPOCH = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)


def _iso(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def encoded_project(cwd: Path) -> str:
    """Claude Code's folder name for a cwd: every character but letters and digits as `-`."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


@dataclass
class Expected:
    """What a resume of the imported thread must give back."""

    agent: str
    session_id: str
    path: Path
    cwd: Path
    branch: str
    title: str
    model: str | None = None
    approval: str | None = None
    sandbox: str | None = None
    todos: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    messages: list[str] = field(default_factory=list)

    @property
    def handoff(self) -> list[str]:
        if self.agent == "claude-code":
            return ["claude", "--resume", self.session_id]
        return ["codex", "resume", self.session_id]


class SourceFile:
    """A transcript being written: its lines, where it goes, what resume must give back."""

    path: Path
    lines: list[bytes]
    expected: Expected

    def data(self) -> bytes:
        return b"".join(self.lines)

    def save(self) -> Expected:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_bytes(self.data())
        return self.expected


class ClaudeSession(SourceFile):
    """One Claude Code transcript, built line by line as Claude Code writes it."""

    def __init__(
        self,
        projects: Path,
        cwd: Path,
        branch: str,
        *,
        model: str = "claude-sonnet-4-5-20250929",
        mode: str = "acceptEdits",
        started: datetime = EPOCH,
        session_id: str | None = None,
    ) -> None:
        self.session_id = session_id or str(uuid.uuid4())
        self.path = projects / encoded_project(cwd) / f"{self.session_id}.jsonl"
        self.cwd, self.branch, self.model, self.mode = cwd, branch, model, mode
        self.clock = started
        self.parent: str | None = None
        self.lines: list[bytes] = []
        self.expected = Expected(
            "claude-code", self.session_id, self.path, cwd, branch, "", model=model, approval=mode
        )
        self.raw({"type": "permission-mode", "permissionMode": mode, "sessionId": self.session_id})

    def raw(self, record: dict[str, Any] | bytes) -> None:
        self.lines.append(record if isinstance(record, bytes) else orjson.dumps(record) + b"\n")

    def _entry(self, kind: str, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
        self.clock += timedelta(seconds=7)
        entry = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": str(self.cwd),
            "sessionId": self.session_id,
            "version": "2.1.37",
            "gitBranch": self.branch,
            "type": kind,
            "message": message,
            "uuid": str(uuid.uuid4()),
            "timestamp": _iso(self.clock),
            **extra,
        }
        self.parent = entry["uuid"]
        return entry

    def user(self, text: str) -> None:
        self.raw(self._entry("user", {"role": "user", "content": text}, permissionMode=self.mode))
        self.expected.title = self.expected.title or text.splitlines()[0]
        self.expected.messages.append(text)

    def _assistant(self, blocks: list[dict[str, Any]], tokens: tuple[int, int, int]) -> None:
        fresh, output, cached = tokens
        usage = {
            "input_tokens": fresh,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached,
            "output_tokens": output,
            "service_tier": "standard",
        }
        message = {
            "model": self.model,
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "content": blocks,
            "stop_reason": "end_turn",
            "usage": usage,
        }
        self.raw(self._entry("assistant", message, requestId=f"req_{uuid.uuid4().hex[:20]}"))
        self.expected.input_tokens += fresh + cached
        self.expected.output_tokens += output

    def say(self, text: str, tokens: tuple[int, int, int] = (12, 80, 4000)) -> None:
        self._assistant([{"type": "text", "text": text}], tokens)
        self.expected.messages.append(text)

    def _tool(
        self,
        name: str,
        arguments: dict[str, Any],
        output: str,
        outcome: Any,
        tokens: tuple[int, int, int] = (3, 40, 4100),
    ) -> None:
        call = f"toolu_{uuid.uuid4().hex[:24]}"
        self._assistant(
            [{"type": "tool_use", "id": call, "name": name, "input": arguments}], tokens
        )
        result = {"type": "tool_result", "tool_use_id": call, "content": output}
        self.raw(self._entry("user", {"role": "user", "content": [result]}, toolUseResult=outcome))

    def todo_write(self, todos: list[tuple[str, str]]) -> None:
        entries = [
            {"content": text, "status": status, "activeForm": text} for text, status in todos
        ]
        self._tool(
            "TodoWrite",
            {"todos": entries},
            "Todos have been modified successfully",
            {"oldTodos": [], "newTodos": entries},
        )
        self.expected.todos = [text for text, _ in todos]

    def edit(self, path: Path, old: str, new: str) -> None:
        """An Edit the agent made: the file on disk holds the result afterwards."""
        original = path.read_text()
        updated = original.replace(old, new, 1)
        path.write_text(updated)
        self._tool(
            "Edit",
            {"file_path": str(path), "old_string": old, "new_string": new},
            f"The file {path} has been updated.",
            {
                "filePath": str(path),
                "oldString": old,
                "newString": new,
                "originalFile": original,
                "structuredPatch": [],
                "userModified": False,
                "replaceAll": False,
            },
        )
        self.expected.edited.append(str(path))

    def write(self, path: Path, content: str) -> None:
        path.write_text(content)
        self._tool(
            "Write",
            {"file_path": str(path), "content": content},
            f"File created successfully at: {path}",
            {"type": "create", "filePath": str(path), "content": content, "structuredPatch": []},
        )
        self.expected.edited.append(str(path))

    def bash(self, command: str, output: str) -> None:
        self._tool(
            "Bash",
            {"command": command, "description": "Run it"},
            output,
            {"stdout": output, "stderr": "", "interrupted": False, "isImage": False},
        )

    def custom_title(self, title: str) -> None:
        self.raw({"type": "custom-title", "customTitle": title, "sessionId": self.session_id})
        self.expected.title = title


class CodexSession(SourceFile):
    """One Codex rollout, built with the line builders Codex app-server accepts."""

    def __init__(
        self,
        sessions: Path,
        cwd: Path,
        branch: str,
        commit: str,
        *,
        model: str = "gpt-5-codex",
        approval: str = "on-request",
        sandbox: str = "workspace-write",
        started: datetime = EPOCH,
    ) -> None:
        self.session_id = str(uuid.uuid4())
        self.path = codex_peer.rollout_path(sessions.parent, started, self.session_id)
        self.cwd, self.model, self.approval, self.sandbox = cwd, model, approval, sandbox
        self.clock = started
        self.totals = [0, 0]
        git = {"commit_hash": commit, "branch": branch, "repository_url": None}
        self.lines = [codex_peer.session_meta(self.session_id, started, str(cwd), git)]
        self.expected = Expected(
            "codex",
            self.session_id,
            self.path,
            cwd,
            branch,
            "",
            model=model,
            approval=approval,
            sandbox=sandbox,
        )

    def _ts(self) -> str:
        self.clock += timedelta(seconds=5)
        return codex_peer.iso(self.clock)

    def user(self, text: str) -> None:
        ts = self._ts()
        self.lines.append(
            codex_peer.turn_context(ts, str(self.cwd), self.model, self.approval, self.sandbox)
        )
        self.lines.append(codex_peer.message_lines(ts, "user", text))
        self.expected.title = self.expected.title or text.splitlines()[0]
        self.expected.messages.append(text)

    def say(self, text: str, tokens: tuple[int, int] = (5000, 300)) -> None:
        ts = self._ts()
        self.lines.append(codex_peer.message_lines(ts, "assistant", text))
        self.totals = [self.totals[0] + tokens[0], self.totals[1] + tokens[1]]
        self.lines.append(codex_peer.token_count(ts, *self.totals))
        self.expected.messages.append(text)
        self.expected.input_tokens, self.expected.output_tokens = self.totals

    def plan(self, steps: list[tuple[str, str]]) -> None:
        plan = [{"step": text, "status": status} for text, status in steps]
        self.lines.append(
            codex_peer.tool_lines(
                self._ts(),
                f"call_{uuid.uuid4().hex[:12]}",
                "update_plan",
                {"plan": plan},
                "Plan updated",
            )
        )
        self.expected.todos = [text for text, _ in steps]

    def add_file(self, relative: str, content: str) -> None:
        """apply_patch adding a file; the file on disk holds it afterwards."""
        (self.cwd / relative).write_text(content)
        body = "".join(f"+{line}\n" for line in content.splitlines())
        patch = f"*** Begin Patch\n*** Add File: {relative}\n{body}*** End Patch\n"
        self.lines.append(
            codex_peer.tool_lines(
                self._ts(),
                f"call_{uuid.uuid4().hex[:12]}",
                "apply_patch",
                {"input": patch},
                "Done!",
            )
        )
        self.expected.edited.append(str(self.cwd / relative))

    def shell(self, command: list[str], output: str) -> None:
        self.lines.append(
            codex_peer.tool_lines(
                self._ts(), f"call_{uuid.uuid4().hex[:12]}", "shell", {"command": command}, output
            )
        )


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Fixture:
    """Sessions of both agents over two repos, plus one file per fault."""

    claude_root: Path
    codex_root: Path
    sessions: list[Expected]
    faults: dict[str, Path]

    def of(self, agent: str) -> list[Expected]:
        return [s for s in self.sessions if s.agent == agent]


def build(base: Path, alpha: Path, beta: Path, head: dict[Path, str]) -> Fixture:
    """Two Claude Code and two Codex sessions in each of two repos (alpha on `main`, beta
    on `feature/login`), then the faults: garbage line, BOM, torn tail, huge first line,
    invalid UTF-8, and an empty file."""
    claude_root, codex_root = base / "claude" / "projects", base / "codex" / "sessions"
    sessions: list[Expected] = []
    branches = {alpha: "main", beta: "feature/login"}
    for n, repo in enumerate((alpha, beta)):
        started = EPOCH + timedelta(hours=n)
        claude = ClaudeSession(
            claude_root,
            repo,
            branches[repo],
            started=started,
            mode="acceptEdits" if n == 0 else "plan",
        )
        claude.user(f"Fix the payment rounding bug in {repo.name}")
        claude.say("I'll look at the rounding code first.")
        claude.todo_write(
            [
                ("Reproduce the rounding bug", "completed"),
                ("Fix round_half_even", "in_progress"),
                ("Add a regression test", "pending"),
            ]
        )
        claude.edit(repo / "README", repo.name, f"{repo.name} (rounding fixed)")
        claude.write(repo / "test_rounding.py", "def test_rounding():\n    assert True\n")
        claude.bash("pytest -q", "1 passed")
        claude.say("Fixed, with a regression test.", tokens=(20, 150, 9000))
        sessions.append(claude.save())

        titled = ClaudeSession(
            claude_root,
            repo,
            branches[repo],
            started=started + timedelta(minutes=30),
            model="claude-opus-4-1-20250805",
        )
        titled.user("Explain the ledger module")
        titled.say("The ledger records every operation.")
        titled.custom_title(f"Ledger walkthrough ({repo.name})")
        sessions.append(titled.save())

        codex = CodexSession(
            codex_root,
            repo,
            branches[repo],
            head[repo],
            started=started + timedelta(minutes=10),
            approval="on-request" if n == 0 else "never",
            sandbox="workspace-write" if n == 0 else "danger-full-access",
        )
        codex.user(f"Add a CHANGELOG to {repo.name}")
        codex.plan([("Draft the changelog", "completed"), ("Link it from README", "pending")])
        codex.add_file("CHANGELOG.md", "# Changelog\n\n- rounding fixed\n")
        codex.shell(["bash", "-lc", "git status --short"], "?? CHANGELOG.md")
        codex.say("Added CHANGELOG.md.")
        sessions.append(codex.save())

        second = CodexSession(
            codex_root,
            repo,
            branches[repo],
            head[repo],
            model="o4-mini",
            started=started + timedelta(minutes=40),
        )
        second.user("What does the index do?")
        second.say("It lists threads without reading their files.", tokens=(900, 120))
        sessions.append(second.save())
    return Fixture(claude_root, codex_root, sessions, write_faults(claude_root, codex_root, alpha))


def write_faults(claude_root: Path, codex_root: Path, repo: Path) -> dict[str, Path]:
    """One session per fault, each otherwise whole; names say which fault it carries."""
    faults: dict[str, Path] = {}

    def claude(name: str, first: str = "Hello") -> ClaudeSession:
        session = ClaudeSession(claude_root, repo, "main", started=EPOCH + timedelta(days=1))
        session.lines.clear()  # no permission-mode header: the fault comes first
        session.user(first)
        return session

    garbage = claude("garbage")
    garbage.raw(b'{"type":"assistant","message":{"content":[{"type":"te\n')  # cut mid-record
    garbage.raw(b"\x00\x00\x00 not json at all\n")
    garbage.say("Still here after the garbage.")
    faults["garbage"] = garbage.path
    garbage.save()

    bom = claude("bom", "A session that starts with a byte order mark")
    bom.lines[0] = b"\xef\xbb\xbf" + bom.lines[0]
    bom.say("BOM skipped.")
    faults["bom"] = bom.path
    bom.save()

    torn = claude("torn", "A session whose last line was cut by a crash")
    torn.say("This line is whole.")
    torn.raw(b'{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","te')
    faults["torn"] = torn.path
    torn.save()

    huge = claude("huge", "Here is the whole build log:\n" + "x" * 300_000)
    huge.say("The log shows a linker error.")
    faults["huge"] = huge.path
    huge.save()

    latin = claude("latin", "Le caf\u00e9 est pr\u00eat")
    latin.lines[0] = latin.lines[0].replace("caf\u00e9".encode(), b"caf\xe9")  # Latin-1 byte
    latin.say("Invalid UTF-8 is replaced, the line is kept.")
    faults["latin"] = latin.path
    latin.save()

    empty = claude_root / "-empty-project" / f"{uuid.uuid4()}.jsonl"
    empty.parent.mkdir(parents=True, exist_ok=True)
    empty.write_bytes(b"")
    faults["empty"] = empty

    codex = CodexSession(codex_root, repo, "main", "0" * 40, started=EPOCH + timedelta(days=1))
    codex.user("A rollout with a garbage line and a torn tail")
    codex.lines.append(b"garbage\n")
    codex.say("Still here.")
    codex.lines.append(b'{"timestamp":"2026-05-05T09:31:00.000Z","type":"response_item","pay')
    faults["codex-torn"] = codex.path
    codex.save()
    return faults
