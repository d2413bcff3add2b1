"""Where Claude Code keeps its sessions: `$CLAUDE_CONFIG_DIR/projects`, else
`~/.claude/projects`, one folder per project (its cwd with every non-alphanumeric character
as `-`) holding `<sessionId>.jsonl`, and its sub-agents' transcripts."""

from __future__ import annotations

import os
from pathlib import Path

from restore.agents.files import FileStore, Retention, settings_json, sidecar_field

DAY = 86_400.0


class ClaudeCodeFiles(FileStore):
    ROOT_HELP = "$CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects"

    def default_root(self) -> Path:
        return self._config() / "projects"

    def _config(self) -> Path:
        return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")

    def retention(self) -> Retention | None:
        """`cleanupPeriodDays` of the user's settings.json (30 by default): Claude Code
        deletes, at startup and without a word, transcripts older than that."""
        path = self._config() / "settings.json"
        days = settings_json(path).get("cleanupPeriodDays", 30)
        if not isinstance(days, int | float) or isinstance(days, bool) or days < 0:
            days = 30
        return Retention(f"cleanupPeriodDays = {days:g} ({path})", days * DAY)

    def is_session_file(self, root: Path, path: Path) -> bool:
        """`<root>/<encoded-cwd>/<id>.jsonl`, and sub-agents' transcripts
        (`<root>/<encoded-cwd>/<id>/subagents/agent-<agentId>.jsonl`; ≤ 2.0 `agent-*.jsonl`
        beside the sessions), which become child threads."""
        if path.suffix != ".jsonl":
            return False
        if path.name.startswith("agent-acompact"):
            return False  # Claude Code's own compaction run: the conversation again
        return path.parent.parent == root or _project_of(path).parent == root

    def could_hold_sessions(self, root: Path, directory: Path) -> bool:
        """A project folder (directly under the root)."""
        return directory.parent == root

    def fallback_cwd(self, path: Path) -> str:
        """The folder name decoded (lossy: it spells `/` and `.` as `-`)."""
        folder = _project_of(path)
        if folder.name.startswith("-"):
            return folder.name.replace("-", "/")
        return str(path.parent)

    def parent_files(self, root: Path, path: Path, session: str) -> list[Path]:
        """`<id>.jsonl` beside the sub-agent (≤ 2.0) or above its `subagents/`."""
        return [_project_of(path) / f"{session}.jsonl"]

    def spawning_call_beside(self, path: Path) -> str | None:
        """`toolUseId` from a 2.1 sub-agent's `agent-<id>.meta.json` (a small regular file
        beside its transcript), if there is one."""
        call = sidecar_field(path, ".meta.json", "toolUseId")
        return call if isinstance(call, str) and call else None


def _project_of(path: Path) -> Path:
    """The project folder a transcript is in: its own folder, or for a 2.1 sub-agent's
    (`<project>/<sessionId>/subagents/agent-<id>.jsonl`) the one above."""
    nested = path.parent.name == "subagents" and path.name.startswith("agent-")
    return path.parents[2] if nested and len(path.parents) > 2 else path.parent
