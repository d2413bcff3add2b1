"""A database store (OpenCode's `opencode.db`) is read from a private copy that holds its
write-ahead log: the rows the agent has not checkpointed into the database file yet are
imported, and the agent's files are left exactly as they were.

The database here is written the way OpenCode writes one (WAL mode, a connection held open,
so the newest rows live only in `opencode.db-wal`); its rows have OpenCode's shapes. What
the real OpenCode writes is tests/compat/test_opencode.py's."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from restore.agents.database import snapshot
from tests.test_cli import sessiond

SCHEMA = """
CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT, slug TEXT,
  directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT NOT NULL,
  time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
  time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,
  time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE todo (session_id TEXT NOT NULL, content TEXT NOT NULL, status TEXT NOT NULL,
  priority TEXT NOT NULL, position INTEGER NOT NULL, time_created INTEGER NOT NULL,
  time_updated INTEGER NOT NULL, PRIMARY KEY (session_id, position));
"""
T0 = 1_796_188_864_502


@pytest.fixture
def agent_db(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    """OpenCode's data folder with its database open for writing, as while it runs."""
    data = tmp_path / "opencode"
    data.mkdir()
    db = sqlite3.connect(data / "opencode.db", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.executescript(SCHEMA)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the tables in the file, as at install
    db.execute("PRAGMA wal_autocheckpoint = 0")  # from here on rows stay in the WAL
    try:
        yield data, db
    finally:
        db.close()


def add_session(db: sqlite3.Connection, cwd: Path, session: str = "ses_1", n: int = 0) -> None:
    at = T0 + n * 1000
    db.execute("INSERT INTO session VALUES (?, 'p', NULL, 's', ?, 'Counting files', '1.18.33', "
               "?, ?)", (session, str(cwd), at, at + 900))  # fmt: skip
    messages = [
        (f"msg_{n}a", {"role": "user", "time": {"created": at + 1}}),
        (f"msg_{n}b", {"role": "assistant", "modelID": "gpt-4.1", "providerID": "openai",
                       "time": {"created": at + 2, "completed": at + 800}}),
    ]  # fmt: skip
    for message_id, data in messages:
        db.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                   (message_id, session, at, at, json.dumps(data)))  # fmt: skip
    parts: list[tuple[str, str, dict[str, Any]]] = [
        (f"prt_{n}1", f"msg_{n}a", {"type": "text", "text": "count the files"}),
        (f"prt_{n}2", f"msg_{n}b", {"type": "text", "text": "There are three.",
                                    "time": {"start": at + 3, "end": at + 4}}),
        (f"prt_{n}3", f"msg_{n}b", {"type": "step-finish", "cost": 0.0031,
                                    "tokens": {"input": 1200, "output": 60, "reasoning": 0,
                                               "cache": {"read": 0, "write": 0}}}),
    ]  # fmt: skip
    for part_id, message_id, data in parts:
        db.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                   (part_id, message_id, session, at, at, json.dumps(data)))  # fmt: skip


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_rows_only_the_wal_holds_are_imported_and_the_agents_files_are_left_as_they_were(
    agent_db: tuple[Path, sqlite3.Connection], home: Path, tmp_path: Path
) -> None:
    data, db = agent_db
    add_session(db, tmp_path)
    in_file = sqlite3.connect(f"file:{data / 'opencode.db'}?immutable=1", uri=True)
    assert in_file.execute("SELECT count(*) FROM session").fetchone() == (0,)  # WAL only
    in_file.close()
    before = digests(data)
    done = sessiond(home, "import", "opencode", "--from", str(data), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["created"], summary["unmapped"]) == (1, {})
    assert digests(data) == before  # not a byte of the database, its WAL or its -shm
    listed = sessiond(home, "list", "--json")
    (thread,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert thread["origin"] == {"agent": "opencode", "sessionId": "ses_1", "revision": 1,
                                "path": f"{data / 'opencode.db'}#ses_1"}  # fmt: skip
    assert (thread["title"], thread["cwd"]) == ("Counting files", str(tmp_path))
    shown = sessiond(home, "show", thread["threadId"])
    assert "count the files" in shown.stdout and "There are three." in shown.stdout


def test_a_session_gone_from_the_database_stays_whole_and_a_new_one_is_added(
    agent_db: tuple[Path, sqlite3.Connection], home: Path, tmp_path: Path
) -> None:
    data, db = agent_db
    add_session(db, tmp_path)
    assert json.loads(sessiond(home, "import", "opencode", "--from", str(data),
                               "--json").stdout)["created"] == 1  # fmt: skip
    first = sessiond(home, "show", "--json", *json.loads(
        sessiond(home, "list", "--json").stdout)["threadId"].split())  # fmt: skip
    db.execute("DELETE FROM part")
    db.execute("DELETE FROM message")
    db.execute("DELETE FROM session")  # OpenCode deleted it (or pruned it)
    add_session(db, tmp_path, "ses_2", 1)
    summary = json.loads(sessiond(home, "import", "opencode", "--from", str(data),
                                  "--json").stdout)  # fmt: skip
    assert (summary["sessions"], summary["created"], summary["updated"]) == (1, 1, 0)
    threads = [json.loads(line) for line in sessiond(home, "list", "--json").stdout.splitlines()]
    assert sorted(t["origin"]["sessionId"] for t in threads) == ["ses_1", "ses_2"]
    (kept,) = [t for t in threads if t["origin"]["sessionId"] == "ses_1"]
    assert sessiond(home, "show", "--json", kept["threadId"]).stdout == first.stdout


def test_the_copy_is_taken_again_when_a_checkpoint_restarts_the_wal_meanwhile(
    agent_db: tuple[Path, sqlite3.Connection], tmp_path: Path
) -> None:
    """A copy of the database file alone misses the WAL's rows; a WAL restarted between
    the two files' copies would pair a new WAL with an old database: the WAL's header is
    looked at before and after, and the copy taken again when it changed."""
    data, db = agent_db
    add_session(db, tmp_path)
    copies = tmp_path / "copies"
    copies.mkdir()
    copy = snapshot(data / "opencode.db", copies)
    assert copy is not None
    with sqlite3.connect(copy) as read:
        assert read.execute("SELECT id FROM session").fetchall() == [("ses_1",)]
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # OpenCode checkpoints, and goes on
    add_session(db, tmp_path, "ses_2", 1)
    copy = snapshot(data / "opencode.db", copies)
    assert copy is not None
    with sqlite3.connect(copy) as read:
        assert read.execute("SELECT id FROM session ORDER BY id").fetchall() == [
            ("ses_1",), ("ses_2",)]  # fmt: skip
    (data / "elsewhere.db").write_bytes(b"")
    (data / "opencode.db").rename(data / "moved.db")
    (data / "opencode.db").symlink_to(data / "elsewhere.db")
    assert snapshot(data / "opencode.db", copies) is None  # a link is never followed
