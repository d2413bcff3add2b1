"""Storage failures outside the thread file: derived files that cannot be written never
fail a durable record, and every filesystem error a client sees is typed and names its path.

Real failures on a real server: a snapshot directory that is a file, an index on a full
tmpfs (or, where mounting is impossible, a read-only one), directories made unreadable or
unwritable with chmod. Root would read through chmod, so those servers run without the
capabilities that bypass file permissions (tests/support/confine.py), as any other user does.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.helpers import Spawn, list_all, record, start, thread_file
from tests.support import disks
from tests.support.confine import bound_by_permissions, unreadable
from tests.support.items import message
from tests.support.rpc_client import RpcError, ServerProcess

PAUSE = 0.6  # past INDEX_FLUSH_SECONDS: the next record flushes the index rows


@pytest.fixture
def small_disk_or_none(tmp_path: Path) -> Iterator[Path | None]:
    """A real 512 KiB tmpfs where this user may mount one (root); None elsewhere, where
    the index test makes the index read-only instead (a real failure of SQLite too)."""
    if os.geteuid() != 0:
        yield None
        return
    with disks.small_disk(tmp_path) as mount_point:
        yield mount_point


def test_a_snapshot_that_cannot_be_written_never_fails_a_record(
    server: ServerProcess, home: Path, tmp_path: Path
) -> None:
    tid, sid = start(server, tmp_path)
    shard = home / "snapshots" / tid[:2]
    shard.parent.mkdir(parents=True, exist_ok=True)
    shard.write_text("a file where the snapshot directory should be")
    batch = [message(f"m{n}") for n in range(1000)]  # the 1000th item since start: a snapshot
    done = record(server, tid, sid, *batch)
    assert (done["firstSeq"], done["lastSeq"]) == (2, 1001)
    assert record(server, tid, sid, message("after"))["lastSeq"] == 1002
    assert "snapshot not written" in server.stderr()
    shard.unlink()  # the directory can be made again: the close's snapshot is written
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    report = server.request("thread/resume", {"threadId": tid})
    assert report["recovery"]["snapshotUsed"] is True
    assert report["messages"]["total"] == 1001


def test_an_index_that_cannot_be_written_never_fails_a_record(
    spawn: Spawn,
    home: Path,
    tmp_path: Path,
    small_disk_or_none: Path | None,
) -> None:
    small_disk = small_disk_or_none
    first = spawn()
    first.initialize()
    tid, sid = start(first, tmp_path)
    first.request("thread/close", {"threadId": tid, "sessionId": sid})
    before = list_all(first)[0]["itemCount"]
    assert first.shutdown() == 0
    index = home / "index.sqlite3"
    if small_disk is not None:  # the index on a small tmpfs: SQLite "disk is full", for real
        (small_disk / index.name).write_bytes(index.read_bytes())
        index.unlink()
        index.symlink_to(small_disk / index.name)
    server = spawn()
    server.initialize()
    sid = server.request("thread/resume", {"threadId": tid})["session"]["sessionId"]
    assert list_all(server)[0]["itemCount"] == before  # the index is open
    if small_disk is not None:
        filler = disks.fill(small_disk)
    else:  # no mount here: an index this user may not write ("readonly database")
        for name in ("index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm"):
            (home / name).chmod(0o444)
    for n in range(3):
        time.sleep(PAUSE)
        big = message(f"{n} " + "x" * 20_000)  # rows that need new pages
        assert record(server, tid, sid, big)["duplicates"] == 0
    assert "index rows not written" in server.stderr()
    if small_disk is not None:
        filler.unlink()
    else:
        for name in ("index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm"):
            (home / name).chmod(0o600)
    time.sleep(PAUSE)
    record(server, tid, sid, message("space again"))
    # The rows left pending were written with a later flush.
    assert list_all(server)[0]["itemCount"] > before + 3


def _threads_in_two_shards(server: ServerProcess, work: Path) -> tuple[list[str], list[str]]:
    """Start threads until two shards are used; returns (one shard's, the others')."""
    made: list[str] = []
    while len({tid[:2] for tid in made}) < 2:
        tid, sid = start(server, work)
        record(server, tid, sid, message(f"hello {tid}"))
        server.request("thread/close", {"threadId": tid, "sessionId": sid})
        made.append(tid)
    shard = made[0][:2]
    return [t for t in made if t[:2] == shard], [t for t in made if t[:2] != shard]


def test_an_unreadable_shard_is_skipped_and_the_other_threads_list_and_resume(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    first = spawn()
    first.initialize()
    hidden, others = _threads_in_two_shards(first, tmp_path)
    assert first.shutdown() == 0
    (home / "index.sqlite3").unlink()  # the next listing rebuilds it by scanning
    with unreadable(home / "threads" / hidden[0][:2]) as prefix:
        server = spawn(prefix=prefix)
        server.initialize()
        assert {t["threadId"] for t in list_all(server)} == set(others)
        assert server.request("thread/resume", {"threadId": others[0]})["status"] == "ready"
        with pytest.raises(RpcError) as refused:
            server.request("thread/read", {"threadId": hidden[0]})
        assert refused.value.kind == "StorageError"
        assert hidden[0][:2] in refused.value.data["path"]
        assert "skipping" in server.stderr()


def test_a_permission_error_is_a_storage_error_naming_the_path(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    server = spawn(prefix=bound_by_permissions())
    server.initialize()
    tid, sid = start(server, tmp_path)
    edit = {"threadId": tid, "sessionId": sid, "path": "a.txt"}
    server.request("fs/applyEdit", {**edit, "operationId": "one", "content": "one\n"})
    (home / "blobs").chmod(0o500)  # no new blob can be stored
    try:
        with pytest.raises(RpcError) as denied:
            server.request("fs/applyEdit", {**edit, "operationId": "two", "content": "two\n"})
    finally:
        (home / "blobs").chmod(0o700)
    assert denied.value.kind == "StorageError"
    assert denied.value.data["path"].startswith(str(home / "blobs"))
    assert (tmp_path / "a.txt").read_text() == "one\n"


def test_a_thread_start_that_cannot_write_leaves_no_thread_behind(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    server = spawn(prefix=bound_by_permissions())
    server.initialize()
    (home / "threads").mkdir(mode=0o500)
    (home / "locks").mkdir(mode=0o500)
    try:
        with pytest.raises(RpcError) as denied:
            start(server, tmp_path)
        assert denied.value.kind == "StorageError"
        assert denied.value.data["path"].startswith(str(home / "threads"))
        assert not list((home / "threads").rglob("*"))
        assert list_all(server) == []
        (home / "threads").chmod(0o700)
        # The holder's name cannot be written (locks/ is read-only): only a courtesy to
        # other processes, so the thread starts, is listed once and is resumable.
        tid, sid = start(server, tmp_path)
        assert [t["threadId"] for t in list_all(server)] == [tid]
        assert thread_file(home, tid).exists()
        server.request("thread/close", {"threadId": tid, "sessionId": sid})
        assert server.request("thread/resume", {"threadId": tid})["status"] == "ready"
    finally:
        (home / "threads").chmod(0o700)
        (home / "locks").chmod(0o700)
