"""Derived files damaged or out of date: the index and snapshots are rebuilt or bypassed,
and nothing a user recorded is lost or changed."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from restore.stores.embedded.index import ThreadIndex
from tests.faults.helpers import Spawn, list_all, record, start, subsystem
from tests.support.items import message


@pytest.mark.parametrize("damage", ["delete", "garbage"])
def test_lost_index_is_rebuilt_with_progress(
    spawn: Spawn, tmp_path: Path, home: Path, damage: str
) -> None:
    server = spawn(env={"SESSIOND_DURABILITY": "none"})
    server.initialize()
    made = [start(server, tmp_path / f"w{n % 3}") for n in range(30)]
    before = list_all(server)
    server.shutdown()
    index = home / "index.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(str(index) + suffix).unlink(missing_ok=True)
    if damage == "garbage":
        index.write_bytes(os.urandom(8192))
    again = spawn()
    again.initialize()
    after = list_all(again)
    assert [t["threadId"] for t in after] == [t["threadId"] for t in before]
    assert {t["threadId"] for t in after} == {tid for tid, _ in made}
    kinds = [n["params"]["value"]["kind"] for n in again.wait_notification("$/progress", 2)]
    assert kinds[0] == "begin" and kinds[-1] == "end"


def test_index_from_an_older_schema_is_rebuilt_and_lists_the_same_threads(
    spawn: Spawn, tmp_path: Path, home: Path
) -> None:
    server = spawn(env={"SESSIOND_DURABILITY": "none"})
    server.initialize()
    made = [start(server, tmp_path / f"w{n % 2}", title=f"t{n}") for n in range(12)]
    before = list_all(server)
    server.shutdown()
    index = home / "index.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(str(index) + suffix).unlink(missing_ok=True)
    # Schema 1 had no costUsd; its rows are stale on purpose: one thread missing, one gone.
    old = sqlite3.connect(index)
    old.executescript(
        """
        CREATE TABLE threads (threadId TEXT PRIMARY KEY NOT NULL, title TEXT,
            preview TEXT NOT NULL, cwd TEXT, workspaceFolder TEXT, branch TEXT, headSha TEXT,
            createdAt TEXT, updatedAt TEXT NOT NULL, itemCount INTEGER NOT NULL,
            archived INTEGER NOT NULL, forkedFrom TEXT, lastSeq INTEGER NOT NULL,
            latestSessionId TEXT, path TEXT NOT NULL, size INTEGER NOT NULL,
            mtimeNs INTEGER NOT NULL);
        PRAGMA user_version = 1;
        """
    )
    with old:
        old.executemany(
            "INSERT INTO threads VALUES (?, ?, '', ?, NULL, NULL, NULL, ?, ?, 0, 0, NULL, 1,"
            " NULL, ?, 0, 0)",
            [(tid, "old", str(tmp_path), "2020", "2020", "/gone") for tid, _ in made[1:]]
            + [("6f1e5a70-0000-4000-8000-000000000000", "ghost", "/x", "2020", "2020", "/x")],
        )
    old.close()

    again = spawn()
    again.initialize()
    after = list_all(again)
    assert after == before
    kinds = [n["params"]["value"]["kind"] for n in again.wait_notification("$/progress", 2)]
    assert kinds[0] == "begin" and kinds[-1] == "end"
    again.shutdown()
    rebuilt = sqlite3.connect(index)
    try:
        assert rebuilt.execute("PRAGMA user_version").fetchone()[0] == ThreadIndex.SCHEMA_VERSION
    finally:
        rebuilt.close()
    assert not list(home.glob("index.sqlite3.corrupt-*"))  # old is not corrupt: nothing aside


def test_corrupt_snapshot_over_the_wire_falls_back_to_full_replay_with_the_same_state(
    spawn: Spawn, tmp_path: Path, home: Path
) -> None:
    server = spawn()
    server.initialize()
    tid, sid = start(server, tmp_path, model="gpt-5")
    record(
        server, tid, sid,
        {"type": "message", "role": "user", "content": "ship it", "turnId": "t1"},
        {"type": "todos", "items": [{"id": "1", "content": "keep me", "status": "pending"}]},
        {"type": "cost", "model": "gpt-5", "inputTokens": 10, "outputTokens": 5, "usd": 0.5},
        {"type": "operation", "operationId": "mail", "tool": "send_email",
         "effect": "side_effect", "state": "started"},
    )  # fmt: skip
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    snapshot = home / "snapshots" / tid[:2] / f"{tid}.json"
    good = server.request("thread/resume", {"threadId": tid})
    assert good["recovery"]["snapshotUsed"] is True
    server.request("thread/close", {"threadId": tid, "sessionId": good["session"]["sessionId"]})
    server.shutdown()
    snapshot.write_bytes(b"\x00{not a snapshot")

    again = spawn()
    again.initialize()
    replayed = again.request("thread/resume", {"threadId": tid})
    assert replayed["status"] == "ready"
    assert replayed["recovery"]["snapshotUsed"] is False
    assert replayed["recovery"]["snapshotProblem"].startswith("corrupt")
    for name in ("permissions", "model_override", "messages", "todos", "cost", "operations"):
        assert subsystem(replayed, name) == subsystem(good, name), name
    assert replayed["pendingOperations"] == good["pendingOperations"]
    assert replayed["messages"]["items"] == good["messages"]["items"]
    assert subsystem(replayed, "todos")["state"]["items"][0]["content"] == "keep me"


def _pages(server: object, tid: str) -> list[dict]:
    """A deep page, a near one, and a forward one: what a client scrolling around sees."""
    ask = server.request  # type: ignore[attr-defined]
    return [
        ask("thread/read", {"threadId": tid, "beforeSeq": 100, "limit": 50}),
        ask("thread/read", {"threadId": tid, "beforeSeq": 2**40, "limit": 50}),
        ask("thread/read", {"threadId": tid, "afterSeq": 1500, "limit": 50}),
    ]


@pytest.mark.parametrize("damage", ["delete", "garbage", "stale"])
def test_a_lost_or_wrong_offset_map_changes_no_page(
    spawn: Spawn, tmp_path: Path, home: Path, damage: str
) -> None:
    server = spawn(env={"SESSIOND_DURABILITY": "none"})
    server.initialize()
    tid, sid = start(server, tmp_path)
    for first in range(0, 2000, 500):
        record(
            server, tid, sid, *(message(f"m{n} " + "w" * 200) for n in range(first, first + 500))
        )
    server.shutdown()
    reader = spawn()
    reader.initialize()
    before = _pages(reader, tid)
    reader.shutdown()
    offsets = home / "snapshots" / tid[:2] / f"{tid}.offsets"
    assert offsets.exists(), "the map is kept beside the snapshot"
    if damage == "delete":
        offsets.unlink()
    elif damage == "garbage":
        offsets.write_bytes(os.urandom(4096))
    else:  # well formed and verified against the file, but every anchor off by a byte
        wrong = json.loads(offsets.read_bytes())
        wrong["offsets"] = [offset + 1 for offset in wrong["offsets"]]
        offsets.write_text(json.dumps(wrong))
    again = spawn()
    again.initialize()
    assert _pages(again, tid) == before
    assert [i["content"].split()[0] for i in before[0]["items"] if i["type"] == "message"] == [
        f"m{n}" for n in range(48, 98)
    ]
