"""`sessiond migrate`: local threads into a shared database and back out as files, both
ways idempotent, records byte for byte as they were (the files stay the ground truth)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tests.faults.helpers import record, sessiond, start
from tests.support.items import message
from tests.support.rpc_client import ServerProcess

pytestmark = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)


def thread_files(home: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(home)): path.read_bytes()
        for path in sorted(home.glob("*/??/*.jsonl"))
        if path.parts[-3] in ("threads", "archived")
    }


def test_threads_go_to_the_database_and_come_back_as_the_same_files(
    home: Path, tmp_path: Path, store_url: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    local = ServerProcess(home)
    try:
        local.initialize([str(work)])
        kept, sid = start(local, work, title="kept")
        record(local, kept, sid, message("first"), message("second", role="assistant"))
        local.request("fs/applyEdit", {"threadId": kept, "sessionId": sid,
                                       "operationId": "op-1", "path": "notes.txt",
                                       "content": "hello\n"})  # fmt: skip
        shelved, shelved_sid = start(local, work, title="shelved")
        local.request("thread/close", {"threadId": shelved, "sessionId": shelved_sid})
        local.request("thread/archive", {"threadId": shelved})
        assert local.shutdown() == 0
    finally:
        local.close()
    original = thread_files(home)
    assert len(original) == 2

    first = sessiond(home, "migrate", "--to", store_url)
    assert first.returncode == 0, first.stderr
    assert "2 threads" in first.stdout and " 0 already there" in first.stdout
    again = sessiond(home, "migrate", "--to", store_url)
    assert again.returncode == 0 and " 0 records copied" in again.stdout, again.stdout

    shared = ServerProcess(tmp_path / "other-machine", env={"SESSIOND_STORE": store_url})
    (tmp_path / "other-machine").mkdir()
    try:
        shared.initialize([str(work)])
        assert [t["title"] for t in shared.request("thread/list", {})["threads"]] == ["kept"]
        archived = shared.request("thread/list", {"archived": True})["threads"]
        assert [t["threadId"] for t in archived] == [shelved]
        report = shared.request("thread/resume", {"threadId": kept, "cwd": str(work)})
        assert report["status"] == "ready"
        history = next(s for s in report["subsystems"] if s["name"] == "file_history")
        assert history["status"] == "restored"
        shared.request("thread/close", {"threadId": kept,
                                        "sessionId": report["session"]["sessionId"]})  # fmt: skip
    finally:
        shared.close()

    with psycopg.connect(store_url) as conn:  # the edit's content came along (for rewind)
        assert conn.execute("SELECT data FROM sessiond_blobs").fetchall() == [(b"hello\n",)]
    exported = tmp_path / "exported"
    out = sessiond(home, "--store", store_url, "migrate", "--to", str(exported))
    assert out.returncode == 0, out.stderr
    back = thread_files(exported)
    assert (
        back[f"archived/{shelved[:2]}/{shelved}.jsonl"]
        == original[f"archived/{shelved[:2]}/{shelved}.jsonl"]
    )
    kept_file = f"threads/{kept[:2]}/{kept}.jsonl"
    assert back[kept_file].startswith(original[kept_file])  # + the other machine's session
    again = sessiond(home, "--store", store_url, "migrate", "--to", str(exported))
    assert again.returncode == 0 and " 0 records copied" in again.stdout, again.stdout
    assert thread_files(exported) == back
    assert sessiond(exported, "doctor").returncode == 0
    listed = sessiond(exported, "list", "--json")
    assert kept in listed.stdout and shelved not in listed.stdout
