"""Where OpenCode keeps its sessions: one SQLite database, `opencode.db` in its data folder
(`$XDG_DATA_HOME/opencode`, else `~/.local/share/opencode`; `$OPENCODE_DB` names another
file, absolute or in that folder). A session is a `session` row, `message` rows and their
`part` rows (each a JSON `data` column), a sub-agent's session a row whose `parent_id`
names its parent, and the todo list a `todo` table of its own.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from restore.agents.database import DatabaseSession, DatabaseStore
from restore.agents.opencode.parser import iso_ms

SESSION_COLUMNS = (
    "id",
    "parent_id",
    "directory",
    "title",
    "version",
    "time_created",
    "time_updated",
)


class OpenCodeDatabase(DatabaseStore):
    DATABASE = "opencode.db"
    APP = "opencode"
    DB_ENV = "OPENCODE_DB"
    ROOT_HELP = "$XDG_DATA_HOME/opencode (else ~/.local/share/opencode): opencode.db"

    def default_root(self) -> Path:
        named = os.environ.get(self.DB_ENV)
        if named and os.path.isabs(named):
            return Path(named).parent
        data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
        return Path(data) / self.APP

    def database(self, root: Path) -> Path:
        named = os.environ.get(self.DB_ENV)
        if named and named != ":memory:":
            return root / Path(named).name
        return root / self.DATABASE

    def touches(self, root: Path, path: Path) -> bool:
        name = self.database(root).name
        return path.parent == root and path.name in (name, f"{name}-wal")

    def sessions(self, db: sqlite3.Connection, database: Path) -> list[DatabaseSession]:
        """Every session with its change counter: `event_sequence.seq`, which every change
        to the session's messages and parts moves (the session row's `time_updated` does
        not: Kilo writes a turn's last parts without touching it). A database of an OpenCode
        before the event log has no such table: its sessions' rows are all there is."""
        counted = "event_sequence" in {
            name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        changes = "coalesce(e.seq, -1)" if counted else "-1"
        joined = "LEFT JOIN event_sequence e ON e.aggregate_id = s.id" if counted else ""
        try:
            rows = db.execute(
                f"SELECT s.id, s.time_updated, s.time_created, s.parent_id, {changes} "
                f"FROM session s {joined} ORDER BY s.time_created, s.id"
            ).fetchall()
        except sqlite3.DatabaseError:
            return []  # not (yet) an OpenCode database: no session table
        return [
            DatabaseSession(
                database,
                str(row[0]),
                int(row[1] or 0),
                int(row[2] or 0),
                row[3] if isinstance(row[3], str) and row[3] else None,
                int(row[4]),
            )
            for row in rows
            if isinstance(row[0], str)
        ]

    def records(
        self, db: sqlite3.Connection, session: DatabaseSession
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """The session row, then each message (oldest first) followed by its parts, then
        the todo table's list (keyed by its contents: a changed list is a new record)."""
        row = db.execute(
            f"SELECT {', '.join(SESSION_COLUMNS)} FROM session WHERE id = ?", (session.id,)
        ).fetchone()
        if row is None:
            return
        yield f"S:{session.id}", {"type": "session", **dict(zip(SESSION_COLUMNS, row, strict=True))}
        parts: dict[str, list[tuple[str, int, str]]] = {}
        for part_id, message_id, created, data in db.execute(
            "SELECT id, message_id, time_created, data FROM part WHERE session_id = ? ORDER BY id",
            (session.id,),
        ):
            parts.setdefault(message_id, []).append((part_id, created, data))
        for message_id, created, data in db.execute(
            "SELECT id, time_created, data FROM message WHERE session_id = ? ORDER BY id",
            (session.id,),
        ):
            message = _decoded(data)
            yield (
                message_id,
                {
                    **message,
                    "type": "message",
                    "id": message_id,
                    "timestamp": iso_ms(_time(message, "created") or created),
                },
            )
            for part_id, part_created, part_data in parts.pop(message_id, []):
                part = _decoded(part_data)
                start = _time(part, "start") or part_created
                yield (
                    part_id,
                    {
                        **part,
                        "kind": part.get("type"),
                        "type": "part",
                        "id": part_id,
                        "messageID": message_id,
                        "timestamp": iso_ms(start),
                    },
                )
        todos = [
            {"content": content, "status": status, "priority": priority}
            for content, status, priority in db.execute(
                "SELECT content, status, priority FROM todo WHERE session_id = ? ORDER BY position",
                (session.id,),
            )
        ]
        if todos:
            digest = hashlib.sha256(orjson.dumps(todos)).hexdigest()[:16]
            yield f"todo:{digest}", {"type": "todos", "todos": todos}

    def spawning_call(self, db: sqlite3.Connection, parent: str, child: str) -> str | None:
        """The parent's `task` call whose metadata names the child session."""
        for (data,) in db.execute(
            "SELECT data FROM part WHERE session_id = ? AND data LIKE ?",
            (parent, f"%{child}%"),
        ):
            part = _decoded(data)
            state = part.get("state")
            metadata = state.get("metadata") if isinstance(state, dict) else None
            if (
                isinstance(metadata, dict)
                and metadata.get("sessionId") == child
                and isinstance(part.get("callID"), str)
            ):
                return str(part["callID"])
        return None


def _decoded(data: Any) -> dict[str, Any]:
    try:
        value = orjson.loads(data) if isinstance(data, str | bytes) else None
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _time(record: dict[str, Any], key: str) -> int | None:
    time = record.get("time")
    value = time.get(key) if isinstance(time, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
