"""`sessiond usage` from the index file alone (restore/usage/index_file.py): when nothing
changed behind the index, the report read from its file equals the store's; when a thread
file changed behind it (or a writer left a mark, or there is no index yet), the store is
opened and catches up, so nothing a file says is missed.

Real parts: Claude Code transcripts imported by a real `sessiond import`, real `sessiond
usage` and `sessiond list` processes, the index file SQLite wrote. A shard directory
changed in the last 2 s is not trusted (index.py RACY_NS), so the tests set the shard
directories' times an hour back and let a store open record them, as an hour-old home has."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from restore.stores import Settings, open_store
from restore.stores.embedded.index import ThreadIndex
from restore.usage import index_file
from restore.usage.index_file import caught_up
from restore.usage.request import usage_report
from tests.test_postgres import sessiond_cli
from tests.test_usage import UNKNOWN, transcripts, usage

KINDS = [(kind, by) for kind in ("daily", "weekly", "monthly", "session", "blocks")
         for by in (None, "model", "agent", "project")]  # fmt: skip


def imported(home: Path, tmp_path: Path) -> None:
    root = tmp_path / "claude" / "projects"
    transcripts(root, tmp_path)
    done = sessiond_cli("--home", str(home), "import", "claude", "--from", str(root))
    assert done.returncode == 0, done.stderr


def settled(home: Path) -> None:
    """Every shard directory an hour old, and a store open that records them (`list`)."""
    hour_ago = time.time() - 3600
    for base in ("threads", "archived"):
        for shard in (home / base).glob("*") if (home / base).is_dir() else []:
            os.utime(shard, (hour_ago, hour_ago))
    done = sessiond_cli("--home", str(home), "list")
    assert done.returncode == 0, done.stderr


def test_the_report_from_the_index_file_is_the_store_s(home: Path, tmp_path: Path) -> None:
    imported(home, tmp_path)
    settled(home)
    store = open_store(Settings(home))
    try:
        for kind, by in KINDS:
            index = caught_up(str(home))
            assert index is not None, "the settled index needs no catching up"
            try:
                ours = usage_report(index, kind, by=by, timezone="America/New_York")
            finally:
                index.close()
            theirs = usage_report(store.index, kind, by=by, timezone="America/New_York")
            assert ours == theirs, (kind, by)
            assert ours["totals"]["calls"] == 4
    finally:
        store.close()


def test_a_thread_file_removed_behind_the_index_is_not_counted(home: Path, tmp_path: Path) -> None:
    imported(home, tmp_path)
    settled(home)
    assert usage(home, None, "daily")["totals"]["calls"] == 4
    (gone,) = [path for path in (home / "threads").rglob("*.jsonl")
               if UNKNOWN in path.read_text()]  # fmt: skip
    gone.unlink()

    assert caught_up(str(home)) is None  # its shard changed: the store reads it again
    after = usage(home, None, "daily", "--by", "model")
    assert after["totals"]["calls"] == 3
    assert UNKNOWN not in {part["name"] for row in after["rows"] for part in row["breakdown"]}
    settled(home)
    index = caught_up(str(home))  # caught up by that open: read from the file again, alike
    assert index is not None
    index.close()
    assert usage(home, None, "daily")["totals"]["calls"] == 3


def test_a_writer_s_mark_or_no_index_opens_the_store(home: Path, tmp_path: Path) -> None:
    imported(home, tmp_path)
    settled(home)
    (thread,) = [path.stem for path in (home / "threads").rglob("*.jsonl")
                 if UNKNOWN in path.read_text()]  # fmt: skip
    mark = home / "writers" / thread
    mark.parent.mkdir(exist_ok=True)
    mark.touch()  # a writer that died before its row was written
    assert caught_up(str(home)) is None
    mark.unlink()
    index = caught_up(str(home))
    assert index is not None
    index.close()

    for end in ("", "-wal", "-shm"):
        (home / f"index.sqlite3{end}").unlink(missing_ok=True)
    assert caught_up(str(home)) is None
    assert usage(home, None, "daily")["totals"]["calls"] == 4  # rebuilt from the files


def test_the_index_file_reads_the_store_s_schema() -> None:
    assert index_file.SCHEMA_VERSION == ThreadIndex.SCHEMA_VERSION


@pytest.mark.parametrize("name", ["a b", "50%", "what?", "#1"])
def test_a_home_named_with_uri_characters_is_read(name: str, tmp_path: Path) -> None:
    home = tmp_path / name
    imported(home, tmp_path)
    settled(home)
    index = caught_up(str(home))
    assert index is not None
    try:
        assert usage_report(index, "daily")["totals"]["calls"] == 4
    finally:
        index.close()
