"""Where Codex keeps its sessions: `$CODEX_HOME/sessions`, else `~/.codex/sessions`,
`YYYY/MM/DD/rollout-<time>-<session uuid>.jsonl`."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

from restore.agents.files import FileStore


class CodexFiles(FileStore):
    ROOT_HELP = "$CODEX_HOME/sessions, else ~/.codex/sessions"

    def default_root(self) -> Path:
        return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "sessions"

    def is_session_file(self, root: Path, path: Path) -> bool:
        """`rollout-*.jsonl` anywhere under the root."""
        return path.suffix == ".jsonl" and path.name.startswith("rollout-") and root in path.parents

    def session_id(self, path: Path) -> str | None:
        """The file name's trailing uuid."""
        stem = path.stem
        if len(stem) > 36:
            try:
                return str(uuid.UUID(stem[-36:]))
            except ValueError:
                pass
        return stem

    def parent_files(self, root: Path, path: Path, session: str) -> list[Path]:
        """`rollout-*-<id>.jsonl`, beside the child (the same day's folder) else anywhere
        under the root."""
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
