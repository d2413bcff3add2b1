"""Where each agent keeps its sessions (Claude Code, Codex, Gemini CLI): which files are
sessions, the id the agent resumes each by, where a session ran when none of its lines
says, and where a sub-agent's parent transcript is. Invariant: only names, stats and the
heads of files are read here, never through a link.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from dataclasses import dataclass
from glob import escape as glob_escape
from pathlib import Path
from stat import S_ISREG

import orjson

from restore.imports.parse import HEAD_BYTES, LINE_BYTES, open_source
from restore.sources import claude_code, codex, gemini
from restore.sources.common import SourceParser


@dataclass(frozen=True)
class SourceKind:
    """One agent's session store: where it is, which files are sessions, how to parse them."""

    name: str
    agent: str
    parser: type[SourceParser]
    skip_itemless: bool = False
    """A file whose records give no item is not a session (yet): Gemini CLI writes its
    metadata and primed context before the first prompt, and leaves such a file beside
    the session a headless `--resume` continues; it lists neither."""

    def default_root(self) -> Path:
        """`$CLAUDE_CONFIG_DIR/projects` else `~/.claude/projects`; `$CODEX_HOME/sessions`
        else `~/.codex/sessions`; `$GEMINI_CLI_HOME/.gemini/tmp` else `~/.gemini/tmp`
        (Gemini CLI's `homedir()` is `$GEMINI_CLI_HOME` when set)."""
        if self.agent == claude_code.AGENT:
            base = os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude"
            return Path(base) / "projects"
        if self.agent == gemini.AGENT:
            return Path(os.environ.get("GEMINI_CLI_HOME") or Path.home()) / ".gemini" / "tmp"
        return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "sessions"

    def is_session_file(self, root: Path, path: Path) -> bool:
        """Claude Code: `<root>/<encoded-cwd>/<id>.jsonl`, and sub-agents' transcripts
        (`<root>/<encoded-cwd>/<id>/subagents/agent-<agentId>.jsonl`; ≤ 2.0 `agent-*.jsonl`
        beside the sessions), which become child threads; Codex: `rollout-*.jsonl`
        anywhere under the root; Gemini CLI: `<root>/<project>/chats/session-*.jsonl`, or
        `.json` (up to 0.38), and sub-agents' sessions, `chats/<parent id>/<id>.jsonl`,
        which become child threads."""
        if self.agent == gemini.AGENT:
            if _gemini_subagent(root, path):
                return True
            named = path.name.startswith("session-") and path.suffix in (".jsonl", ".json")
            return named and path.parent.name == "chats" and path.parent.parent.parent == root
        if path.suffix != ".jsonl":
            return False
        if self.agent == claude_code.AGENT:
            if path.name.startswith("agent-acompact"):
                return False  # Claude Code's own compaction run: the conversation again
            return path.parent.parent == root or _project_of(path).parent == root
        return path.name.startswith("rollout-") and root in path.parents

    def could_hold_sessions(self, root: Path, directory: Path) -> bool:
        """Claude Code: a project folder (directly under the root); Codex and Gemini CLI
        (`<project>/chats/`): any folder."""
        return directory.parent == root if self.agent == claude_code.AGENT else True

    def session_files(self, root: Path) -> list[Path]:
        """Every session file under the root, and every link where one could be (a link
        to a file, or to a folder, which `os.walk` does not enter): the importer reports
        those (`symlink`) instead of reading them."""
        found = []
        for directory, folders, names in os.walk(root):
            for name in folders:
                path = Path(directory, name)
                if path.is_symlink() and self.could_hold_sessions(root, path):
                    found.append(path)
            for name in names:
                path = Path(directory, name)
                if self.is_session_file(root, path):
                    found.append(path)
        return sorted(found)

    def session_id(self, path: Path) -> str | None:
        """The id the agent resumes by: Claude Code's file name, Codex's trailing uuid,
        Gemini CLI's `sessionId` from the file's first line (its name has only 8
        characters of it); None while that line is not written whole."""
        stem = path.stem
        if self.agent == gemini.AGENT:
            return _gemini_session_id(path)
        if self.agent == codex.AGENT and len(stem) > 36:
            try:
                return str(uuid.UUID(stem[-36:]))
            except ValueError:
                pass
        return stem

    def fallback_cwd(self, path: Path) -> str:
        """Where a session ran when none of its lines says: Claude Code's folder name
        decoded (lossy: it spells `/` and `.` as `-`); Gemini CLI's project root as its
        store records it; else the file's folder."""
        folder = _project_of(path)
        if self.agent == claude_code.AGENT and folder.name.startswith("-"):
            return folder.name.replace("-", "/")
        if self.agent == gemini.AGENT:
            chats = path.parent.parent if path.parent.name != "chats" else path.parent
            return _gemini_project_root(chats.parent) or str(path.parent)
        return str(path.parent)

    def parent_session(self, path: Path) -> str | None:
        """The parent's session id where only the layout says it: a Gemini CLI sub-agent's
        folder, `chats/<parent sessionId>/`."""
        if self.agent == gemini.AGENT and path.parent.parent.name == "chats":
            return path.parent.name
        return None

    def parent_files(self, root: Path, path: Path, session: str) -> list[Path]:
        """Where the transcript of the parent session `session` (a plain name) of the
        sub-agent at `path` can be: Claude Code's `<id>.jsonl` beside the sub-agent (≤ 2.0)
        or above its `subagents/`; Codex's `rollout-*-<id>.jsonl`, beside the child (the
        same day's folder) else anywhere under the root; Gemini CLI's session files in the
        `chats/` above, named by the id's first 8 characters, whose first line has it."""
        if self.agent == claude_code.AGENT:
            return [_project_of(path) / f"{session}.jsonl"]
        if self.agent == codex.AGENT:
            name = re.compile(rf"rollout-.*-{re.escape(session)}\.jsonl")
            beside = [p for p in path.parent.iterdir() if name.fullmatch(p.name)]
            if beside or root not in path.parents:
                return sorted(beside)
            return sorted(
                Path(folder, file)
                for folder, _, files in os.walk(root)  # links to folders are not entered
                for file in files
                if name.fullmatch(file)
            )
        chats = path.parent.parent
        found = chats.glob(f"session-*-{glob_escape(session[:8])}.jsonl")
        return sorted(p for p in found if _gemini_session_id(p) == session)


