"""Crashes around side effects and repeated ledger entries: nothing runs twice.

The three kill points of seed 003 (before the tool runs, after it committed but before its
result was recorded, after the result but before the verifier ran) with real SIGKILLs at
named crash points, and a duplicate operation commit.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import git
from tests.faults.helpers import Spawn, record, subsystem
from tests.faults.helpers import start as started
from tests.support.rpc_client import RpcError, ServerProcess


def _edit(server: ServerProcess, tid: str, sid: str, op: str, path: str, text: str) -> dict:
    return server.request("fs/applyEdit", {"threadId": tid, "sessionId": sid, "operationId": op,
                                           "path": path, "content": text})  # fmt: skip


@pytest.mark.parametrize(
    ("crash_at", "recovery", "content_after_crash"),
    [("apply_edit.before_write", "not_started", "old\n"),
     ("apply_edit.after_write", "committed_result_missing", "new\n")],
    ids=["before-the-tool-runs", "after-commit-before-result"],
)  # fmt: skip
def test_kill_9_around_an_edit_never_repeats_it(
    spawn: Spawn, tmp_path: Path, crash_at: str, recovery: str, content_after_crash: str
) -> None:
    target = tmp_path / "config.toml"
    target.write_text("old\n")
    server = spawn(env={"SESSIOND_CRASH_AT": crash_at})
    server.initialize()
    tid, sid = started(server, tmp_path)
    msg_id = server.request_async("fs/applyEdit", {
        "threadId": tid, "sessionId": sid, "operationId": "op-cfg", "path": "config.toml",
        "content": "new\n"})  # fmt: skip
    with pytest.raises(ConnectionError):
        server.response(msg_id)
    assert server.proc.wait(timeout=60) == -9
    assert target.read_text() == content_after_crash

    again = spawn()
    again.initialize()
    report = again.request("thread/resume", {"threadId": tid})
    [pending] = report["pendingOperations"]
    assert (pending["operationId"], pending["recovery"]) == ("op-cfg", recovery)
    assert pending["decidedBy"].startswith("hash")
    inode_before = os.stat(target).st_ino
    retry = _edit(again, tid, report["session"]["sessionId"], "op-cfg", "config.toml", "new\n")
    expected = "applied" if recovery == "not_started" else "already_applied"
    assert retry["outcome"] == expected
    assert target.read_text() == "new\n"
    if expected == "already_applied":
        assert os.stat(target).st_ino == inode_before  # not written a second time
    final = again.request("thread/resume", {"threadId": tid})
    assert final["pendingOperations"] == []
    edits = subsystem(final, "file_history")["state"]["edits"]
    assert edits == 1


def test_kill_9_after_result_before_verifier_leaves_verification_pending(
    spawn: Spawn, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    server = spawn()
    server.initialize()
    tid, sid = started(server, repo)
    record(server, tid, sid, {"type": "verifier", "name": "tests", "passed": 7, "total": 9,
                              "headSha": git(repo, "rev-parse", "HEAD")})  # fmt: skip
    assert _edit(server, tid, sid, "op-fix", "fix.py", "fixed = True\n")["outcome"] == "applied"
    server.kill9()
    again = spawn()
    again.initialize()
    report = again.request("thread/resume", {"threadId": tid})
    assert report["pendingOperations"] == []
    verifier = subsystem(report, "verifier")
    assert verifier["status"] == "invalidated" and verifier["state"]["pending"] is True
    assert "pending" in verifier["reason"]


def test_duplicate_commit_is_a_no_op_and_going_backwards_is_refused(
    server: ServerProcess, tmp_path: Path, home: Path
) -> None:
    tid, sid = started(server, tmp_path)
    commit = {
        "type": "operation",
        "operationId": "op",
        "tool": "charge",
        "effect": "side_effect",
        "state": "committed",
        "resultPersisted": True,
    }
    first = record(server, tid, sid, dict(commit))
    again = record(server, tid, sid, dict(commit))  # same transition, new item id
    assert first["duplicates"] == 0 and again["duplicates"] == 1
    with pytest.raises(RpcError) as conflict:
        record(
            server,
            tid,
            sid,
            {**commit, "state": "started"},
            {"type": "message", "role": "user", "content": "must not be written"},
        )
    assert conflict.value.kind == "ConflictingOperation"
    assert conflict.value.data["recordedState"] == "committed"
    items = server.request("thread/read", {"threadId": tid})["items"]
    assert [i["type"] for i in items] == ["session_meta", "operation"]
