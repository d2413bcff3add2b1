"""Where GitHub Copilot CLI keeps its sessions: `session-state/` of its home (`$COPILOT_HOME`,
else `~/.copilot`), a folder per session, `<sessionId>/`, holding `events.jsonl` (every
event, sub-agents' too), `workspace.yaml` (where it ran, its name) and, once the agent
kept a todo list, `session.db` (SQLite: `todos`)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import orjson

from restore.agents.database import snapshot
from restore.agents.files import FileStore
from restore.imports.parse import HEAD_BYTES, open_source

EVENTS = "events.jsonl"


class CopilotFiles(FileStore):
    ROOT_HELP = "$COPILOT_HOME/session-state, else ~/.copilot/session-state"

    def default_root(self) -> Path:
        return Path(os.environ.get("COPILOT_HOME") or Path.home() / ".copilot") / "session-state"

    def is_session_file(self, root: Path, path: Path) -> bool:
        """`<root>/<sessionId>/events.jsonl`."""
        return path.name == EVENTS and path.parent.parent == root

    def could_hold_sessions(self, root: Path, directory: Path) -> bool:
        return directory.parent == root and not directory.name.startswith(".")

    def session_id(self, path: Path) -> str | None:
        """The session's folder's name (its id)."""
        return path.parent.name

    def fallback_cwd(self, path: Path) -> str:
        """`cwd` of `workspace.yaml` beside it (its first lines; a plain `key: value`
        each), else the session's folder."""
        with contextlib.suppress(OSError, UnicodeDecodeError):
            with open_source(str(path.parent / "workspace.yaml")) as handle:
                head = handle.read(HEAD_BYTES).decode("utf-8")
            for line in head.splitlines():
                key, _, value = line.partition(":")
                if key == "cwd" and value.strip().startswith("/"):
                    return value.strip().strip("'\"")
        return str(path.parent)

    def trailer(self, path: Path) -> tuple[tuple[str, dict[str, Any]], ...]:
        """The todo list, from the session's `session.db` (read from a copy, WAL and
        all, as a database store is): one record named by its contents."""
        database = path.parent / "session.db"
        if not database.exists():
            return ()
        with tempfile.TemporaryDirectory(prefix="sessiond-import-") as folder:
            copy = snapshot(database, Path(folder))
            if copy is None:
                return ()
            try:
                with contextlib.closing(sqlite3.connect(copy)) as db:
                    rows = db.execute(
                        "SELECT id, title, status FROM todos ORDER BY rowid"
                    ).fetchall()
            except sqlite3.DatabaseError:
                return ()  # no todo table (yet), or not a database
        todos = [{"id": str(i), "title": str(t), "status": str(s)} for i, t, s in rows]
        key = "todo:" + hashlib.sha256(orjson.dumps(todos)).hexdigest()[:16]
        return ((key, {"type": "todos", "data": {"todos": todos}}),)
