"""Hostile or oversized input: a typed error each time, nothing outside the data dir or
the workspace is touched, and the server keeps serving."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.helpers import Spawn
from tests.faults.helpers import start as started
from tests.support.rpc_client import RpcError, ServerProcess

FRAMINGS = ["headers", "lines"]


def _edit(server: ServerProcess, tid: str, sid: str, op: str, path: str, text: str) -> dict:
    return server.request("fs/applyEdit", {"threadId": tid, "sessionId": sid, "operationId": op,
                                           "path": path, "content": text})  # fmt: skip


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize(
    "bad_id", ["not-a-uuid", "../x", "../../etc/passwd", "", "00000000-0000-0000-0000-00000000000/"]
)
def test_invalid_thread_ids_are_typed_errors(spawn: Spawn, framing: str, bad_id: str) -> None:
    server = spawn(framing=framing)
    server.initialize()
    for method in ("thread/read", "thread/resume", "thread/archive", "thread/delete"):
        with pytest.raises(RpcError) as bad:
            server.request(method, {"threadId": bad_id})
        assert bad.value.kind == "InvalidId", method
    assert server.request("thread/list", {})["threads"] == []


@pytest.mark.parametrize("framing", FRAMINGS)
def test_20_mb_frame_is_refused_and_serving_continues(
    spawn: Spawn, framing: str, tmp_path: Path
) -> None:
    server = spawn(framing=framing)
    server.initialize()
    tid = server.request("thread/start", {"cwd": str(tmp_path)})["thread"]["threadId"]
    sid = server.request("thread/resume", {"threadId": tid})["session"]["sessionId"]
    huge = {"type": "message", "id": "huge", "role": "user", "content": "x" * 20_000_000}
    msg_id = server.request_async(
        "thread/record", {"threadId": tid, "sessionId": sid, "items": [huge]}
    )
    error = server.wait_orphan()["error"]
    assert error["data"]["kind"] == "PayloadTooLarge"
    assert error["data"]["limit"] == 16 * 1024 * 1024
    assert msg_id not in server.responses
    small = {"type": "message", "id": "small", "role": "user", "content": "fits"}
    result = server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [small]})
    assert result["duplicates"] == 0
    items = server.request("thread/read", {"threadId": tid})["items"]
    assert [i["id"] for i in items if i["type"] == "message"] == ["small"]


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/sessiond-test", "sub/../../x"])
def test_apply_edit_never_writes_outside_the_workspace(
    server: ServerProcess, tmp_path: Path, path: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    tid, sid = started(server, work)
    with pytest.raises(RpcError) as refused:
        _edit(server, tid, sid, "op-escape", path, "pwned\n")
    assert refused.value.kind == "OutsideWorkspace"
    assert not (tmp_path / "outside.txt").exists() and not Path("/etc/sessiond-test").exists()
    assert server.request("thread/resume", {"threadId": tid})["pendingOperations"] == []


def test_a_repo_git_refuses_to_read_is_a_typed_answer_not_a_crash(
    server: ServerProcess, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("foreign")
    subprocess.run(["chown", "-R", "nobody", str(repo)], check=True)  # "dubious ownership"
    started_thread = server.request("thread/start", {"cwd": str(repo)})["thread"]
    assert started_thread["branch"] == "main"  # read from the files, without git's help
    items = server.request("thread/read", {"threadId": started_thread["threadId"]})["items"]
    assert "dubious ownership" in items[0]["repoError"]


def test_an_unreadable_thread_file_is_a_storage_error_and_the_rest_still_lists(
    server: ServerProcess, home: Path, tmp_path: Path
) -> None:
    good, _ = started(server, tmp_path)
    broken = "6f1e5a70-0000-4000-8000-000000000001"
    (home / "threads" / broken[:2] / f"{broken}.jsonl").mkdir(parents=True)  # not a file
    for method in ("thread/read", "thread/resume"):
        with pytest.raises(RpcError) as unreadable:
            server.request(method, {"threadId": broken})
        assert unreadable.value.kind == "StorageError", method
    listed = server.request("thread/list", {})["threads"]
    assert [t["threadId"] for t in listed] == [good]


def test_an_item_too_large_for_an_answer_is_named_and_paged_past(
    spawn: Spawn, tmp_path: Path
) -> None:
    # The limit bounds every message: a record that fits in a frame can hold an item that,
    # with the answer around it, does not. thread/read cuts its pages by bytes instead of
    # sending a frame the client would refuse, and names the one item that cannot fit.
    server = spawn(args=["--max-frame", "100000"])
    server.initialize()
    tid, sid = started(server, tmp_path)
    small = [{"type": "message", "id": f"s{n}", "role": "user", "content": "y" * 30_000}
             for n in range(4)]  # fmt: skip
    big = {"type": "message", "id": "big", "role": "user", "content": "x" * 99_500}
    for item in [*small[:2], big, *small[2:]]:
        server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [item]})
    first = server.request("thread/read", {"threadId": tid, "limit": 100})
    assert [i["id"] for i in first["items"]][1:] == ["s0", "s1"]  # cut by bytes, not count
    with pytest.raises(RpcError) as too_large:
        server.request("thread/read", {"threadId": tid, "afterSeq": first["nextAfterSeq"]})
    assert too_large.value.kind == "PayloadTooLarge"
    big_seq = too_large.value.data["seq"]
    assert big_seq == first["nextAfterSeq"] + 1
    rest = server.request("thread/read", {"threadId": tid, "afterSeq": big_seq, "limit": 100})
    assert [i["id"] for i in rest["items"]][:1] == ["s2"]
    back = server.request("thread/read", {"threadId": tid, "beforeSeq": big_seq, "limit": 100})
    assert [i["id"] for i in back["items"]][-2:] == ["s0", "s1"]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_half_an_emoji_in_a_record_is_kept_as_a_replacement_character_not_refused(
    spawn: Spawn, framing: str, tmp_path: Path
) -> None:
    """A JavaScript client that cut a string at a UTF-16 offset sends a lone surrogate
    escape (`"\\ud83d"`, what JSON.stringify writes for it); orjson refused the whole
    message as a parse error, so the record was lost. Now the half character is U+FFFD
    and the rest is recorded as sent; a whole emoji stays itself."""
    server = spawn(framing=framing)
    server.initialize()
    tid, sid = started(server, tmp_path / "work")
    cut = {"type": "message", "id": "m1", "role": "assistant", "content": "built \ud83d and 🎉"}
    assert server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [cut]})
    [message] = [i for i in server.request("thread/read", {"threadId": tid})["items"]
                 if i["type"] == "message"]  # fmt: skip
    assert message["content"] == "built \ufffd and 🎉"
    assert server.request("thread/list", {})["threads"][0]["threadId"] == tid
