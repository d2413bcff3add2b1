"""A writer killed mid-session is found by the next process's first `thread/list`, which
reads only the threads whose writer marks nobody holds (restore/stores/embedded/marks.py),
not every thread file."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.faults.helpers import Spawn, list_all, record, start, thread_file
from tests.support.items import message


def _age_shards(home: Path) -> None:
    """Shard directories an hour old: only an append (no new file) is behind the index."""
    old = time.time() - 3600
    for shard in (home / "threads").iterdir():
        os.utime(shard, (old, old))


def test_the_last_items_of_a_killed_writer_show_in_the_next_first_list(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    first = spawn(env={"SESSIOND_DURABILITY": "fsync"})
    first.initialize()
    quiet = [start(first, tmp_path / "w")[0] for _ in range(5)]
    tid, _ = start(first, tmp_path / "w")
    assert first.shutdown() == 0
    _age_shards(home)

    writer = spawn(env={"SESSIOND_DURABILITY": "fsync"})
    writer.initialize()
    list_all(writer)  # the index is open: rows are written in batches from here on
    sid = writer.request("thread/resume", {"threadId": tid})["session"]["sessionId"]
    record(writer, tid, sid, message("one"))
    record(writer, tid, sid, message("two"))
    record(writer, tid, sid, message("the last words", role="assistant"))
    writer.kill9()  # before its batched row is written
    writer.proc.wait()
    assert b"the last words" in thread_file(home, tid).read_bytes()
    assert list((home / "writers").iterdir()) != []  # what the writer left

    reader = spawn()
    reader.initialize()
    listed = {t["threadId"]: t for t in list_all(reader)}
    assert sorted(listed) == sorted([*quiet, tid])
    killed = listed[tid]
    assert killed["preview"] == "one"
    assert killed["itemCount"] == 3  # the three messages
    assert killed["updatedAt"] > listed[quiet[-1]]["updatedAt"]  # the last words' time
    assert list((home / "writers").iterdir()) == []  # read into the index: the mark went
    # The same after another restart (the repaired row is in the index now).
    assert reader.shutdown() == 0
    again = spawn()
    again.initialize()
    assert {t["threadId"]: t for t in list_all(again)}[tid] == killed
