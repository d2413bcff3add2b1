"""Client-named paths: sessiond reads, writes, restores and hashes only regular files inside
the thread's workspace (restore/access.py), whatever a client sends or a thread recorded.

Threat: a misbehaving client (or an agent driving one) that records or sends paths meant to
reach outside the workspace, or special files that would block the one store thread.
Every test drives a real `sessiond serve --stdio` process.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

import pytest

from tests.faults.helpers import record, start, subsystem
from tests.support.rpc_client import REPO, RpcError, ServerProcess


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _edit(server: ServerProcess, tid: str, sid: str, path: str, text: str) -> dict:
    return server.request("fs/applyEdit", {"threadId": tid, "sessionId": sid,
                                           "operationId": str(uuid.uuid4()), "path": path,
                                           "content": text})  # fmt: skip


def _rewind(server: ServerProcess, tid: str, sid: str, **extra: object) -> dict:
    return server.request(
        "thread/rewind", {"threadId": tid, "sessionId": sid, "toTurnId": "t1", **extra}
    )


def _thread_with_a_recorded_edit(
    server: ServerProcess, work: Path, path: str, **edit: object
) -> tuple[str, str]:
    """A thread whose turn t1 is followed by a recorded file_edit of `path`, restoring to
    content whose blob exists (an earlier edit inside the workspace stored it)."""
    tid, sid = start(server, work)
    record(server, tid, sid, {"type": "message", "role": "user", "content": "go", "turnId": "t1"})
    _edit(server, tid, sid, "inside.txt", "planted\n")  # stores the blob of "planted\n"
    fields = {"beforeSha": _sha("planted\n"), "afterSha": _sha("anything\n"), **edit}
    record(server, tid, sid, {"type": "file_edit", "path": path, "author": "agent", **fields})
    return tid, sid


@pytest.mark.parametrize("kind", ["absolute", "dotdot"])
def test_rewind_never_restores_a_recorded_path_outside_the_workspace(
    server: ServerProcess, tmp_path: Path, kind: str
) -> None:
    work = tmp_path / "work"
    outside = tmp_path / "outside.txt"
    path = str(outside) if kind == "absolute" else "../outside.txt"
    tid, sid = _thread_with_a_recorded_edit(server, work, path)
    with pytest.raises(RpcError) as refused:
        _rewind(server, tid, sid, force=True)
    assert refused.value.kind == "OutsideWorkspace"
    assert refused.value.data["path"] == path
    assert not outside.exists()
    assert (work / "inside.txt").read_text() == "planted\n"  # refused whole: nothing undone


def test_rewind_restores_a_relative_path_in_the_threads_cwd_not_the_servers(
    server: ServerProcess, tmp_path: Path
) -> None:
    name = f"rewind-{uuid.uuid4().hex[:8]}.txt"
    work = tmp_path / "work"
    tid, sid = _thread_with_a_recorded_edit(server, work, name)
    try:
        _rewind(server, tid, sid, force=True)
        assert (work / name).read_text() == "planted\n"
    finally:
        stray = REPO / name  # where the server's cwd would have put it
        existed = stray.exists()
        stray.unlink(missing_ok=True)
    assert not existed


def test_rewind_over_an_edit_without_before_sha_is_a_typed_error_and_writes_nothing(
    server: ServerProcess, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    tid, sid = start(server, work)
    record(server, tid, sid, {"type": "message", "role": "user", "content": "go", "turnId": "t1"})
    _edit(server, tid, sid, "kept.txt", "agent\n")
    record(server, tid, sid, {"type": "file_edit", "path": "unknown.txt", "afterSha": _sha("x")})
    with pytest.raises(RpcError) as refused:
        _rewind(server, tid, sid, force=True)
    assert refused.value.kind == "InvalidParams"
    assert refused.value.data["path"] == "unknown.txt"
    assert (work / "kept.txt").read_text() == "agent\n"


def test_a_symlink_leaving_the_workspace_is_outside_it(
    server: ServerProcess, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's other file\n")
    (work / "link.txt").symlink_to(secret)
    tid, sid = start(server, work)
    with pytest.raises(RpcError) as refused:
        _edit(server, tid, sid, "link.txt", "overwritten\n")
    assert refused.value.kind == "OutsideWorkspace"
    assert secret.read_text() == "the user's other file\n"


def test_a_prompt_section_outside_the_workspace_is_never_read_back(
    server: ServerProcess, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    secret = tmp_path / "id_secret"
    secret.write_text("PRIVATE KEY MATERIAL\n")
    tid, sid = start(server, work)
    section = {"type": "prompt_section", "name": "agents", "content": "recorded",
               "path": str(secret), "sha": _sha("recorded")}  # fmt: skip
    record(server, tid, sid, section)
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    report = server.request("thread/resume", {"threadId": tid})
    assert "PRIVATE KEY" not in str(report)
    (restored,) = subsystem(report, "prompt_sections")["state"]["sections"]
    assert restored["stale"] is True and restored["content"] is None
    assert "outside the thread's workspace" in restored["refused"]


def test_a_fifo_never_blocks_the_store_for_other_requests(spawn: object, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    os.mkfifo(work / "AGENTS.md")
    first = spawn()  # type: ignore[operator]
    first.initialize()
    tid, sid = start(first, work)
    record(first, tid, sid, {"type": "prompt_section", "name": "agents", "content": "x",
                             "path": str(work / "AGENTS.md")})  # fmt: skip
    with pytest.raises(RpcError) as refused:
        _edit(first, tid, sid, "AGENTS.md", "replaced\n")
    assert refused.value.kind == "InvalidParams" and "FIFO" in refused.value.message
    first.request("thread/close", {"threadId": tid, "sessionId": sid})
    report = first.request("thread/resume", {"threadId": tid})
    (section,) = subsystem(report, "prompt_sections")["state"]["sections"]
    assert "a FIFO, not a regular file" in section["refused"]
    assert [t["threadId"] for t in first.request("thread/list", {})["threads"]] == [tid]


@pytest.mark.parametrize(
    "cwd, problem",
    [
        ("relative/dir", "absolute"),
        ("{tmp}/missing", "existing directory"),
        ("{tmp}/a-file", "existing directory"),
        ("{tmp}\u0000/x", "NUL"),
    ],
)
def test_thread_start_needs_an_absolute_existing_directory(
    server: ServerProcess, tmp_path: Path, cwd: str, problem: str
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    with pytest.raises(RpcError) as refused:
        server.request("thread/start", {"cwd": cwd.format(tmp=tmp_path)})
    assert refused.value.kind == "InvalidParams" and problem in refused.value.message
    assert server.request("thread/list", {})["threads"] == []


@pytest.mark.parametrize("cwd", ["relative/dir", "/tmp\u0000/x"])
def test_a_resume_cwd_must_be_absolute_without_nul(
    server: ServerProcess, tmp_path: Path, cwd: str
) -> None:
    tid, sid = start(server, tmp_path)
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    with pytest.raises(RpcError) as refused:
        server.request("thread/resume", {"threadId": tid, "cwd": cwd})
    assert refused.value.kind == "InvalidParams"
    assert server.request("thread/resume", {"threadId": tid})["status"] == "ready"
