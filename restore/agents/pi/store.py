"""Where Pi keeps its sessions: `sessions/` of its agent folder (`$PI_CODING_AGENT_SESSION_DIR`,
else `$PI_CODING_AGENT_DIR/sessions`, else `~/.pi/agent/sessions`), a folder per working
directory (`--<the path, its separators as ->--`) holding `<time>_<sessionId>.jsonl`."""

from __future__ import annotations

import os
from pathlib import Path

from restore.agents.files import FileStore
from restore.agents.pi.parser import session_of


class PiFiles(FileStore):
    ROOT_HELP = (
        "$PI_CODING_AGENT_SESSION_DIR, else $PI_CODING_AGENT_DIR/sessions, "
        "else ~/.pi/agent/sessions"
    )

    def default_root(self) -> Path:
        if sessions := os.environ.get("PI_CODING_AGENT_SESSION_DIR"):
            return Path(sessions)
        agent = os.environ.get("PI_CODING_AGENT_DIR") or Path.home() / ".pi" / "agent"
        return Path(agent) / "sessions"

    def is_session_file(self, root: Path, path: Path) -> bool:
        """`<root>/<encoded cwd>/<time>_<id>.jsonl`."""
        return (
            path.suffix == ".jsonl"
            and path.parent.parent == root
            and session_of(path.name) is not None
        )

    def could_hold_sessions(self, root: Path, directory: Path) -> bool:
        return directory.parent == root

    def session_id(self, path: Path) -> str | None:
        """The id after the time in the file's name."""
        return session_of(path.name)

    def fallback_cwd(self, path: Path) -> str:
        """The folder's name decoded (lossy: `-` stands for the separators, and itself)."""
        name = path.parent.name
        if name.startswith("--") and name.endswith("--"):
            return "/" + name[2:-2].replace("-", "/")
        return str(path.parent)