SOURCES = {
    "claude": SourceKind("claude", claude_code.AGENT, claude_code.ClaudeCodeParser),
    "codex": SourceKind("codex", codex.AGENT, codex.CodexParser),
    "gemini": SourceKind("gemini", gemini.AGENT, gemini.GeminiParser, skip_itemless=True),
}
_GEMINI_SESSION_ID = re.compile(rb'"sessionId"\s*:\s*"([A-Za-z0-9][A-Za-z0-9._-]{0,127})"')
GEMINI_REGISTRY_BYTES = 4 << 20  # projects.json: one line per project Gemini CLI has seen


def _gemini_subagent(root: Path, path: Path) -> bool:
    """`<root>/<project>/chats/<parent sessionId>/<its sessionId>.jsonl`: a sub-agent's
    session (Gemini CLI's invoke_agent)."""
    return (path.suffix == ".jsonl" and path.parent.parent.name == "chats"
            and len(path.parents) > 3 and path.parents[3] == root)  # fmt: skip


def _gemini_session_id(path: Path) -> str | None:
    """`sessionId` of a Gemini session file: its first line's (JSONL), or near the top of
    the document (`.json`, where JSON.stringify puts it first)."""
    try:
        with open_source(str(path)) as handle:  # a link is not read, not even for its id
            head = handle.read(HEAD_BYTES)
    except OSError:
        return None
    if path.suffix == ".jsonl":
        line, newline, _ = head.partition(b"\n")
        if not newline:
            return None
        head = line
    found = _GEMINI_SESSION_ID.search(head)
    return found.group(1).decode() if found else None


def _gemini_project_root(project: Path) -> str | None:
    """The directory a Gemini CLI project folder (`tmp/<slug>`) is for: its `.project_root`
    marker, else `projects.json` (path → slug). A folder named by the path's sha256 (before
    February 2026, and migrated by any later run in that project) says nothing."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        with open_source(str(project / ".project_root")) as handle:  # never through a link
            marked = handle.read(HEAD_BYTES).decode("utf-8").strip()
        if marked.startswith("/") or (len(marked) > 2 and marked[1] == ":"):
            return marked
    try:
        with open_source(str(project.parent.parent / "projects.json")) as handle:
            registry = orjson.loads(handle.read(GEMINI_REGISTRY_BYTES))
    except (OSError, orjson.JSONDecodeError):
        return None
    projects = registry.get("projects") if isinstance(registry, dict) else None
    for root, slug in projects.items() if isinstance(projects, dict) else []:
        if slug == project.name:
            return str(root)
    return None


SIDECAR_BYTES = 64 << 10


def _project_of(path: Path) -> Path:
    """The Claude Code project folder a transcript is in: its own folder, or for a 2.1
    sub-agent's (`<project>/<sessionId>/subagents/agent-<id>.jsonl`) the one above."""
    nested = path.parent.name == "subagents" and path.name.startswith("agent-")
    return path.parents[2] if nested and len(path.parents) > 2 else path.parent


def sidecar_call(path: Path) -> str | None:
    """`toolUseId` from a Claude Code 2.1 sub-agent's `agent-<id>.meta.json` (a small
    regular file beside its transcript), if there is one."""
    sidecar = path.with_suffix(".meta.json")
    try:
        stat = sidecar.lstat()
        if not S_ISREG(stat.st_mode) or stat.st_size > SIDECAR_BYTES:
            return None
        data = orjson.loads(sidecar.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    call = data.get("toolUseId") if isinstance(data, dict) else None
    return call if isinstance(call, str) and call else None


def spawns_in(parent: Path, kind: SourceKind) -> dict[str, str]:
    """Sub-agent key → the tool call that started it, from a parent transcript (the
    agent parser's `spawns`). Only lines holding the parser's SPAWN_MARKERS are decoded;
    a line over LINE_BYTES is read past, never held; the file is opened without
    following a link."""
    found: dict[str, str] = {}
    markers = kind.parser.SPAWN_MARKERS
    if not markers:
        return found
    try:
        handle = open_source(str(parent))
    except OSError:
        return found
    with handle:
        while line := handle.readline(LINE_BYTES + 1):
            if len(line) > LINE_BYTES and not line.endswith(b"\n"):
                while (rest := handle.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
                continue
            if not all(marker in line for marker in markers):
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict):
                for key, call in kind.parser.spawns(record):
                    found.setdefault(key, call)
    return found
