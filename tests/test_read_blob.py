"""thread/readBlob: a file's content before and after an edit, read back through the edit
that recorded it (what the VS Code transcript's Open diff shows), on both stores, from a
real server process."""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BOTH_STORES
from tests.support.rpc_client import RpcError, ServerProcess

pytestmark = BOTH_STORES
Spawn = Callable[..., ServerProcess]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def edited(server: ServerProcess, tid: str) -> dict[str, dict[str, Any]]:
    """The thread's file_edit items, by the file's name."""
    items = server.request("thread/read", {"threadId": tid, "limit": 1000})["items"]
    return {Path(i["path"]).name: i for i in items if i["type"] == "file_edit"}


def blob(server: ServerProcess, tid: str, edit: dict[str, Any], side: str) -> dict[str, Any]:
    return server.request(
        "thread/readBlob", {"threadId": tid, "seq": edit["seq"], "sha": edit[side]}
    )


def apply(server: ServerProcess, tid: str, sid: str, path: str, content: str) -> None:
    result = server.request("fs/applyEdit", {
        "threadId": tid, "sessionId": sid, "operationId": str(uuid.uuid4()), "path": path,
        "content": content})  # fmt: skip
    assert result["outcome"] == "applied"


def test_an_edit_gives_back_the_file_before_and_after_it_also_after_a_restart(
    spawn: Spawn, tmp_path: Path
) -> None:
    (tmp_path / "app.py").write_text("def login():\n    return False\n")
    server = spawn()
    server.initialize([str(tmp_path)])
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    apply(server, tid, sid, "app.py", "def login():\n    return check()\n")
    apply(server, tid, sid, "notes.md", "# new file\n")
    server.kill9()

    again = spawn()
    again.initialize([str(tmp_path)])
    edits = edited(again, tid)
    before = blob(again, tid, edits["app.py"], "beforeSha")
    after = blob(again, tid, edits["app.py"], "afterSha")
    assert before == {"recorded": True, "content": "def login():\n    return False\n",
                      "encoding": "utf-8", "size": 30}  # fmt: skip
    assert (after["content"], after["encoding"]) == ("def login():\n    return check()\n", "utf-8")
    assert edits["notes.md"]["beforeSha"] is None, "a new file has no before"
    assert blob(again, tid, edits["notes.md"], "afterSha")["content"] == "# new file\n"


def test_an_edit_recorded_with_hashes_only_says_its_content_was_not_recorded(
    server: ServerProcess, tmp_path: Path
) -> None:
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [
        {"type": "file_edit", "id": "e1", "path": str(tmp_path / "x.py"),
         "beforeSha": sha(b"old\n"), "afterSha": sha(b"new\n")}]})  # fmt: skip
    edit = edited(server, tid)["x.py"]
    for side in ("beforeSha", "afterSha"):
        assert blob(server, tid, edit, side) == {
            "recorded": False, "content": None, "encoding": None, "size": None}  # fmt: skip


def test_content_that_is_not_utf8_comes_back_as_base64_bytes(spawn: Spawn, tmp_path: Path) -> None:
    original = b"\x89PNG\r\n\x1a\n\x00\xff\xfe"
    (tmp_path / "logo.png").write_bytes(original)
    server = spawn()
    server.initialize([str(tmp_path)])
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    apply(server, tid, sid, "logo.png", "now text\n")
    before = blob(server, tid, edited(server, tid)["logo.png"], "beforeSha")
    assert (before["encoding"], before["size"]) == ("base64", len(original))
    assert base64.b64decode(before["content"]) == original


def test_a_blob_larger_than_one_answer_is_payload_too_large_and_the_server_goes_on(
    spawn: Spawn, tmp_path: Path
) -> None:
    (tmp_path / "big.log").write_text("x" * 20_000)  # larger than the frame, never sent in one
    server = spawn(args=["--max-frame", "8192"])
    server.initialize([str(tmp_path)])
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    apply(server, tid, sid, "big.log", "small now\n")
    edit = edited(server, tid)["big.log"]
    with pytest.raises(RpcError) as refused:
        blob(server, tid, edit, "beforeSha")
    assert refused.value.kind == "PayloadTooLarge"
    assert (refused.value.data["size"], refused.value.data["limit"]) == (20_000, 8192 - 512)
    assert blob(server, tid, edit, "afterSha")["content"] == "small now\n"
