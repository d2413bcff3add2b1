"""Where Qwen Code keeps its sessions: `projects/` of its runtime folder (`$QWEN_RUNTIME_DIR`,
else `$QWEN_HOME`, else `~/.qwen`), one folder per project (its root with every
non-alphanumeric character as `-`) holding `chats/<sessionId>.jsonl` and its sub-agents'
transcripts, `subagents/<parent sessionId>/agent-<agentId>.jsonl`."""

from __future__ import annotations

import os
from pathlib import Path

from restore.agents.files import FileStore, Retention, settings_json, sidecar_field


class QwenCodeFiles(FileStore):
    ROOT_HELP = "$QWEN_RUNTIME_DIR/projects, else $QWEN_HOME/projects, else ~/.qwen/projects"

    def default_root(self) -> Path:
        base = (
            os.environ.get("QWEN_RUNTIME_DIR")
            or os.environ.get("QWEN_HOME")
            or Path.home() / ".qwen"
        )
        return Path(base) / "projects"

    def retention(self) -> Retention | None:
        """`general.cleanupPeriodDays` of the user's settings.json (30 by default): Qwen's
        daily housekeeping deletes background sub-agents' transcripts older than that."""
        path = Path(os.environ.get("QWEN_HOME") or Path.home() / ".qwen") / "settings.json"
        general = settings_json(path).get("general")
        days = general.get("cleanupPeriodDays", 30) if isinstance(general, dict) else 30
        if not isinstance(days, int | float) or isinstance(days, bool) or days < 0:
            days = 30
        return Retention(
            f"general.cleanupPeriodDays = {days:g} ({path})",
            days * 86_400.0,
            what="sub-agents' transcripts",
        )

    def retained(self, root: Path, path: Path) -> bool:
        return path.parent.parent.name == "subagents"

    def is_session_file(self, root: Path, path: Path) -> bool:
        """`<root>/<project>/chats/<id>.jsonl`, and sub-agents' transcripts,
        `<root>/<project>/subagents/<parent id>/agent-<agentId>.jsonl` (child threads)."""
        if path.suffix != ".jsonl" or len(path.parents) < 3:
            return False
        if path.parent.name == "chats":
            return path.parents[2] == root
        nested = path.parent.parent.name == "subagents" and path.name.startswith("agent-")
        return nested and len(path.parents) > 3 and path.parents[3] == root

    def fallback_cwd(self, path: Path) -> str:
        """The project folder's name decoded (lossy: `/` and `.` are both `-`)."""
        project = path.parents[1] if path.parent.name == "chats" else path.parents[2]
        return project.name.replace("-", "/") if project.name.startswith("-") else str(project)

    def parent_session(self, path: Path) -> str | None:
        """A sub-agent's folder, `subagents/<parent sessionId>/`."""
        return path.parent.name if path.parent.parent.name == "subagents" else None

    def parent_files(self, root: Path, path: Path, session: str) -> list[Path]:
        return [path.parents[2] / "chats" / f"{session}.jsonl"]

    def spawning_call_beside(self, path: Path) -> str | None:
        """`toolUseId` from the sub-agent's `agent-<id>.meta.json`."""
        call = sidecar_field(path, ".meta.json", "toolUseId")
        return call if isinstance(call, str) and call else None
