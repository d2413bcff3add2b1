"""The index is a cache, and behaves like one: whatever is wrong with `index.sqlite3` (or
the import ledger), no read fails. A damaged file is set aside (kept, a bounded number of
copies) and built again from the thread files, and the request that met the damage is
answered from the rebuild: by the command line, by a server opening it, and by a server
that has it open when it goes bad."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from restore.home.caches import KEEP_ASIDE
from restore.stores.embedded.index import ThreadIndex
from tests.faults.helpers import Spawn, list_all, record, sessiond, start
from tests.support.import_fixtures import Fixture
from tests.support.rpc_client import REPO, ServerProcess
from tests.support.wait import eventually
from tests.test_import import fixture, import_both, thread_files  # noqa: F401 (a fixture)

OLD_TRIGGERS = """
DROP TRIGGER search_thread_added;
DROP TRIGGER search_thread_changed;
CREATE TRIGGER search_thread_added AFTER INSERT ON threads BEGIN
    INSERT OR IGNORE INTO search_dirty VALUES (new.threadId);
END;
CREATE TRIGGER search_thread_changed AFTER UPDATE ON threads
WHEN new.size IS NOT old.size OR new.path IS NOT old.path
  OR new.lastLineSha IS NOT old.lastLineSha BEGIN
    INSERT OR IGNORE INTO search_dirty VALUES (new.threadId);
END;
UPDATE search_meta SET version = 1;
PRAGMA user_version = 6;
"""
"""What the previous release left in every index a search had run on: the triggers whose
INSERT OR IGNORE an UPSERT of the listing rows turned into `UNIQUE constraint failed:
search_dirty.threadId`, failing every command after a search and two writes."""


def _sql(index: Path, script: str) -> None:
    conn = sqlite3.connect(index)
    try:
        conn.executescript(script)
    finally:
        conn.close()


def _files(index: Path) -> Iterator[Path]:
    for suffix in ("", "-wal", "-shm"):
        yield Path(f"{index}{suffix}")


def _checkpointed(index: Path) -> None:
    """Everything in the main file (no WAL left), as after a clean close."""
    _sql(index, "PRAGMA wal_checkpoint(TRUNCATE);")


def deleted(index: Path) -> None:
    for path in _files(index):
        path.unlink(missing_ok=True)


def garbage(index: Path) -> None:
    deleted(index)
    index.write_bytes(os.urandom(16384))


def cut_in_half(index: Path) -> None:
    _checkpointed(index)
    with open(index, "r+b") as out:
        out.truncate(os.path.getsize(index) // 2)


def previous_release(index: Path) -> None:
    _sql(index, OLD_TRIGGERS)


def broken_constraint(index: Path) -> None:
    """A trigger another version left that fails every write of a listing row."""
    _sql(index, "CREATE TRIGGER boom AFTER UPDATE ON threads BEGIN "
                "SELECT RAISE(ABORT, 'not this version''s row'); END;")  # fmt: skip


def missing_table(index: Path) -> None:
    _sql(index, "DROP TABLE meta;")


def other_version(index: Path) -> None:
    _sql(index, "PRAGMA user_version = 99;")


def undecodable_row(index: Path) -> None:
    _sql(index, "UPDATE threads SET origin = '{not json';")


def search_tables_gone(index: Path) -> None:
    _sql(index, "DROP TABLE search_covered;")


def search_index_garbled(index: Path) -> None:
    """The full-text index's own pages (which no listing reads) hold garbage."""
    _sql(index, "UPDATE search_fts_data SET block = randomblob(length(block)) WHERE id > 10;")


DAMAGE: dict[str, Callable[[Path], None]] = {
    f.__name__: f for f in (deleted, garbage, cut_in_half, previous_release, broken_constraint)
}
DAMAGE.update((f.__name__, f) for f in (missing_table, other_version, undecodable_row))
DAMAGE.update((f.__name__, f) for f in (search_tables_gone, search_index_garbled))
SET_ASIDE = {"garbage", "cut_in_half", "broken_constraint", "missing_table", "undecodable_row"}
SET_ASIDE.add("search_tables_gone")  # the listing rows' triggers name the table
"""Damage the file is kept for, beside the rebuilt one (a file of another version is
rebuilt without a copy; a garbled full-text index is dropped and built again)."""


