"""What is in the data dir is data, never a way elsewhere: a thread file that is a symlink
is not followed, and a FIFO where sessiond keeps a file of its own stalls nobody.
(Terminal controls in recorded text: tests/test_cli.py.)

Threat: something with write access to the data dir (a sync tool, a careless script)
planting a link that would send appends, or a torn tail's repair, into an unrelated file.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from restore.home.layout import Layout
from tests.faults.helpers import (
    Spawn,
    list_all,
    record,
    sessiond,
    start,
    thread_file,
)
from tests.support import confine
from tests.support.import_fixtures import ClaudeSession
from tests.support.items import message
from tests.support.rpc_client import RpcError, ServerProcess


def test_a_thread_file_that_is_a_symlink_is_never_followed(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    tid, sid = start(server, tmp_path)
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    unrelated = tmp_path / "notes.txt"
    unrelated.write_bytes(b"first line\nlast line without a newline")
    path = thread_file(home, tid)
    path.unlink()
    path.symlink_to(unrelated)
    for method in ("thread/read", "thread/resume", "thread/archive"):
        with pytest.raises(RpcError) as refused:
            server.request(method, {"threadId": tid})
        assert refused.value.kind == "StorageError", method
        assert "symlink" in refused.value.message
    assert unrelated.read_bytes() == b"first line\nlast line without a newline"
    repaired = sessiond(home, "doctor", "--repair")
    assert "symlink" in repaired.stdout
    assert unrelated.read_bytes() == b"first line\nlast line without a newline"


# A FIFO where sessiond keeps one of its own files (planted by a sync tool, a careless
# script, or left by a crash of something else) would block whichever reader opens it: the
# single store worker, and every client's list and record behind it. Each such file is read
# without following links or waiting, checked to be a regular file first
# (`restore.home.files.read_regular`), and what sits there instead is treated as missing.


def _closed_thread(spawn: Spawn, work: Path) -> tuple[ServerProcess, str]:
    """A server, and a thread of 40 messages it recorded in `work` and closed."""
    server = spawn()
    server.initialize()
    tid, sid = start(server, work)
    record(
        server, tid, sid, *(message(f"m{n}", "user" if n % 2 else "assistant") for n in range(40))
    )
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    return server, tid


def test_a_fifo_as_a_snapshot_or_page_map_is_read_around(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    first, tid = _closed_thread(spawn, tmp_path / "work")
    first.request("thread/read", {"threadId": tid, "limit": 5})
    first.shutdown()
    layout = Layout(home)
    for path in (layout.snapshot_path(tid), layout.offsets_path(tid)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        os.mkfifo(path)
    second = spawn()
    second.initialize()
    report = second.request("thread/resume", {"threadId": tid})
    assert report["status"] == "ready"
    assert report["messages"]["items"][-1]["content"] == "m39"
    assert report["messages"]["total"] == 40
    page = second.request("thread/read", {"threadId": tid, "beforeSeq": 10, "limit": 3})
    assert [item["seq"] for item in page["items"]] == [7, 8, 9]


def _index_replaced(
    spawn: Spawn, home: Path, tmp_path: Path, planted: Callable[[Path], None]
) -> tuple[str, Path]:
    """A data dir with one closed thread whose index (and WAL) was replaced by `planted`
    (a FIFO, a directory); (the thread's id, the index path)."""
    first, tid = _closed_thread(spawn, tmp_path / "work")
    first.shutdown()
    index = Layout(home).index_path
    for end in ("", "-wal", "-shm"):
        index.with_name(index.name + end).unlink(missing_ok=True)
    planted(index)
    return tid, index


@pytest.mark.parametrize("planted", [os.mkfifo, Path.mkdir], ids=["fifo", "directory"])
def test_a_fifo_or_directory_as_the_index_is_moved_aside_and_the_index_rebuilt(
    spawn: Spawn, home: Path, tmp_path: Path, planted: Callable[[Path], None]
) -> None:
    tid, index = _index_replaced(spawn, home, tmp_path, planted)
    kind = stat.S_IFMT(index.lstat().st_mode)
    second = spawn()
    second.initialize()
    assert [t["threadId"] for t in list_all(second)] == [tid]
    assert index.is_file()
    (aside,) = home.glob("index.sqlite*.corrupt-*")
    assert stat.S_IFMT(aside.lstat().st_mode) == kind


def test_a_fifo_as_the_index_of_a_read_only_home_is_not_opened(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    tid, index = _index_replaced(spawn, home, tmp_path, os.mkfifo)
    with confine.read_only(home) as prefix:
        listed = sessiond(home, "list", "-q", prefix=prefix)
    assert (listed.returncode, listed.stdout) == (0, f"{tid}\n"), listed.stderr
    assert stat.S_ISFIFO(index.lstat().st_mode)  # a read-only home is never changed


def test_a_fifo_as_a_lock_holder_record_still_says_busy_at_once(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    """Both places a holder's name is read from (its writer mark, `locks/<id>.holder`)
    planted with a FIFO: neither read waits for a writer that never comes."""
    holder, tid = _closed_thread(spawn, tmp_path / "work")
    assert holder.request("thread/resume", {"threadId": tid})["status"] == "ready"
    for named in (home / "writers" / tid, home / "locks" / f"{tid}.holder"):
        named.unlink(missing_ok=True)
        os.mkfifo(named)
    other = spawn()
    other.initialize()
    with pytest.raises(RpcError) as refused:
        other.request("thread/resume", {"threadId": tid})
    assert refused.value.kind == "ThreadBusy"
    assert "another process" in refused.value.message


def test_a_fifo_as_a_blob_refuses_the_rewind_by_name(
    server: ServerProcess, home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    tid, sid = start(server, work)
    (work / "notes.txt").write_text("before\n")
    record(server, tid, sid, {"type": "message", "role": "user", "content": "go", "turnId": "t1"})
    server.request("fs/applyEdit", {"threadId": tid, "sessionId": sid, "operationId": "op-1",
                                    "path": "notes.txt", "content": "after\n"})  # fmt: skip
    blob = Layout(home).blob_path(hashlib.sha256(b"before\n").hexdigest())
    blob.unlink()
    os.mkfifo(blob)
    with pytest.raises(RpcError) as refused:
        server.request("thread/rewind", {"threadId": tid, "sessionId": sid, "toTurnId": "t1"})
    assert refused.value.kind == "StorageError" and "is missing" in refused.value.message
    assert (work / "notes.txt").read_text() == "after\n"
    assert list_all(server)[0]["threadId"] == tid


def test_a_fifo_in_the_servers_directory_is_not_a_server(home: Path, tmp_path: Path) -> None:
    (home / "servers").mkdir(mode=0o700)
    os.mkfifo(home / "servers" / "4711.json")
    found = sessiond(home, "client", "list")
    assert found.returncode != 0 and "no running sessiond" in found.stderr.lower()
    assert not (home / "servers" / "4711.json").exists()


def test_a_fifo_among_claude_sessions_is_reported_and_the_rest_imported(
    home: Path, tmp_path: Path
) -> None:
    projects = tmp_path / "claude" / "projects"
    work = tmp_path / "work"
    work.mkdir()
    session = ClaudeSession(projects, work, "main")
    session.user("a real session")
    session.say("and its answer")
    session.save()
    os.mkfifo(session.path.with_name("9e1d2c3b-0000-4000-8000-000000000000.jsonl"))
    os.mkfifo(Layout(home).import_ledger_path)
    imported = sessiond(home, "import", "claude", "--from", str(projects), "--json")
    assert imported.returncode == 0, imported.stderr
    summary = orjson.loads(imported.stdout)
    assert summary["created"] == 1 and summary["items"] > 0
    (problem,) = summary["problems"]
    assert Path(problem["path"]).name == "9e1d2c3b-0000-4000-8000-000000000000.jsonl"
    assert problem["status"] == "not-a-file"
    assert Layout(home).import_ledger_path.is_file()
