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
from tests.rpc_client import RpcError, ServerProcess

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