def _message(word: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": f"remember {word} please"}


class World:
    """Two threads with a word each, recorded and searched (so the search tables and their
    triggers exist), by a server on `home`."""

    def __init__(self, spawn: Spawn, home: Path, workspace: Path) -> None:
        self.spawn, self.home, self.workspace = spawn, home, workspace
        self.words: dict[str, list[str]] = {}
        server = self.server()
        for _ in range(2):
            tid, sid = start(server, workspace)
            word = f"w{uuid.uuid4().hex[:10]}"
            record(server, tid, sid, _message(word))
            self.words[tid] = [word]
        assert self.found(server, next(iter(self.words.values()))[0])
        server.shutdown()

    def server(self) -> ServerProcess:
        server = self.spawn()
        server.initialize([str(self.workspace)])
        return server

    @staticmethod
    def found(server: ServerProcess, word: str) -> set[str]:
        hits = server.request("thread/search", {"query": word, "limit": 50})["hits"]
        return {hit["threadId"] for hit in hits}

    def cycle(self, server: ServerProcess) -> None:
        """Record → search → record → record on one thread: what bricked the index."""
        tid = next(iter(self.words))
        sid = server.request("thread/resume", {"threadId": tid})["session"]["sessionId"]
        for n in range(3):
            word = f"c{n}{uuid.uuid4().hex[:10]}"
            record(server, tid, sid, _message(word))
            self.words[tid].append(word)
            if n == 0:
                assert self.found(server, word) == {tid}
        for thread, words in self.words.items():
            for word in words:
                assert self.found(server, word) == {thread}
        assert {t["threadId"] for t in list_all(server)} == set(self.words)

    def check_cli(self) -> str:
        """`list`, `search` and `doctor` from the command line: exit 0, right answers. What
        they said on stderr (where a set-aside is said)."""
        said = []
        listed = sessiond(self.home, "list")
        assert listed.returncode == 0, listed.stderr
        said.append(listed.stderr)
        for tid in self.words:
            assert tid in listed.stdout
        for tid, words in self.words.items():
            found = sessiond(self.home, "search", words[-1])
            assert found.returncode == 0, found.stderr
            assert tid[:8] in found.stdout
            said.append(found.stderr)
        doctor = sessiond(self.home, "doctor")
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        said.append(doctor.stderr)
        return "".join(said)


@pytest.fixture
def world(spawn: Spawn, home: Path, tmp_path: Path) -> World:
    return World(spawn, home, tmp_path / "ws")


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_server_answers_from_the_rebuilt_index_whatever_was_wrong_with_it(
    world: World, home: Path, damage: str
) -> None:
    DAMAGE[damage](home / "index.sqlite3")
    server = world.server()
    assert {t["threadId"] for t in list_all(server)} == set(world.words)
    world.cycle(server)
    said = server.stderr()
    server.shutdown()
    assert said.count("set aside") == (damage in SET_ASIDE), said
    assert said.count("search index") == (damage == "search_index_garbled"), said
    if damage in SET_ASIDE:
        assert list(home.glob("index.sqlite3.corrupt-*")), said
        assert said.count("set aside") == 1, said


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_the_command_line_answers_from_the_rebuilt_index_whatever_was_wrong_with_it(
    world: World, home: Path, damage: str
) -> None:
    DAMAGE[damage](home / "index.sqlite3")
    said = world.check_cli()
    server = world.server()
    world.cycle(server)  # the damage a write meets (a trigger) is met here at the latest
    said += server.stderr()
    server.shutdown()
    said += world.check_cli()
    assert said.count("set aside") == (damage in SET_ASIDE), said  # one line says so


def test_an_index_damaged_under_a_running_server_heals_without_a_failed_request(
    world: World, home: Path
) -> None:
    server = world.server()
    assert len(list_all(server)) == 2
    broken_constraint(home / "index.sqlite3")  # as another version would, while we run
    world.cycle(server)
    assert server.stderr().count("set aside") == 1
    server.shutdown()
    world.check_cli()


@pytest.mark.parametrize("version", [6, 7, 8])
def test_an_earlier_release_s_index_is_rebuilt_from_the_files_not_set_aside(
    world: World, home: Path, version: int
) -> None:
    """Schema 6 (with the triggers that bricked it), 7 (before session keys) and 8 (before
    the usage tables): older, not damaged, so rebuilt from the thread files without a copy
    kept, every answer right."""
    index = home / "index.sqlite3"
    previous_release(index)
    if version > 6:
        _sql(index, f"PRAGMA user_version = {version};")
    before = os.stat(index).st_ino
    said = world.check_cli()
    server = world.server()
    world.cycle(server)
    said += server.stderr()
    server.shutdown()
    assert os.stat(index).st_ino != before  # a new file, built from the thread files
    assert not list(home.glob("index.sqlite3.corrupt-*"))
    assert "set aside" not in said
    conn = sqlite3.connect(index)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == ThreadIndex.SCHEMA_VERSION
    finally:
        conn.close()


def test_copies_set_aside_are_bounded(world: World, home: Path) -> None:
    for _ in range(KEEP_ASIDE + 3):
        garbage(home / "index.sqlite3")
        world.check_cli()
    kept = {
        p.name.split(".corrupt-")[1].split("-")[0] for p in home.glob("index.sqlite3.corrupt-*")
    }
    assert len(kept) == KEEP_ASIDE


def test_doctor_rebuild_index_builds_it_again_from_the_thread_files(
    world: World, home: Path
) -> None:
    index = home / "index.sqlite3"
    _sql(index, "CREATE TABLE left_from_before (x);")
    done = sessiond(home, "doctor", "--rebuild-index")
    assert done.returncode == 0, done.stderr
    assert "index: rebuilt, 2 threads" in done.stdout
    conn = sqlite3.connect(index)
    try:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert "threads" in tables and "left_from_before" not in tables
    assert not list(home.glob("index.sqlite3.corrupt-*"))  # asked for: nothing was wrong
    world.check_cli()


def test_a_running_server_follows_an_index_another_process_rebuilt(
    world: World, home: Path
) -> None:
    """A connection left on the replaced file would write rows nobody reads again."""
    server = world.server()
    assert len(list_all(server)) == 2
    assert sessiond(home, "doctor", "--rebuild-index").returncode == 0
    world.cycle(server)  # its rows land in the new file: the command line sees them
    server.shutdown()
    world.check_cli()


def test_the_readme_sequence_twice_in_one_home_never_fails(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    """The trigger as a newcomer met it: start, list and search, then the same again."""
    for _ in range(3):
        server = spawn()
        server.initialize([str(tmp_path)])
        tid, sid = start(server, tmp_path, title="demo")
        record(server, tid, sid, _message("demo"))
        assert server.request("thread/list", {"workspaceFolder": str(tmp_path)})["threads"]
        server.shutdown()
        for command in (["list"], ["search", "demo"], ["doctor"], ["doctor", "--repair"]):
            done = sessiond(home, *command)
            assert done.returncode == 0, (command, done.stdout, done.stderr)


LEDGER_DAMAGE: dict[str, Callable[[Path], None]] = {
    "deleted": deleted,
    "garbage": garbage,
    "cut_in_half": cut_in_half,
    "undecodable_row": lambda path: _sql(path, "UPDATE sources SET parser = '{not json';"),
    "other_schema": lambda path: _sql(path, "ALTER TABLE sources DROP COLUMN tailSha;"),
}


@pytest.mark.parametrize("damage", sorted(LEDGER_DAMAGE))
def test_a_damaged_import_ledger_imports_nothing_twice(
    fixture: Fixture,  # noqa: F811
    home: Path,
    damage: str,
) -> None:
    import_both(home, fixture)
    files = thread_files(home)
    LEDGER_DAMAGE[damage](home / "imports.sqlite3")
    claude, codex = import_both(home, fixture)
    assert (claude["created"], claude["items"], codex["created"], codex["items"]) == (0, 0, 0, 0)
    assert thread_files(home) == files
    again, _ = import_both(home, fixture)  # and the ledger is whole again
    assert again["unchanged"] == claude["unchanged"]


def test_a_build_in_progress_elsewhere_is_waited_for_not_raced(
    world: World, home: Path, tmp_path: Path
) -> None:
    """A command builds the missing index while a server lists: the server waits for it
    and opens what it built. Two builds at once each deleted the WAL the other's
    connection wrote (SQLite's "disk I/O error" reached a client, kind StorageError)."""
    deleted(home / "index.sqlite3")
    pause = tmp_path / "pause"
    pause.mkdir()
    building = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "--home", str(home), "list"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "SESSIOND_PAUSE_AT": f"index-build:{pause}"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        eventually(lambda: (pause / "index-build.reached").exists(), "the build paused")
        server = world.server()
        listing = server.request_async("thread/list", {"limit": 200})
        (pause / "index-build.go").touch()
        out, err = building.communicate(timeout=120)
    finally:
        (pause / "index-build.go").touch()
        building.wait(timeout=120)
    assert building.returncode == 0, err
    assert all(tid in out for tid in world.words)
    reply = server.response(listing)
    assert {t["threadId"] for t in reply["result"]["threads"]} == set(world.words), reply
    world.cycle(server)
    server.shutdown()
    world.check_cli()


def test_processes_building_a_missing_index_at_once_all_answer(world: World, home: Path) -> None:
    """Several first listings at once on a home without an index: one builds it, the
    others wait and open what it built (two builds at once deleted each other's WAL:
    SQLite's "disk I/O error" reached a client)."""
    server = world.server()  # a live writer beside them, its own connection open
    assert len(list_all(server)) == 2
    for _ in range(5):
        deleted(home / "index.sqlite3")
        running = [
            subprocess.Popen(
                [sys.executable, "-m", "server.cli", "--home", str(home), "list"],
                cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            for _ in range(4)
        ]  # fmt: skip
        world.cycle(server)
        for process in running:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
            assert all(tid in out for tid in world.words)
    server.shutdown()
    world.check_cli()
