"""Sub-agent threads over sessiond's own protocol, on both stores: a harness starts a
sub-agent's thread under its parent (`thread/start {parentThreadId, parentOperationId}`),
listings show top-level threads with their `childCount` and a thread's children on request,
and the parent's cost counts what its sub-agents spent. Real server processes."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BOTH_STORES
from tests.support.rpc_client import RpcError, ServerProcess

pytestmark = BOTH_STORES


def start(server: ServerProcess, cwd: Path, **params: Any) -> dict[str, Any]:
    return server.request("thread/start", {"cwd": str(cwd), **params})


def record(server: ServerProcess, started: dict[str, Any], *items: dict[str, Any]) -> None:
    thread_id, session_id = started["thread"]["threadId"], started["sessionId"]
    params = {"threadId": thread_id, "sessionId": session_id, "items": list(items)}
    server.request("thread/record", params)


def spent(model: str, tokens_in: int, tokens_out: int, usd: float) -> dict[str, Any]:
    return {"type": "cost", "id": str(uuid.uuid4()), "model": model, "inputTokens": tokens_in,
            "outputTokens": tokens_out, "usd": usd}  # fmt: skip


def test_a_sub_agent_thread_is_listed_under_its_parent_not_at_the_top(
    spawn: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    server = spawn()
    server.initialize([str(tmp_path)])
    parent = start(server, tmp_path, title="parent")
    parent_id = parent["thread"]["threadId"]
    child = start(server, tmp_path, title="sub-agent", parentThreadId=parent_id,
                  parentOperationId="call-7")  # fmt: skip
    assert child["thread"]["parentThreadId"] == parent_id
    assert child["thread"]["parentOperationId"] == "call-7"
    other = start(server, tmp_path, title="another top-level thread")
    listed = server.request("thread/list", {})["threads"]
    assert [(t["title"], t["childCount"]) for t in listed] == [
        ("another top-level thread", 0),
        ("parent", 1),
    ]
    (under,) = server.request("thread/list", {"parentThreadId": parent_id})["threads"]
    assert (under["threadId"], under["parentThreadId"]) == (child["thread"]["threadId"], parent_id)
    no_children = {"parentThreadId": other["thread"]["threadId"]}
    assert server.request("thread/list", no_children)["threads"] == []
    # A second server process sees the same tree (the index rebuilt or the shared table).
    again = spawn()
    again.initialize([str(tmp_path)])
    assert [t["childCount"] for t in again.request("thread/list", {})["threads"]] == [0, 1]


def test_a_sub_agent_thread_needs_a_parent_that_exists(
    spawn: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    server = spawn()
    server.initialize([str(tmp_path)])
    with pytest.raises(RpcError) as missing:
        start(server, tmp_path, parentThreadId=str(uuid.uuid4()))
    assert missing.value.kind == "ThreadNotFound"
    with pytest.raises(RpcError) as malformed:
        start(server, tmp_path, parentThreadId="../not-an-id")
    assert malformed.value.kind == "InvalidId"
    with pytest.raises(RpcError) as listed:
        server.request("thread/list", {"parentThreadId": "not-an-id"})
    assert listed.value.kind == "InvalidId"
    assert server.request("thread/list", {})["threads"] == []  # nothing was started


def test_a_sub_agent_thread_whose_parent_was_deleted_is_listed_at_the_top(
    spawn: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """A child is reached through its parent; with the parent gone it would be reached by
    nothing (an imported sub-agent whose main transcript is missing is the same case)."""
    server = spawn()
    server.initialize([str(tmp_path)])
    parent = start(server, tmp_path, title="parent")
    parent_id = parent["thread"]["threadId"]
    child = start(server, tmp_path, title="sub-agent", parentThreadId=parent_id)
    server.request("thread/close", {"threadId": parent_id, "sessionId": parent["sessionId"]})
    server.request("thread/delete", {"threadId": parent_id})
    (listed,) = server.request("thread/list", {})["threads"]
    assert listed["threadId"] == child["thread"]["threadId"]
    assert listed["parentThreadId"] == parent_id  # it still says where it came from
    again = spawn()  # the same from another process's index (or the shared table)
    again.initialize([str(tmp_path)])
    assert [t["title"] for t in again.request("thread/list", {})["threads"]] == ["sub-agent"]


def test_the_parents_cost_shows_its_sub_agents_as_a_line_and_in_the_total(
    spawn: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    server = spawn()
    server.initialize([str(tmp_path)])
    parent = start(server, tmp_path, title="parent")
    parent_id = parent["thread"]["threadId"]
    child = start(server, tmp_path, title="sub-agent", parentThreadId=parent_id,
                  parentOperationId="call-1")  # fmt: skip
    child_id = child["thread"]["threadId"]
    record(server, child, spent("model-a", 3000, 100, 0.25))
    server.request("thread/close", {"threadId": child_id, "sessionId": child["sessionId"]})
    # The harness records the call that ran the sub-agent with the thread it started.
    record(
        server, parent, spent("model-a", 1000, 50, 0.5),
        {"type": "operation", "id": "op-1", "operationId": "call-1", "tool": "Agent",
         "effect": "side_effect", "state": "committed", "resultPersisted": True,
         "result": "done", "childThreadId": child_id},
    )  # fmt: skip
    server.request("thread/close", {"threadId": parent_id, "sessionId": parent["sessionId"]})
    report = server.request("thread/resume", {"threadId": parent_id})
    (cost,) = [s["state"] for s in report["subsystems"] if s["name"] == "cost"]
    assert cost["own"] == {"inputTokens": 1000, "outputTokens": 50, "usd": 0.5}
    line = cost["subagents"]
    assert (line["threads"], line["inputTokens"], line["outputTokens"], line["usd"]) == (
        1, 3000, 100, 0.25,
    )  # fmt: skip
    assert line["items"] == [{"threadId": child_id, "title": "sub-agent", "inputTokens": 3000,
                              "outputTokens": 100, "usd": 0.25}]  # fmt: skip
    assert (cost["inputTokens"], cost["outputTokens"], cost["usd"]) == (4000, 150, 0.75)
    assert cost["byModel"]["model-a"]["usd"] == 0.75


def thread_notices(server: ServerProcess, since: int) -> list[tuple[str, str, Any]]:
    """(method, threadId, childCount) of the thread notifications after the first `since`."""
    threads = [(n["method"], n["params"]["thread"]) for n in server.notifications[since:]
               if n["method"] in ("thread/started", "thread/updated")]  # fmt: skip
    return [(method, thread["threadId"], thread.get("childCount")) for method, thread in threads]


def test_notifications_carry_child_counts_and_a_sub_agent_change_updates_its_parents(
    spawn: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """A client keeps its tree current from notifications: each ThreadInfo in them carries
    `childCount` as a listing would, and starting, archiving or deleting a sub-agent's
    thread is followed by its parent's row with the new count."""
    server = spawn()
    server.initialize([str(tmp_path)])
    server.request("thread/list", {})  # a client listing: from here it has counts to keep
    seen = len(server.notifications)
    parent = start(server, tmp_path, title="parent")
    parent_id = parent["thread"]["threadId"]
    assert thread_notices(server, seen) == [("thread/started", parent_id, 0)]
    assert parent["thread"]["childCount"] is None  # an answer is a snapshot: not counted
    seen = len(server.notifications)
    child = start(server, tmp_path, title="sub-agent", parentThreadId=parent_id)
    child_id = child["thread"]["threadId"]
    # Sent before the answer: the child's start, then its parent with one child.
    assert thread_notices(server, seen) == [
        ("thread/started", child_id, 0),
        ("thread/updated", parent_id, 1),
    ]
    seen, updates = len(server.notifications), server_updates(server)
    record(server, parent, spent("model-a", 10, 5, 0.01))
    server.wait_notification("thread/updated", count=updates + 1)  # coalesced, after it
    assert thread_notices(server, seen) == [("thread/updated", parent_id, 1)]
    seen = len(server.notifications)
    server.request("thread/close", {"threadId": child_id, "sessionId": child["sessionId"]})
    server.request("thread/archive", {"threadId": child_id})
    assert thread_notices(server, seen) == [
        ("thread/updated", child_id, 0),
        ("thread/updated", parent_id, 0),  # archived children are not listed
    ]
    seen = len(server.notifications)
    server.request("thread/unarchive", {"threadId": child_id})
    server.request("thread/setTitle", {"threadId": parent_id, "title": "renamed"})
    assert thread_notices(server, seen) == [
        ("thread/updated", child_id, 0),
        ("thread/updated", parent_id, 1),
        ("thread/updated", parent_id, 1),  # the rename carries the count too
    ]
    seen = len(server.notifications)
    server.request("thread/delete", {"threadId": child_id})
    assert thread_notices(server, seen) == [
        ("thread/updated", child_id, None),  # `deleted`: nothing left to count
        ("thread/updated", parent_id, 0),
    ]
    # What the notifications said is what a listing says.
    (listed,) = server.request("thread/list", {})["threads"]
    assert (listed["threadId"], listed["childCount"]) == (parent_id, 0)


def server_updates(server: ServerProcess) -> int:
    return sum(n["method"] == "thread/updated" for n in server.notifications)
