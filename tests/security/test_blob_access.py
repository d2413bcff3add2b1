"""Who may read which blob: thread/readBlob answers only through an edit of the thread that
names the blob, never for a bare hash (blobs are shared by every thread of a store), and
never builds anything from an id it has not validated. Both stores, a real server."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BOTH_STORES
from tests.support.rpc_client import RpcError, ServerProcess

pytestmark = BOTH_STORES


def thread_with_edit(
    server: ServerProcess, folder: Path, name: str, content: str
) -> tuple[str, dict[str, Any]]:
    started = server.request("thread/start", {"cwd": str(folder)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [
        {"type": "message", "id": "m1", "role": "user", "content": "change it"}]})  # fmt: skip
    server.request("fs/applyEdit", {"threadId": tid, "sessionId": sid, "operationId": "op",
                                    "path": name, "content": content})  # fmt: skip
    items = server.request("thread/read", {"threadId": tid})["items"]
    return tid, next(i for i in items if i["type"] == "file_edit")


def refused(server: ServerProcess, params: dict[str, Any]) -> RpcError:
    with pytest.raises(RpcError) as error:
        server.request("thread/readBlob", params)
    return error.value


def test_a_blob_is_read_only_through_an_edit_of_the_same_thread_that_names_it(
    spawn: Any, tmp_path: Path
) -> None:
    secret_dir, other_dir = tmp_path / "secret", tmp_path / "other"
    secret_dir.mkdir()
    other_dir.mkdir()
    server = spawn()
    server.initialize([str(secret_dir), str(other_dir)])
    secret, secret_edit = thread_with_edit(server, secret_dir, "key.txt", "hunter2\n")
    other, other_edit = thread_with_edit(server, other_dir, "readme.txt", "hello\n")
    stolen = secret_edit["afterSha"]

    message_seq = secret_edit["seq"] - 3  # start, message, operation x2, file_edit
    attempts = {
        "another thread's edit": {"threadId": other, "seq": other_edit["seq"], "sha": stolen},
        "a message, not an edit": {"threadId": secret, "seq": message_seq, "sha": stolen},
        "a seq past the end": {"threadId": secret, "seq": 10_000, "sha": stolen},
    }
    for why, params in attempts.items():
        error = refused(server, params)
        assert error.kind == "Unauthorized", why
        assert "hunter2" not in str(error.data) + str(error.message), why
    allowed = {"threadId": secret, "seq": secret_edit["seq"], "sha": stolen}
    assert server.request("thread/readBlob", allowed)["content"] == "hunter2\n"


def test_blob_and_thread_ids_are_validated_before_anything_is_looked_up(
    server: ServerProcess, tmp_path: Path
) -> None:
    tid = server.request("thread/start", {"cwd": str(tmp_path)})["thread"]["threadId"]
    for bad in ("../../../etc/passwd", "A" * 64, "0" * 63, "0" * 64 + "/"):
        error = refused(server, {"threadId": tid, "seq": 1, "sha": bad})
        assert error.kind == "InvalidParams", bad
    assert refused(server, {"threadId": "../x", "seq": 1, "sha": "0" * 64}).kind == "InvalidId"
    missing = {"threadId": str(uuid.uuid4()), "seq": 1, "sha": "0" * 64}
    assert refused(server, missing).kind == "ThreadNotFound"
    assert refused(server, {"threadId": tid, "seq": 0, "sha": "0" * 64}).kind == "InvalidParams"
