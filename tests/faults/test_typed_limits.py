"""Input past a limit the stores have is a typed InvalidParams that names it, never an
InternalError (-32603) or a StorageError: an item nested deeper than the writer's encoder
takes, a NUL in a listing filter, an item id or a client name (PostgreSQL text cannot hold
one). Both stores, a real server process; nothing is written, and the next request is
served. A NUL or line break in what a listing row is made of (a first message, a title) is
stored as recorded, and the row shows one line with the NUL escaped, on both stores alike."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BOTH_STORES
from tests.faults.helpers import Spawn, record, start
from tests.support.items import message
from tests.support.rpc_client import RpcError

pytestmark = BOTH_STORES


def nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("durability", ["fsync", "group"])
def test_an_item_nested_300_deep_is_invalid_params_and_nothing_is_written(
    spawn: Spawn, tmp_path: Path, durability: str
) -> None:
    server = spawn(env={"SESSIOND_DURABILITY": durability})
    server.initialize()
    tid, sid = start(server, tmp_path / "work")
    good = message("kept")
    deep_operation = {
        "type": "operation", "id": str(uuid.uuid4()), "operationId": "op-1", "tool": "Bash",
        "effect": "read", "state": "committed", "result": nested(300),
    }  # fmt: skip
    deep_extra = {**message("an unknown field, deep"), "extra": {"a": nested(300)}}
    for deep in (deep_operation, deep_extra):
        with pytest.raises(RpcError) as refused:
            record(server, tid, sid, good, deep)  # one bad item: none of the batch is written
        assert refused.value.code == -32602 and refused.value.kind == "InvalidParams"
        assert "items[1]" in refused.value.message and "nest" in refused.value.message
    [meta] = server.request("thread/read", {"threadId": tid})["items"]
    assert meta["type"] == "session_meta"
    assert record(server, tid, sid, good)["firstSeq"] == meta["seq"] + 1  # the session goes on
    assert "Traceback" not in server.stderr_path.read_text()


@pytest.mark.parametrize(
    "filters",
    [{"search": "a\0b"}, {"cwd": "/tmp/\0x"}, {"workspaceFolder": "/work\0"}],
    ids=["search", "cwd", "workspaceFolder"],
)
def test_a_nul_in_a_listing_filter_is_invalid_params(
    spawn: Spawn, tmp_path: Path, filters: dict[str, str]
) -> None:
    server = spawn()
    server.initialize()
    start(server, tmp_path / "work")
    with pytest.raises(RpcError) as refused:
        server.request("thread/list", filters)
    assert refused.value.kind == "InvalidParams", refused.value.message
    assert "NUL" in refused.value.message
    assert len(server.request("thread/list", {})["threads"]) == 1


@pytest.mark.parametrize(
    "bad", ["a\0b", "line\nbreak", "esc\x1b[31m"], ids=["nul", "newline", "escape"]
)
def test_a_control_character_in_an_item_id_or_client_name_is_invalid_params(
    spawn: Spawn, tmp_path: Path, bad: str
) -> None:
    server = spawn()
    with pytest.raises(RpcError) as refused:
        server.request("initialize", {"protocolVersion": 1, "clientInfo": {"name": bad}})
    assert refused.value.kind == "InvalidParams" and "clientInfo.name" in refused.value.message
    server.initialize()
    tid, sid = start(server, tmp_path / "work")
    with pytest.raises(RpcError) as refused:
        record(server, tid, sid, message("kept"), {**message("lost"), "id": bad})
    assert refused.value.kind == "InvalidParams" and "items[1]" in refused.value.message
    assert [i["type"] for i in server.request("thread/read", {"threadId": tid})["items"]] == [
        "session_meta"
    ]  # none of the batch
    record(server, tid, sid, message("the session goes on"))
    assert "Traceback" not in server.stderr_path.read_text()


def test_a_nul_in_a_first_message_or_title_is_stored_and_listed_on_one_line(
    spawn: Spawn, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    tid, sid = start(server, tmp_path / "work")
    record(server, tid, sid, message("look at\0this\nerror"), message("a\0b", "assistant"))
    [row] = server.request("thread/list", {})["threads"]
    assert row["preview"] == "look at\\x00this error"  # shown, not acted on nor refused
    renamed = server.request("thread/setTitle", {"threadId": tid, "title": "fix\0the\nparser"})
    assert renamed["thread"]["title"] == "fix\\x00the parser"
    items = server.request("thread/read", {"threadId": tid})["items"]
    assert [i.get("content") for i in items if i["type"] == "message"] == [
        "look at\0this\nerror",
        "a\0b",
    ]  # the record itself is kept as recorded
    assert [i["title"] for i in items if i["type"] == "thread_title"] == ["fix\0the\nparser"]
    [row] = server.request("thread/list", {})["threads"]
    assert (row["title"], row["preview"]) == ("fix\\x00the parser", "look at\\x00this error")
