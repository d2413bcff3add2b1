"""`thread/read` reads the next page ahead (server/handlers/readahead.py): a client paging through a
thread over a real server gets exactly what reading each page afresh would give, while
other clients append, archive, rewrite or delete the thread between its pages."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.items import message
from tests.support.rpc_client import RpcError, ServerProcess

Spawn = Callable[..., ServerProcess]
MESSAGES = 120


def thread_of(server: ServerProcess, cwd: Path, count: int = MESSAGES) -> tuple[str, str]:
    started = server.request("thread/start", {"cwd": str(cwd)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    record(server, tid, sid, range(count))
    return tid, sid


def record(server: ServerProcess, tid: str, sid: str, numbers: range) -> None:
    items = [message(f"m{n}") for n in numbers]
    server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": items})


def contents(items: list[dict[str, Any]]) -> list[str]:
    return [item["content"] for item in items if item["type"] == "message"]


def back(server: ServerProcess, tid: str, before: int, limit: int = 25) -> dict[str, Any]:
    return server.request("thread/read", {"threadId": tid, "beforeSeq": before, "limit": limit})


def afresh(spawn: Spawn, tid: str, before: int) -> dict[str, Any]:
    """The page a server that never read ahead answers."""
    fresh = spawn()
    fresh.initialize()
    page = back(fresh, tid, before)
    fresh.shutdown()
    return page


def test_pages_back_while_another_client_appends_are_the_pages_read_afresh(
    spawn: Spawn, tmp_path: Path
) -> None:
    writer = spawn()
    writer.initialize()
    tid, sid = thread_of(writer, tmp_path)
    reader = spawn()
    reader.initialize()
    newest = reader.request("thread/read", {"threadId": tid, "afterSeq": 0, "limit": 10_000})
    cursor = newest["items"][-1]["seq"] + 1
    seen: list[str] = []
    n = MESSAGES
    while cursor is not None:
        page = back(reader, tid, cursor)
        assert page == afresh(spawn, tid, cursor)
        seen = contents(page["items"]) + seen
        cursor = page["nextBeforeSeq"]
        record(writer, tid, sid, range(n, n + 7))  # the thread grows between pages
        n += 7
    assert seen == [f"m{i}" for i in range(MESSAGES)]


def first_page_of_a_closed_thread(
    spawn: Spawn, cwd: Path
) -> tuple[ServerProcess, str, dict[str, Any]]:
    """A server that has read the newest page of a thread (and so the next one ahead)."""
    server = spawn()
    server.initialize()
    tid, sid = thread_of(server, cwd)
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    return server, tid, back(server, tid, 10_000)


def test_a_thread_deleted_between_pages_is_not_answered_from_the_page_read_ahead(
    spawn: Spawn, tmp_path: Path
) -> None:
    server, tid, first = first_page_of_a_closed_thread(spawn, tmp_path)
    other = spawn()
    other.initialize()
    other.request("thread/delete", {"threadId": tid})
    with pytest.raises(RpcError) as gone:
        back(server, tid, first["nextBeforeSeq"])
    assert gone.value.kind == "ThreadNotFound"


def test_an_archived_thread_pages_on_and_a_rewritten_one_is_read_again(
    spawn: Spawn, tmp_path: Path
) -> None:
    server, tid, first = first_page_of_a_closed_thread(spawn, tmp_path)
    server.request("thread/archive", {"threadId": tid})  # moved: the same file
    second = back(server, tid, first["nextBeforeSeq"])

    assert second == afresh(spawn, tid, first["nextBeforeSeq"])
    assert "m94" in contents(second["items"])

    # Rewritten in place of the old file (a new inode, without m50-m59, which the next page
    # back would hold): read again, not the page read ahead from the old file.
    path = next((server.home / "archived").rglob(f"{tid}.jsonl"))
    removed = {f"m{i}" for i in range(50, 60)}
    lines = path.read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if json.loads(line).get("content") not in removed]
    path.with_suffix(".new").write_bytes(b"".join(kept))
    path.with_suffix(".new").replace(path)
    third = back(server, tid, second["nextBeforeSeq"])
    assert third == afresh(spawn, tid, second["nextBeforeSeq"])
    assert "m69" in contents(third["items"]) and not removed & set(contents(third["items"]))


def test_pages_forward_see_what_was_appended_after_the_page_read_ahead(
    spawn: Spawn, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    tid, sid = thread_of(server, tmp_path, 30)
    first = server.request("thread/read", {"threadId": tid, "afterSeq": 0, "limit": 20})
    record(server, tid, sid, range(30, 40))
    params = {"threadId": tid, "afterSeq": first["nextAfterSeq"], "limit": 20}
    second = server.request("thread/read", params)
    fresh = spawn()
    fresh.initialize()
    assert second == fresh.request("thread/read", params)
    assert {"m30", "m35"} <= set(contents(second["items"]))
